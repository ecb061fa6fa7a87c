/* backend.h - implementations under test behind one interface: the
 * built-in CPU reference, and shared libraries loaded at run time through
 * the plug-in ABI (the hip backend, or a user's kernels).
 *
 * A plug-in is either loaded into this process (dsv4_backend_open: `list`,
 * `bench`) or into a child process of its own (dsv4_backend_open_isolated:
 * `run` and `check`), where a crash, exit(), abort or hang of the
 * implementation ends that process only and becomes the case's ERROR.
 * The actual backend ("actual:FILE", --actual FILE) runs nothing: each
 * case's outputs come from an actuals file (actual.h). */
#ifndef DSV4_BACKEND_H
#define DSV4_BACKEND_H

#include "../include/dsv4_plugin.h"
#include "op.h"

struct dsv4_isolated;
struct dsv4_actual;

/* "actual:FILE" as an implementation: the outputs in an actuals file. */
#define DSV4_ACTUAL_IMPL "actual:"

/* The case a call belongs to: ABI 2 plug-ins are told it, the actual
 * backend looks its outputs up by name. */
typedef struct dsv4_case_id {
    const char *name;   /* the case's name */
    const char *golden; /* the golden file its inputs come from, or NULL */
} dsv4_case_id;

typedef struct dsv4_backend {
    char name[256];
    int is_ref;
    void *dl;                 /* dlopen handle for in-process plug-ins */
    const dsv4_plugin *plugin;
    int device;               /* as passed to the plug-in's init (-1 = default) */
    /* Isolated plug-ins: the child process that hosts the plug-in (isolate.h)
     * and what the child loads; NULL for the reference and in-process plug-ins. */
    struct dsv4_isolated *iso;
    struct dsv4_isolated_target *target;
    struct dsv4_actual *actual; /* the actual backend's file; NULL otherwise */
} dsv4_backend;

/* impl: "ref", "hip" (build/libdsv4_hip.so beside the executable, or
 * $DSV4_HIP_LIB), "actual:FILE" (an actuals file), or a path to a
 * plug-in .so.  DSV4_ESKIP with a one-line
 * reason when the backend cannot run here (no GPU, not built). */
int dsv4_backend_open(const char *impl, int device, dsv4_backend *b, dsv4_status *st);
/* The same with the plug-in in a child process; each call into it may take
 * at most timeout_s seconds.  A plug-in's own refusal (wrong ABI, init says
 * skip) is returned as by dsv4_backend_open; a child that dies or hangs
 * while loading gives DSV4_OK, and every run then reports why. */
int dsv4_backend_open_isolated(const char *impl, int device, double timeout_s, dsv4_backend *b,
                               dsv4_status *st);
void dsv4_backend_close(dsv4_backend *b);
/* Whether b implements op in that variant (the actual backend: whether
 * any case's outputs may be in its file, i.e. always). */
int dsv4_backend_supports(const dsv4_backend *b, const dsv4_op *op, int variant);
/* Whether b runs this case: supports(), and for the actual backend its
 * file has the case.  0 with the reason in why ("not provided: ..."). */
int dsv4_backend_provides(const dsv4_backend *b, const dsv4_op *op, int variant, const dsv4_case_id *id,
                          char *why, size_t len);
/* Runs op on inputs into the pre-allocated outputs.  A plug-in sees its own
 * copy of every input and output, each between guard pages that are checked
 * after the call, and an input it changed is reported (DSV4_ERUNTIME). */
int dsv4_backend_run(const dsv4_backend *b, const dsv4_op *op, const dsv4_opctx *c, const dsv4_case_id *id,
                     const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st);
/* Device timing through the plug-in's time hook; DSV4_ESKIP if it has none
 * (and for isolated plug-ins). */
int dsv4_backend_time(const dsv4_backend *b, const dsv4_op *op, const dsv4_opctx *c,
                      const dsv4_tensors *in, dsv4_tensors *out, int iters, double *ms,
                      dsv4_status *st);

#endif
