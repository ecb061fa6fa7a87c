/* dsv4_plugin.h - the versioned C ABI for implementations under test.
 *
 * A plug-in is a shared library (CPU or GPU kernels; the hip backend
 * build/libdsv4_hip.so is one) that exports
 *
 *     const dsv4_plugin *dsv4_plugin_entry(void);
 *
 * dsv4check loads it with `--impl path/to/lib.so` and, for each case whose
 * op and variant the plug-in supports, hands it the case's inputs and
 * pre-allocated outputs (shapes, dtypes and initial contents as the op
 * defines them; see `dsv4check list`).  This header depends on nothing but
 * the C standard library, so a plug-in needs no other dsv4check header.
 *
 * Compatibility: abi_version is the version the plug-in was written for,
 * DSV4_PLUGIN_ABI_VERSION when built against this header; any change to
 * these structs or the call contract bumps it.  dsv4check loads versions
 * DSV4_PLUGIN_ABI_OLDEST to DSV4_PLUGIN_ABI_VERSION and refuses any other
 * (exit 2) before any of its functions is called.
 *   ABI 1: run() gets op, variant, parameters and tensors.
 *   ABI 2: adds run2(), which also gets the case (dsv4_plugin_case: its name,
 *          seed and golden file); when run2 is set it is called instead of
 *          run.  An ABI 1 plug-in (a struct without run2) loads and runs as
 *          before: dsv4check never reads past the fields its version has.
 *
 * Processes and threads: all calls into one loaded copy come from one
 * thread.  `run` and `check` load the plug-in in a child process of their
 * own (each of the N workers of `-j N` has one), which calls init(device)
 * itself (after fork: a GPU runtime is never inherited); `list` and `bench`
 * load it in the dsv4check process.  A crash, exit(), abort or signal in
 * the plug-in ends that child only: the case it was running is an ERROR
 * (exit 3) and the next case gets a fresh child.  A run() still going after
 * --timeout seconds (default 600) is killed the same way.
 * The name may be rewritten by init (dsv4check reads it again after init,
 * at most 255 bytes).
 *
 * Memory: run() sees its own copies of the inputs and outputs, each between
 * guard regions of at least a page that are checked after the call (a write
 * past either end is an ERROR naming the tensor), and an input that differs
 * from what dsv4check passed is an ERROR naming it and its first changed
 * element.  err is read up to errlen bytes; its last byte is forced to NUL.
 * A plug-in may assume nothing about the bytes outside a tensor: an input's
 * guards hold the poison of its dtype (dsv4_poison.h: NaN, an index no
 * tensor has), or zeros in the reruns that, after a failure, find out
 * whether its outputs depend on bytes outside an input (the hint then says
 * "reads past the end of input 'X'"); outputs' guards hold a canary.
 * bench's time() gets the caller's tensors without guards.
 * tests/plugin_example.c is a complete example. */
#ifndef DSV4_PLUGIN_H
#define DSV4_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#define DSV4_PLUGIN_ABI_VERSION 2 /* what this header describes */
#define DSV4_PLUGIN_ABI_OLDEST 1  /* the oldest version dsv4check still loads */

/* Dtype codes: the order of dsv4_dtype (ref/tensor.h). */
enum {
    DSV4_PLUGIN_FLOAT64 = 0,
    DSV4_PLUGIN_FLOAT32,
    DSV4_PLUGIN_BFLOAT16,
    DSV4_PLUGIN_FLOAT16,
    DSV4_PLUGIN_INT64,
    DSV4_PLUGIN_INT32,
    DSV4_PLUGIN_UINT8,
    DSV4_PLUGIN_FLOAT8_E4M3FN,
    DSV4_PLUGIN_FLOAT8_E4M3FNUZ,
    DSV4_PLUGIN_FLOAT8_E8M0FNU,
    DSV4_PLUGIN_FLOAT4_E2M1FN_X2,
    DSV4_PLUGIN_BYTES
};

/* Parameter kinds. */
enum { DSV4_PLUGIN_INT = 0, DSV4_PLUGIN_FLOAT, DSV4_PLUGIN_STRING, DSV4_PLUGIN_INTLIST };

/* Return codes of init and run (the CLI's exit codes). */
enum {
    DSV4_PLUGIN_OK = 0,
    DSV4_PLUGIN_EINPUT = 2,   /* the inputs are not acceptable */
    DSV4_PLUGIN_ERUNTIME = 3, /* a launch or device error */
    DSV4_PLUGIN_ESKIP = 77    /* cannot run here (no device, unsupported) */
};

typedef struct dsv4_plugin_tensor {
    const char *name;
    int dtype;
    int ndim;
    const int64_t *shape;
    void *data; /* host memory, contiguous row-major */
    size_t nbytes;
} dsv4_plugin_tensor;

typedef struct dsv4_plugin_param {
    const char *name;
    int kind;
    int64_t i;
    double f;
    const char *s;
    int n;               /* INTLIST length */
    const int64_t *list;
} dsv4_plugin_param;

/* ABI 2: the case a run2() call belongs to. */
typedef struct dsv4_plugin_case {
    size_t size;      /* sizeof(dsv4_plugin_case) in the dsv4check that calls:
                         later versions only add fields at the end */
    const char *name; /* the case's name (in its suite, or a golden's case
                         attribute): the key of an actuals file's group */
    const char *op;
    const char *variant;
    uint64_t seed;    /* the seed its inputs were generated from */
    const dsv4_plugin_param *params;
    int nparams;
    const char *golden; /* the golden file its inputs come from, or NULL */
    /* Present when size reaches them (dsv4check 0.1.0 on): in an
     * attribution rerun after a failure, the guard regions of input
     * guard_zeroed_input (its index; -1: none) on the sides
     * guard_zeroed_sides (DSV4_GUARD_BEFORE 1 | DSV4_GUARD_AFTER 2 of
     * dsv4_poison.h) hold zeros instead of the poison.  A plug-in that puts
     * its own guards around device copies of the inputs fills them the same
     * way (dsv4_poison_fill), so that its reads past an input are found. */
    int guard_zeroed_input;
    int guard_zeroed_sides;
} dsv4_plugin_case;

typedef struct dsv4_plugin {
    int abi_version; /* DSV4_PLUGIN_ABI_VERSION */
    const char *name;
    /* Once, before any run: pick device (-1 = default).  77 = cannot run here. */
    int (*init)(int device, char *err, size_t errlen);
    /* Non-zero if this plug-in implements op in that variant (a run or
     * run2 may still decline one case with DSV4_PLUGIN_ESKIP). */
    int (*supports)(const char *op, const char *variant);
    /* Runs one case.  Inputs are read-only host tensors; outputs are host
     * tensors already allocated (and filled as the op defines) that the
     * plug-in overwrites.  Returns a code above; err gets a message (at most
     * errlen bytes with the NUL). */
    int (*run)(const char *op, const char *variant, const dsv4_plugin_param *params, int nparams,
               const dsv4_plugin_tensor *inputs, int ninputs, dsv4_plugin_tensor *outputs,
               int noutputs, char *err, size_t errlen);
    /* Optional: time one case on the device (bench); returns 0 and *ms, the
     * time of one launch with the inputs already on the device.  The
     * pseudo-op DSV4_PLUGIN_COPY_OP (int param "bytes", no tensors) times a
     * device-to-device copy of that many bytes: the bench's bandwidth
     * ceiling.  The pseudo-op DSV4_PLUGIN_MMA_OP (int param "flop", no
     * tensors) times that many bf16 matrix-unit FLOPs (fp32 accumulate) from
     * registers: the ceiling of the compute lines.  The pseudo-op
     * DSV4_PLUGIN_CODEC_CHECK_OP (no params, one int64 output of 3) checks
     * the device's hardware number conversions, where kernels use them,
     * against the integer rules on every fp32 input; it writes {conversions
     * checked (0: the kernels use none), mismatches, first mismatching fp32
     * bit pattern} and returns an error when any input differs.  A plug-in
     * without it refuses the pseudo-op with any error but
     * DSV4_PLUGIN_ERUNTIME, which the bench takes as a failed check. */
    int (*time)(const char *op, const char *variant, const dsv4_plugin_param *params, int nparams,
                const dsv4_plugin_tensor *inputs, int ninputs, dsv4_plugin_tensor *outputs,
                int noutputs, int iters, double *ms, char *err, size_t errlen);
    void (*fini)(void);
    /* ABI 2 (leave NULL to have run called): runs one case, as run does,
     * told which case it is. */
    int (*run2)(const dsv4_plugin_case *cs, const dsv4_plugin_tensor *inputs, int ninputs,
                dsv4_plugin_tensor *outputs, int noutputs, char *err, size_t errlen);
} dsv4_plugin;

#define DSV4_PLUGIN_COPY_OP "dsv4_device_copy"
#define DSV4_PLUGIN_MMA_OP "dsv4_device_mma"
#define DSV4_PLUGIN_CODEC_CHECK_OP "dsv4_device_codec_check"

typedef const dsv4_plugin *(*dsv4_plugin_entry_fn)(void);

#endif
