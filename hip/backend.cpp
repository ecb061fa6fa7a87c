/* backend.cpp - the hip backend: a dsv4check plug-in (include/dsv4_plugin.h)
 * that runs GPU kernels, built with hipcc for AMD or nvcc -x cu for NVIDIA
 * (gpu_compat.h).  Tensors arrive in host memory: run() copies them to
 * device buffers, surrounds every output with guard regions, launches,
 * checks the guards and copies the outputs back.  Device memory only (no
 * managed memory). */
#include <stdarg.h>
#include <stdlib.h>

#include "kernels.h"

/* ---- the kernel table: one kernel per op of ops/ops.def (see kernels.h) ---- */
#define DSV4_OP(name) extern dsv4_hip_kernel dsv4_hip_##name;
#include "../ops/ops.def"
#undef DSV4_OP

#define DSV4_OP(name) &dsv4_hip_##name,
static const dsv4_hip_kernel *const kernel_table[] = {
#include "../ops/ops.def"
};
#undef DSV4_OP

/* Guard regions: GUARD bytes of CANARY before and after every device
 * output; a write past either end (the seeds report an out-of-bounds
 * access on gfx950, docs/semantics/indices.md A6.3) is named instead of
 * corrupting a neighbour. */
#define GUARD 4096
#define CANARY 0xC3

/* Pseudo-op of time() (DSV4_PLUGIN_COPY_OP): a device-to-device copy kernel
 * over param "bytes", the bandwidth ceiling the bench compares kernels with. */

static int g_device = -1;
static hipDeviceProp_t g_prop;

static int fail(char *err, size_t errlen, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return rc;
}

static int hip_fail(char *err, size_t errlen, const char *what, hipError_t e)
{
    return fail(err, errlen, DSV4_PLUGIN_ERUNTIME, "%s: %s (%s)", what, hipGetErrorString(e),
                hipGetErrorName(e));
}

static int find_kernel(const char *op, const char *variant, const dsv4_hip_kernel **kk, int *vi)
{
    for (size_t i = 0; i < sizeof kernel_table / sizeof kernel_table[0]; i++) {
        const dsv4_hip_kernel *k = kernel_table[i];
        if (strcmp(k->op, op) != 0)
            continue;
        for (int v = 0; k->variants[v]; v++)
            if (strcmp(k->variants[v], variant) == 0) {
                *kk = k;
                *vi = v;
                return 1;
            }
    }
    return 0;
}

static int plugin_init(int device, char *err, size_t errlen)
{
    int n = 0;
    hipError_t e = hipGetDeviceCount(&n);
    if (e != hipSuccess || n == 0)
        return fail(err, errlen, DSV4_PLUGIN_ESKIP, "no GPU: hipGetDeviceCount returned %d (%s)", n,
                    e != hipSuccess ? hipGetErrorName(e) : "no device");
    if (device >= n)
        return fail(err, errlen, DSV4_PLUGIN_EINPUT, "--device %d: this machine has %d GPU%s", device, n,
                    n == 1 ? "" : "s");
    g_device = device < 0 ? 0 : device;
    if ((e = hipSetDevice(g_device)) != hipSuccess)
        return hip_fail(err, errlen, "hipSetDevice", e);
    if ((e = hipGetDeviceProperties(&g_prop, g_device)) != hipSuccess)
        return hip_fail(err, errlen, "hipGetDeviceProperties", e);
    return DSV4_PLUGIN_OK;
}

static int plugin_supports(const char *op, const char *variant)
{
    const dsv4_hip_kernel *k;
    int v;
    return find_kernel(op, variant, &k, &v);
}

/* Device copies of one case's tensors. */
typedef struct dev_case {
    void *din[64];
    unsigned char *dout_base[64]; /* allocation: guard | data | guard */
    void *dout[64];
} dev_case;

static void dev_free(dev_case *d)
{
    for (int k = 0; k < 64; k++) {
        if (d->din[k])
            (void)hipFree(d->din[k]);
        if (d->dout_base[k])
            (void)hipFree(d->dout_base[k]);
    }
    memset(d, 0, sizeof *d);
}

/* Inputs uploaded; outputs uploaded with their initial contents (the op
 * defines them, e.g. poison) between canary-filled guards. */
static int dev_setup(const dsv4_hip_call *c, dev_case *d, char *err, size_t errlen)
{
    hipError_t e;
    memset(d, 0, sizeof *d);
    if (c->nin > 64 || c->nout > 64)
        return fail(err, errlen, DSV4_PLUGIN_EINPUT, "too many tensors");
    for (int k = 0; k < c->nin; k++) {
        size_t n = c->in[k].nbytes;
        if ((e = hipMalloc(&d->din[k], n ? n : 1)) != hipSuccess)
            return hip_fail(err, errlen, "hipMalloc (input)", e);
        if (n && (e = hipMemcpy(d->din[k], c->in[k].data, n, hipMemcpyHostToDevice)) != hipSuccess)
            return hip_fail(err, errlen, "hipMemcpy (input upload)", e);
    }
    for (int k = 0; k < c->nout; k++) {
        size_t n = c->out[k].nbytes;
        if ((e = hipMalloc((void **)&d->dout_base[k], n + 2 * GUARD)) != hipSuccess)
            return hip_fail(err, errlen, "hipMalloc (output)", e);
        d->dout[k] = d->dout_base[k] + GUARD;
        if ((e = hipMemset(d->dout_base[k], CANARY, GUARD)) != hipSuccess ||
            (e = hipMemset(d->dout_base[k] + GUARD + n, CANARY, GUARD)) != hipSuccess)
            return hip_fail(err, errlen, "hipMemset (guards)", e);
        if (n && (e = hipMemcpy(d->dout[k], c->out[k].data, n, hipMemcpyHostToDevice)) != hipSuccess)
            return hip_fail(err, errlen, "hipMemcpy (output upload)", e);
    }
    return DSV4_PLUGIN_OK;
}

/* Both guards of every output still hold the canary. */
static int check_guards(const dsv4_hip_call *c, const dev_case *d, char *err, size_t errlen)
{
    static unsigned char g[GUARD];
    for (int k = 0; k < c->nout; k++)
        for (int side = 0; side < 2; side++) {
            const unsigned char *src = d->dout_base[k] + (side ? GUARD + c->out[k].nbytes : 0);
            hipError_t e = hipMemcpy(g, src, GUARD, hipMemcpyDeviceToHost);
            if (e != hipSuccess)
                return hip_fail(err, errlen, "hipMemcpy (guard)", e);
            for (int i = 0; i < GUARD; i++)
                if (g[i] != CANARY)
                    return fail(err, errlen, DSV4_PLUGIN_ERUNTIME,
                                "%s: device output '%s' written out of bounds %s the buffer (guard byte "
                                "%d of %d is 0x%02x)",
                                c->op, c->out[k].name, side ? "after" : "before",
                                side ? i : i - GUARD, GUARD, g[i]);
        }
    return DSV4_PLUGIN_OK;
}

static int make_call(const char *op, const char *variant, const dsv4_plugin_param *params, int nparams,
                     const dsv4_plugin_tensor *inputs, int ninputs, dsv4_plugin_tensor *outputs,
                     int noutputs, dsv4_hip_call *c, const dsv4_hip_kernel **k, char *err, size_t errlen)
{
    int v;
    if (g_device < 0)
        return fail(err, errlen, DSV4_PLUGIN_ERUNTIME, "hip backend used before init");
    if (!find_kernel(op, variant, k, &v))
        return fail(err, errlen, DSV4_PLUGIN_ESKIP, "%s (%s): no hip kernel", op, variant);
    *c = (dsv4_hip_call){op, v, params, nparams, inputs, ninputs, outputs, noutputs, NULL, NULL, &g_prop};
    return (*k)->check(c, err, errlen);
}

static int plugin_run(const char *op, const char *variant, const dsv4_plugin_param *params, int nparams,
                      const dsv4_plugin_tensor *inputs, int ninputs, dsv4_plugin_tensor *outputs,
                      int noutputs, char *err, size_t errlen)
{
    dsv4_hip_call c;
    const dsv4_hip_kernel *k;
    int rc = make_call(op, variant, params, nparams, inputs, ninputs, outputs, noutputs, &c, &k, err, errlen);
    if (rc)
        return rc;
    dev_case d;
    hipError_t e;
    if (!(rc = dev_setup(&c, &d, err, errlen))) {
        c.din = d.din;
        c.dout = d.dout;
        if ((e = k->launch(&c, 0)) != hipSuccess)
            rc = hip_fail(err, errlen, "kernel launch", e);
        else if ((e = hipDeviceSynchronize()) != hipSuccess)
            rc = hip_fail(err, errlen, "kernel execution", e);
        else
            rc = check_guards(&c, &d, err, errlen);
        for (int i = 0; i < noutputs && !rc; i++)
            if (outputs[i].nbytes &&
                (e = hipMemcpy(outputs[i].data, d.dout[i], outputs[i].nbytes, hipMemcpyDeviceToHost)) !=
                    hipSuccess)
                rc = hip_fail(err, errlen, "hipMemcpy (output download)", e);
    }
    dev_free(&d);
    return rc;
}

/* Grid-stride 16-byte copy: the bandwidth a memory-bound kernel can reach. */
__global__ void copy_kernel(const int4 *__restrict__ src, int4 *__restrict__ dst, size_t n)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        dst[i] = src[i];
}

/* Events around iters launches (after one warm-up); ms per launch. */
template <typename F> static int time_launches(F launch, int iters, double *ms, char *err, size_t errlen)
{
    hipEvent_t a, b;
    hipError_t e;
    float total = 0;
    if ((e = hipEventCreate(&a)) != hipSuccess)
        return hip_fail(err, errlen, "hipEventCreate", e);
    if ((e = hipEventCreate(&b)) != hipSuccess) {
        (void)hipEventDestroy(a);
        return hip_fail(err, errlen, "hipEventCreate", e);
    }
    int rc = DSV4_PLUGIN_OK;
    if ((e = launch()) != hipSuccess || (e = hipDeviceSynchronize()) != hipSuccess)
        rc = hip_fail(err, errlen, "warm-up launch", e);
    if (!rc && (e = hipEventRecord(a, 0)) != hipSuccess)
        rc = hip_fail(err, errlen, "hipEventRecord", e);
    for (int i = 0; i < iters && !rc; i++)
        if ((e = launch()) != hipSuccess)
            rc = hip_fail(err, errlen, "kernel launch", e);
    if (!rc && ((e = hipEventRecord(b, 0)) != hipSuccess || (e = hipEventSynchronize(b)) != hipSuccess ||
                (e = hipEventElapsedTime(&total, a, b)) != hipSuccess))
        rc = hip_fail(err, errlen, "timing", e);
    (void)hipEventDestroy(a);
    (void)hipEventDestroy(b);
    if (!rc)
        *ms = (double)total / iters;
    return rc;
}

static int time_copy(const dsv4_plugin_param *params, int nparams, int iters, double *ms, char *err,
                     size_t errlen)
{
    size_t bytes = (size_t)1 << 30;
    for (int i = 0; i < nparams; i++)
        if (strcmp(params[i].name, "bytes") == 0 && params[i].kind == DSV4_PLUGIN_INT && params[i].i >= 16)
            bytes = (size_t)params[i].i & ~(size_t)15;
    void *src = NULL, *dst = NULL;
    hipError_t e;
    int rc = DSV4_PLUGIN_OK;
    if ((e = hipMalloc(&src, bytes)) != hipSuccess || (e = hipMalloc(&dst, bytes)) != hipSuccess)
        rc = hip_fail(err, errlen, "hipMalloc (copy buffers)", e);
    else if ((e = hipMemset(src, 0x5A, bytes)) != hipSuccess)
        rc = hip_fail(err, errlen, "hipMemset", e);
    if (!rc) {
        const unsigned blocks = (unsigned)g_prop.multiProcessorCount * 8;
        rc = time_launches(
            [&]() {
                hipLaunchKernelGGL(copy_kernel, dim3(blocks), dim3(256), 0, 0, (const int4 *)src, (int4 *)dst,
                                   bytes / 16);
                return hipGetLastError();
            },
            iters, ms, err, errlen);
    }
    if (src)
        (void)hipFree(src);
    if (dst)
        (void)hipFree(dst);
    return rc;
}

static int plugin_time(const char *op, const char *variant, const dsv4_plugin_param *params, int nparams,
                       const dsv4_plugin_tensor *inputs, int ninputs, dsv4_plugin_tensor *outputs,
                       int noutputs, int iters, double *ms, char *err, size_t errlen)
{
    if (iters < 1)
        iters = 1;
    if (strcmp(op, DSV4_PLUGIN_COPY_OP) == 0) {
        if (g_device < 0)
            return fail(err, errlen, DSV4_PLUGIN_ERUNTIME, "hip backend used before init");
        return time_copy(params, nparams, iters, ms, err, errlen);
    }
    dsv4_hip_call c;
    const dsv4_hip_kernel *k;
    int rc = make_call(op, variant, params, nparams, inputs, ninputs, outputs, noutputs, &c, &k, err, errlen);
    if (rc)
        return rc;
    dev_case d;
    if (!(rc = dev_setup(&c, &d, err, errlen))) {
        c.din = d.din;
        c.dout = d.dout;
        rc = time_launches([&]() { return k->launch(&c, 0); }, iters, ms, err, errlen);
        if (!rc) {
            hipError_t e = hipDeviceSynchronize();
            rc = e != hipSuccess ? hip_fail(err, errlen, "kernel execution", e) : check_guards(&c, &d, err, errlen);
        }
    }
    dev_free(&d);
    return rc;
}

static void plugin_fini(void)
{
    g_device = -1;
}

static const dsv4_plugin plugin = {
    DSV4_PLUGIN_ABI_VERSION, "hip-" GPU_PLATFORM, plugin_init, plugin_supports, plugin_run, plugin_time,
    plugin_fini, NULL, /* run2: the case is not needed */
};

extern "C" __attribute__((visibility("default"))) const dsv4_plugin *dsv4_plugin_entry(void)
{
    return &plugin;
}
