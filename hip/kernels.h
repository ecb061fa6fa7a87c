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

#include <initializer_list>

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

/* The state of a single-pass (decoupled look-back) scan over `blocks`
 * blocks (idx_common.h lookback_*): one status word per block and a block
 * ticket counter, in a buffer of their own (never the scratch above, whose
 * contents are undefined), zeroed when allocated or grown.  `epoch` is a
 * host-side launch counter, new on every call and never 0: a status word
 * is this launch's only when its high 32 bits equal it, so no memset is
 * needed between launches.  The ticket is 0 on entry (its last taker
 * resets it).  Launches that use it must not overlap: every launch here
 * is on one stream, in order.  Valid until the next call. */
typedef struct dsv4_hip_lookback {
    unsigned long long *status; /* [blocks] */
    unsigned *ticket;
    unsigned epoch;
} dsv4_hip_lookback;
hipError_t dsv4_hip_lookback_state(size_t blocks, hipStream_t s, dsv4_hip_lookback *st);

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

/* A float parameter, or DSV4_PLUGIN_EINPUT naming it. */
static inline int dsv4_hip_float(const dsv4_hip_call *c, const char *name, double *v, char *err, size_t errlen)
{
    const dsv4_plugin_param *p = dsv4_hip_param(c, name);
    if (!p || p->kind != DSV4_PLUGIN_FLOAT) {
        snprintf(err, errlen, "%s: float parameter '%s' missing", c->op, name);
        return DSV4_PLUGIN_EINPUT;
    }
    *v = p->f;
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

/* Dtype names as dsv4check spells them (ref/tensor.c), by dtype code. */
static const char *const dsv4_hip_dtype_names[] = {
    "float64", "float32", "bfloat16", "float16", "int64", "int32", "uint8", "float8_e4m3fn", "float8_e4m3fnuz",
    "float8_e8m0fnu", "float4_e2m1fn_x2", "bytes"};

/* Calls word(text, length) for each space-separated word of list, stopping
 * at the first nonzero return. */
template <class Word> static inline int dsv4_hip_each_word(const char *list, Word word)
{
    for (const char *p = list + strspn(list, " "); *p; p += strspn(p, " ")) {
        const size_t len = strcspn(p, " ");
        const int rc = word(p, len);
        if (rc)
            return rc;
        p += len;
    }
    return DSV4_PLUGIN_OK;
}

/* A list that names fewer or more entries than the pointers given with it is
 * the kernel's mistake; reported like a bad input, naming the op. */
static inline int dsv4_hip_all_used(const dsv4_hip_call *c, const char *list, size_t used, size_t given, char *err,
                                    size_t errlen)
{
    if (used == given)
        return DSV4_PLUGIN_OK;
    snprintf(err, errlen, "%s: '%s' names %zu entries for %zu pointers", c->op, list, used, given);
    return DSV4_PLUGIN_EINPUT;
}

/* Every tensor of a signature "name:dtype:rank ... -> name:dtype:rank ..."
 * (inputs, then outputs), each checked as dsv4_hip_tensor does and its index
 * stored through the pointer of the same position in index.  One line of
 * names instead of a lookup call per tensor; a malformed signature is
 * reported like a bad input (it names the op). */
static inline int dsv4_hip_tensors(const dsv4_hip_call *c, const char *signature,
                                   std::initializer_list<int *> index, char *err, size_t errlen)
{
    int is_output = 0;
    size_t found = 0;
    const int rc = dsv4_hip_each_word(signature, [&](const char *p, size_t len) -> int {
        if (len == 2 && strncmp(p, "->", 2) == 0) {
            is_output = 1;
            return DSV4_PLUGIN_OK;
        }
        char name[64], dtype[32];
        int rank = -1, used = 0, code = -1;
        if (sscanf(p, "%63[^: ]:%31[^: ]:%d%n", name, dtype, &rank, &used) == 3 && (size_t)used == len)
            for (int d = 0; d < (int)(sizeof dsv4_hip_dtype_names / sizeof dsv4_hip_dtype_names[0]); d++)
                if (strcmp(dtype, dsv4_hip_dtype_names[d]) == 0)
                    code = d;
        if (code < 0 || found >= index.size()) {
            snprintf(err, errlen, "%s: signature entry '%.*s' is not name:dtype:rank or has no index", c->op,
                     (int)len, p);
            return DSV4_PLUGIN_EINPUT;
        }
        return dsv4_hip_tensor(c, is_output, name, code, rank, index.begin()[found++], err, errlen);
    });
    return rc ? rc : dsv4_hip_all_used(c, signature, found, index.size(), err, errlen);
}

/* The integer parameters named (space-separated) in names, each read as
 * dsv4_hip_int does into the pointer of the same position in value. */
static inline int dsv4_hip_ints(const dsv4_hip_call *c, const char *names, std::initializer_list<int64_t *> value,
                                char *err, size_t errlen)
{
    size_t found = 0;
    const int rc = dsv4_hip_each_word(names, [&](const char *p, size_t len) -> int {
        char name[64];
        if (len >= sizeof name || found >= value.size()) {
            snprintf(err, errlen, "%s: parameter list entry '%.*s' is too long or has no value", c->op, (int)len, p);
            return DSV4_PLUGIN_EINPUT;
        }
        memcpy(name, p, len);
        name[len] = '\0';
        return dsv4_hip_int(c, name, value.begin()[found++], err, errlen);
    });
    return rc ? rc : dsv4_hip_all_used(c, names, found, value.size(), err, errlen);
}

/* The leading dimensions of t, in order, into the variables dims point to
 * (t's rank already checked by the lookup that found it). */
template <class... Dim> static inline void dsv4_hip_dims(const dsv4_plugin_tensor &t, Dim *...dims)
{
    int k = 0;
    ((*dims = (Dim)t.shape[k++]), ...);
}

/* The check and the launch of a kernel whose host code starts from one shape
 * struct: shape_of(c, &s, err, errlen) reads it, then check_shape(c, s, err,
 * errlen) or launch_shape(c, s, stream) does the op's part.  The three are
 * found by argument-dependent lookup in the namespace of Shape, so each
 * kernel file keeps its own. */
template <class Shape> int dsv4_hip_check_shape(const dsv4_hip_call *c, char *err, size_t errlen)
{
    Shape s;
    const int rc = shape_of(c, &s, err, errlen);
    return rc ? rc : check_shape(c, s, err, errlen);
}

template <class Shape> hipError_t dsv4_hip_launch_shape(const dsv4_hip_call *c, hipStream_t stream)
{
    Shape s;
    char err[8]; /* the check has reported the message; here only the verdict counts */
    return shape_of(c, &s, err, sizeof err) ? hipErrorInvalidValue : launch_shape(c, s, stream);
}

/* The kernel of op (the table entry backend.cpp names) for host code written
 * as shape_of / check_shape / launch_shape over Shape.  Not const: clang's HIP
 * device pass would emit a const global (and its host function pointers) for
 * the device too. */
#define DSV4_HIP_SHAPE_KERNEL(op, variants, Shape) \
    dsv4_hip_kernel dsv4_hip_##op = {#op, variants, dsv4_hip_check_shape<Shape>, dsv4_hip_launch_shape<Shape>}

#endif
