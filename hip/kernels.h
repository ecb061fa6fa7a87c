/* kernels.h - how a kernel plugs into the hip backend (hip/backend.cpp).
 *
 * Adding a kernel = one file hip/<op>.cpp that defines a dsv4_hip_kernel
 * (host-side checks + a launcher that only enqueues work) and one line in
 * backend.cpp's kernel table.  The backend does the rest: device buffers,
 * guard regions around every output, upload of the initial output contents,
 * error reporting, download, and the event timer. */
#ifndef DSV4_HIP_KERNELS_H
#define DSV4_HIP_KERNELS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../include/dsv4_plugin.h"
#include "gpu_compat.h"

/* One case as a kernel sees it: the host tensors (shapes, and the values a
 * launcher may read on the host, e.g. for checks) and their device copies
 * in the same order. */
typedef struct dsv4_hip_call {
    const char *op;
    int variant;         /* index into the kernel's variants[] */
    const dsv4_plugin_param *params;
    int nparams;
    const dsv4_plugin_tensor *in;
    int nin;
    const dsv4_plugin_tensor *out;
    int nout;
    const void *const *din; /* device inputs, in[k] -> din[k] */
    void *const *dout;      /* device outputs (inside their guard regions) */
    const hipDeviceProp_t *prop;
} dsv4_hip_call;

typedef struct dsv4_hip_kernel {
    const char *op;
    const char *const *variants; /* NULL-terminated, the op's variant names this kernel implements */
    /* Host-side checks of everything the launch relies on for memory safety
     * (dtypes, shapes, index ranges); DSV4_PLUGIN_EINPUT and a message naming
     * the tensor or parameter.  Runs before any device allocation. */
    int (*check)(const dsv4_hip_call *c, char *err, size_t errlen);
    /* Enqueues the work on s; no synchronization.  Returns the launch error. */
    hipError_t (*launch)(const dsv4_hip_call *c, hipStream_t s);
} dsv4_hip_kernel;

/* A device scratch buffer of at least `bytes` for a launcher's
 * intermediates (e.g. split-K partials), owned by the backend: reused by
 * the next launch, grown when too small, freed at plug-in fini.  Valid
 * until the next call; its contents are undefined on entry. */
hipError_t dsv4_hip_scratch(size_t bytes, void **p);

/* Lookups by name; NULL / -1 when absent. */
static inline const dsv4_plugin_param *dsv4_hip_param(const dsv4_hip_call *c, const char *name)
{
    for (int k = 0; k < c->nparams; k++)
        if (strcmp(c->params[k].name, name) == 0)
            return &c->params[k];
    return NULL;
}

static inline int dsv4_hip_input(const dsv4_hip_call *c, const char *name)
{
    for (int k = 0; k < c->nin; k++)
        if (strcmp(c->in[k].name, name) == 0)
            return k;
    return -1;
}

static inline int dsv4_hip_output(const dsv4_hip_call *c, const char *name)
{
    for (int k = 0; k < c->nout; k++)
        if (strcmp(c->out[k].name, name) == 0)
            return k;
    return -1;
}

/* An integer parameter, or DSV4_PLUGIN_EINPUT naming it. */
static inline int dsv4_hip_int(const dsv4_hip_call *c, const char *name, int64_t *v, char *err,
                               size_t errlen)
{
    const dsv4_plugin_param *p = dsv4_hip_param(c, name);
    if (!p || p->kind != DSV4_PLUGIN_INT) {
        snprintf(err, errlen, "%s: integer parameter '%s' missing", c->op, name);
        return DSV4_PLUGIN_EINPUT;
    }
    *v = p->i;
    return DSV4_PLUGIN_OK;
}

/* A tensor of the given dtype and rank, or DSV4_PLUGIN_EINPUT naming it. */
static inline int dsv4_hip_tensor(const dsv4_hip_call *c, int is_output, const char *name, int dtype,
                                  int ndim, int *index, char *err, size_t errlen)
{
    int k = is_output ? dsv4_hip_output(c, name) : dsv4_hip_input(c, name);
    const dsv4_plugin_tensor *t = k < 0 ? NULL : is_output ? &c->out[k] : &c->in[k];
    if (!t) {
        snprintf(err, errlen, "%s: %s '%s' missing", c->op, is_output ? "output" : "input", name);
        return DSV4_PLUGIN_EINPUT;
    }
    if (t->dtype != dtype || t->ndim != ndim) {
        snprintf(err, errlen, "%s: '%s' has dtype code %d and rank %d, expected %d and %d", c->op, name,
                 t->dtype, t->ndim, dtype, ndim);
        return DSV4_PLUGIN_EINPUT;
    }
    *index = k;
    return DSV4_PLUGIN_OK;
}

#endif
