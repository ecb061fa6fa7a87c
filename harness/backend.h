/* backend.h - implementations under test behind one interface (design.md
 * section 3): the built-in CPU reference, and shared libraries loaded at run
 * time through the plug-in ABI (the hip backend, or a user's kernels). */
#ifndef DSV4_BACKEND_H
#define DSV4_BACKEND_H

#include "../include/dsv4_plugin.h"
#include "op.h"

typedef struct dsv4_backend {
    char name[256];
    int is_ref;
    void *dl;                 /* dlopen handle for plug-ins */
    const dsv4_plugin *plugin;
    int device;               /* as passed to the plug-in's init (-1 = default) */
} dsv4_backend;

/* impl: "ref", "hip" (build/libdsv4_hip.so beside the executable, or
 * $DSV4_HIP_LIB), or a path to a plug-in .so.  DSV4_ESKIP with a one-line
 * reason when the backend cannot run here (no GPU, not built). */
int dsv4_backend_open(const char *impl, int device, dsv4_backend *b, dsv4_status *st);
void dsv4_backend_close(dsv4_backend *b);
int dsv4_backend_supports(const dsv4_backend *b, const dsv4_op *op, int variant);
/* Runs op on inputs into the pre-allocated outputs. */
int dsv4_backend_run(const dsv4_backend *b, const dsv4_op *op, const dsv4_opctx *c,
                     const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st);
/* Device timing through the plug-in's time hook; DSV4_ESKIP if it has none. */
int dsv4_backend_time(const dsv4_backend *b, const dsv4_op *op, const dsv4_opctx *c,
                      const dsv4_tensors *in, dsv4_tensors *out, int iters, double *ms,
                      dsv4_status *st);

#endif
