/* backend.cpp - the hip backend: a dsv4check plug-in (include/dsv4_plugin.h)
 * that runs GPU kernels, built with hipcc for AMD or nvcc -x cu for NVIDIA
 * (gpu_compat.h).  Tensors arrive in host memory: run() copies them to
 * device buffers, surrounds every output with canary guard regions and
 * every input with guards of its dtype's poison (include/dsv4_poison.h: a
 * kernel reading past an input computes with NaN or an impossible index),
 * launches, checks the guards and copies the outputs back.  Device memory
 * only (no managed memory). */
#include <chrono>
#include <stdarg.h>
#include <stdlib.h>

#include "kernels.h"
#include "mma_compat.h"
#include "kv_decode.h"
#include "indexer_common.h"
#include "quant_rules.h"
#include "quant_device.h"
#include "../include/dsv4_poison.h"

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
 * corrupting a neighbour.  Inputs get GUARD bytes of poison on each side
 * (zeros on the sides an attribution rerun asks for), checked the same
 * way.  GUARD is a multiple of every element size: the poison elements
 * line up with the input's. */
#define GUARD 4096
#define CANARY 0xC3

/* Pseudo-op of time() (DSV4_PLUGIN_COPY_OP): a device-to-device copy kernel
 * over param "bytes", the bandwidth ceiling the bench compares kernels with. */

static int g_device = -1;
static hipDeviceProp_t g_prop;

/* The launchers' scratch (kernels.h dsv4_hip_scratch): one buffer, grown
 * on demand.  A timed run grows it in its warm-up launch. */
static void *g_scratch;
static size_t g_scratch_bytes;

hipError_t dsv4_hip_scratch(size_t bytes, void **p)
{
    if (bytes > g_scratch_bytes) {
        if (g_scratch)
            (void)hipFree(g_scratch);
        g_scratch = NULL;
        g_scratch_bytes = 0;
        hipError_t e = hipMalloc(&g_scratch, bytes);
        if (e != hipSuccess)
            return e;
        g_scratch_bytes = bytes;
    }
    *p = g_scratch;
    return hipSuccess;
}

/* The look-back scans' state (kernels.h dsv4_hip_lookback_state): word 0
 * holds the ticket counter, words 1.. the status words.  A status word
 * carries the epoch of the launch that wrote it in its high half; the
 * buffer is zeroed (epoch 0, never handed out) whenever it is allocated
 * and whenever the 32-bit epoch wraps, so a launch never reads a word of
 * its own epoch that it did not write.  The ticket needs no reset here: the
 * block that takes a launch's last ticket stores 0. */
static unsigned long long *g_lookback;
static size_t g_lookback_words;
static unsigned g_epoch;

hipError_t dsv4_hip_lookback_state(size_t blocks, hipStream_t s, dsv4_hip_lookback *st)
{
    const size_t words = blocks + 1;
    hipError_t e;
    if (words > g_lookback_words) {
        if (g_lookback)
            (void)hipFree(g_lookback);
        g_lookback = NULL;
        g_lookback_words = 0;
        if ((e = hipMalloc((void **)&g_lookback, words * sizeof *g_lookback)) != hipSuccess)
            return e;
        g_lookback_words = words;
        g_epoch = 0;
    }
    unsigned next = g_epoch + 1;
    if (next == 1 || next == 0) { /* a fresh buffer (g_epoch 0), or the epochs wrapped */
        /* on the launch's stream, so ordered before its kernel; on failure
         * g_epoch is unchanged and the next call zeroes again */
        if ((e = hipMemsetAsync(g_lookback, 0, g_lookback_words * sizeof *g_lookback, s)) != hipSuccess)
            return e;
        next = 1;
    }
    g_epoch = next;
    st->ticket = (unsigned *)g_lookback;
    st->status = g_lookback + 1;
    st->epoch = g_epoch;
    return hipSuccess;
}

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
    unsigned char *din_base[64]; /* allocation: poison guard | data | poison guard */
    void *din[64];
    unsigned char *dout_base[64]; /* allocation: guard | data | guard */
    void *dout[64];
} dev_case;

/* The guards of the inputs in one call: input zeroed_input's on the sides
 * zeroed_sides hold zeros (dsv4_plugin_case; -1 / 0: none). */
typedef struct guard_fill {
    int zeroed_input, zeroed_sides;
} guard_fill;

static void dev_free(dev_case *d)
{
    for (int k = 0; k < 64; k++) {
        if (d->din_base[k])
            (void)hipFree(d->din_base[k]);
        if (d->dout_base[k])
            (void)hipFree(d->dout_base[k]);
    }
    memset(d, 0, sizeof *d);
}

/* What input k's guard on side (DSV4_GUARD_BEFORE / _AFTER) holds, into g. */
static void input_guard(const dsv4_hip_call *c, const guard_fill *f, int k, int side, unsigned char *g)
{
    const int zeroed = f->zeroed_input == k && (f->zeroed_sides & side);
    dsv4_poison_fill(c->in[k].dtype, zeroed, g, GUARD);
}

/* Inputs uploaded between their poison guards; outputs uploaded with
 * their initial contents (the op defines them, e.g. poison) between
 * canary-filled guards. */
static int dev_setup(const dsv4_hip_call *c, const guard_fill *f, dev_case *d, char *err, size_t errlen)
{
    static unsigned char g[GUARD];
    hipError_t e;
    memset(d, 0, sizeof *d);
    if (c->nin > 64 || c->nout > 64)
        return fail(err, errlen, DSV4_PLUGIN_EINPUT, "too many tensors");
    for (int k = 0; k < c->nin; k++) {
        size_t n = c->in[k].nbytes;
        if ((e = hipMalloc((void **)&d->din_base[k], n + 2 * GUARD)) != hipSuccess)
            return hip_fail(err, errlen, "hipMalloc (input)", e);
        d->din[k] = d->din_base[k] + GUARD;
        for (int side = DSV4_GUARD_BEFORE; side <= DSV4_GUARD_AFTER; side++) {
            input_guard(c, f, k, side, g);
            unsigned char *dst = d->din_base[k] + (side == DSV4_GUARD_AFTER ? GUARD + n : 0);
            if ((e = hipMemcpy(dst, g, GUARD, hipMemcpyHostToDevice)) != hipSuccess)
                return hip_fail(err, errlen, "hipMemcpy (input guards)", e);
        }
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

/* Both guards of every input still hold their poison. */
static int check_input_guards(const dsv4_hip_call *c, const guard_fill *f, const dev_case *d, char *err,
                              size_t errlen)
{
    static unsigned char g[GUARD], want[GUARD];
    for (int k = 0; k < c->nin; k++)
        for (int side = DSV4_GUARD_BEFORE; side <= DSV4_GUARD_AFTER; side++) {
            const int after = side == DSV4_GUARD_AFTER;
            const unsigned char *src = d->din_base[k] + (after ? GUARD + c->in[k].nbytes : 0);
            hipError_t e = hipMemcpy(g, src, GUARD, hipMemcpyDeviceToHost);
            if (e != hipSuccess)
                return hip_fail(err, errlen, "hipMemcpy (input guard)", e);
            input_guard(c, f, k, side, want);
            for (int i = 0; i < GUARD; i++)
                if (g[i] != want[i])
                    return fail(err, errlen, DSV4_PLUGIN_ERUNTIME,
                                "%s: device input '%s' written out of bounds %s the buffer (guard byte %d of %d "
                                "is 0x%02x, not 0x%02x)",
                                c->op, c->in[k].name, after ? "after" : "before", after ? i : i - GUARD, GUARD,
                                g[i], want[i]);
        }
    return DSV4_PLUGIN_OK;
}

/* Both guards of every output still hold the canary, and every input's
 * its poison. */
static int check_guards(const dsv4_hip_call *c, const guard_fill *f, const dev_case *d, char *err, size_t errlen)
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
    return check_input_guards(c, f, d, err, errlen);
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

/* The case on the device: make_call, the device copies (dev_setup), then
 * body(c, k, d) with c pointing at them; the copies freed after. */
template <class Body>
static int on_device(const char *op, const char *variant, const dsv4_plugin_param *params, int nparams,
                     const dsv4_plugin_tensor *inputs, int ninputs, dsv4_plugin_tensor *outputs, int noutputs,
                     const guard_fill *f, char *err, size_t errlen, Body body)
{
    dsv4_hip_call c;
    const dsv4_hip_kernel *k;
    int rc = make_call(op, variant, params, nparams, inputs, ninputs, outputs, noutputs, &c, &k, err, errlen);
    if (rc)
        return rc;
    dev_case d;
    if (!(rc = dev_setup(&c, f, &d, err, errlen))) {
        c.din = d.din;
        c.dout = d.dout;
        rc = body(c, k, d);
    }
    dev_free(&d);
    return rc;
}

static int run_with_guards(const char *op, const char *variant, const dsv4_plugin_param *params, int nparams,
                           const dsv4_plugin_tensor *inputs, int ninputs, dsv4_plugin_tensor *outputs,
                           int noutputs, const guard_fill *f, char *err, size_t errlen)
{
    return on_device(op, variant, params, nparams, inputs, ninputs, outputs, noutputs, f, err, errlen,
                     [&](const dsv4_hip_call &c, const dsv4_hip_kernel *k, const dev_case &d) {
                         hipError_t e;
                         int rc;
                         if ((e = k->launch(&c, 0)) != hipSuccess)
                             rc = hip_fail(err, errlen, "kernel launch", e);
                         else if ((e = hipDeviceSynchronize()) != hipSuccess)
                             rc = hip_fail(err, errlen, "kernel execution", e);
                         else
                             rc = check_guards(&c, f, &d, err, errlen);
                         for (int i = 0; i < noutputs && !rc; i++)
                             if (outputs[i].nbytes &&
                                 (e = hipMemcpy(outputs[i].data, d.dout[i], outputs[i].nbytes,
                                                hipMemcpyDeviceToHost)) != hipSuccess)
                                 rc = hip_fail(err, errlen, "hipMemcpy (output download)", e);
                         return rc;
                     });
}

static const guard_fill all_poison = {-1, 0};

static int plugin_run(const char *op, const char *variant, const dsv4_plugin_param *params, int nparams,
                      const dsv4_plugin_tensor *inputs, int ninputs, dsv4_plugin_tensor *outputs,
                      int noutputs, char *err, size_t errlen)
{
    return run_with_guards(op, variant, params, nparams, inputs, ninputs, outputs, noutputs, &all_poison, err,
                           errlen);
}

/* ABI 2: the case says which input guards an attribution rerun zeroes
 * (a dsv4check whose case struct ends before those fields zeroes none). */
static int plugin_run2(const dsv4_plugin_case *cs, const dsv4_plugin_tensor *inputs, int ninputs,
                       dsv4_plugin_tensor *outputs, int noutputs, char *err, size_t errlen)
{
    guard_fill f = all_poison;
    if (cs->size >= offsetof(dsv4_plugin_case, guard_zeroed_sides) + sizeof cs->guard_zeroed_sides)
        f = guard_fill{cs->guard_zeroed_input, cs->guard_zeroed_sides};
    return run_with_guards(cs->op, cs->variant, cs->params, cs->nparams, inputs, ninputs, outputs, noutputs, &f,
                           err, errlen);
}

/* Grid-stride 16-byte copy: the bandwidth a memory-bound kernel can reach. */
__global__ void copy_kernel(const int4 *__restrict__ src, int4 *__restrict__ dst, size_t n)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        dst[i] = src[i];
}

/* The matrix-unit ceiling (DSV4_PLUGIN_MMA_OP): every wave runs MMA_CHAINS
 * independent 16 x 16 x 16 bf16 products per step from fragments held in
 * registers, so only the units bound it.  The sums are stored (never read)
 * so the work is not optimised away. */
constexpr int MMA_CHAINS = 8, MMA_THREADS = 256;

__global__ void __launch_bounds__(MMA_THREADS) mma_peak_kernel(long long steps, float *sink)
{
    __shared__ __align__(16) uint16_t tile[16][24];
    for (int i = threadIdx.x; i < 16 * 24; i += MMA_THREADS)
        tile[i / 24][i % 24] = (uint16_t)(0x3F80u + (i & 7)); /* 1.0 .. 1.05: no overflow in any step count */
    __syncthreads();
    mma::frag_a a;
    mma::frag_b b;
    mma::load_frag_a(a, &tile[0][0], 24);
    mma::load_frag_b(b, &tile[0][0], 24);
    mma::acc16 acc[MMA_CHAINS];
#pragma unroll
    for (int j = 0; j < MMA_CHAINS; j++)
        mma::zero(acc[j]);
    for (long long s = 0; s < steps; s++)
#pragma unroll
        for (int j = 0; j < MMA_CHAINS; j++)
            mma::mma_frag(acc[j], a, b);
    float t = 0;
#pragma unroll
    for (int j = 0; j < MMA_CHAINS; j++)
        for (int e = 0; e < mma::ACC; e++)
            t += acc[j].v[e];
    sink[blockIdx.x * MMA_THREADS + threadIdx.x] = t;
}

/* The codec check (DSV4_PLUGIN_CODEC_CHECK_OP): where the kernels convert
 * fp32 to e4m3fn with the hardware instruction (quant_rules.h dsv4q_fp8_hw
 * and the four-code words dsv4q_fp8x4 and dsv4q_fp8x4_scaled, the latter
 * with its one NaN test a word, at scale 1), every one of the 2^32 fp32
 * inputs is converted both ways on this device, in each byte position of
 * the word; and the hardware decode (dsv4q_fp8x2_decode_hw) of every pair
 * of non-NaN codes against dsv4q_fp8_decode (a mismatch there is reported
 * as input 2^32 + the pair), and the paged attention's key-lane decode.
 * The same fp32 loop checks the hardware bf16 packing (quant_device.h
 * pack8_bf16: cvt.rn.bf16x2.f32 with its one NaN test) against dsv4q_bf16,
 * every input in both halves of a word.
 * res: {conversions checked, mismatches, first mismatch}. */
__global__ void codec_check_kernel(unsigned long long *res)
{
#ifdef DSV4Q_HW_E4M3
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    unsigned long long bad = 0, first = ~0ull;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < (1ull << 32);
         i += stride) {
        const float x = dsv4q_float((uint32_t)i);
        /* the word form too: each byte position meets every input once (i xor a constant) */
        const uint32_t key[4] = {0u, 0x9E3779B9u, 0x7F4A7C15u, 0x80000000u};
        float q[4];
        uint32_t want = 0;
        for (int j = 0; j < 4; j++) {
            q[j] = dsv4q_float((uint32_t)i ^ key[j]);
            want |= (uint32_t)dsv4q_fp8_int(q[j], 0) << (8 * j);
        }
        const float b8[8] = {q[0], q[1], q[2], q[3], q[3], q[2], q[1], q[0]};
        const uint4 bw = pack8_bf16(b8);
        const uint32_t bws[4] = {bw.x, bw.y, bw.z, bw.w};
        bool bf16_same = true;
        for (int j = 0; j < 4; j++)
            bf16_same = bf16_same && bws[j] == ((uint32_t)dsv4q_bf16(b8[2 * j]) |
                                                (uint32_t)dsv4q_bf16(b8[2 * j + 1]) << 16);
        if (dsv4q_fp8_hw(x) != dsv4q_fp8_int(x, 0) || dsv4q_fp8x4(q[0], q[1], q[2], q[3], 0) != want ||
            dsv4q_fp8x4_scaled(q, 1.0f, 0) != want || !bf16_same) {
            first = bad ? first : i;
            bad++;
        }
    }
    /* the hardware e4m3fn decode of every pair of non-NaN codes */
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < 65536; i += stride) {
        const uint32_t b0 = (uint32_t)i & 0xFFu, b1 = (uint32_t)i >> 8;
        if (dsv4q_fp8x4_has_nan(b0 | b1 << 8))
            continue;
        float lo, hi;
        dsv4q_fp8x2_decode_hw((uint16_t)i, &lo, &hi);
        if (dsv4q_bits(lo) != dsv4q_bits(dsv4q_fp8_decode((uint8_t)b0, 0)) ||
            dsv4q_bits(hi) != dsv4q_bits(dsv4q_fp8_decode((uint8_t)b1, 0))) {
            first = bad ? first : (1ull << 32) + i; /* past the fp32 inputs: a decode pair */
            bad++;
        }
    }
    /* the paged attention's key-lane decode (kv_decode.h decode8_hw) against
     * the integer rule: every code pair in each pair position, every scale
     * byte, e4m3fn and FNUZ (reported as 2^33 + pair + 2^16 scale + 2^24 fnuz) */
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < (2ull << 24);
         i += stride) {
        const uint32_t pair = (uint32_t)i & 0xFFFFu, sbyte = ((uint32_t)i >> 16) & 0xFFu;
        const int fz = (int)(i >> 24);
        const uint2 w = make_uint2(pair | pair << 16, pair | pair << 16);
        uint32_t hw[8], ref[8];
        sattn::decode8_hw(w, sattn::e8m0_to_f32(sbyte), fz, hw);
        sattn::decode8_int(w, sattn::e8m0_to_f32(sbyte), fz, ref);
        bool same = true;
        for (int k = 0; k < 8; k++)
            same = same && hw[k] == ref[k];
        if (!same) {
            first = bad ? first : (2ull << 32) + i;
            bad++;
        }
    }
    /* the indexer's e2m1 decode (indexer_common.h decode4_x2, byte permutes on
     * NVIDIA) against the rule on every input of four codes (2^34 + input) */
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < 65536; i += stride)
        if (idxr::decode4_x2((uint32_t)i) != idxr::decode4_x2_int((uint32_t)i)) {
            first = bad ? first : (4ull << 32) + i;
            bad++;
        }
    if (blockIdx.x == 0 && threadIdx.x == 0)
        res[0] = 1;
    if (bad) {
        atomicAdd(&res[1], bad);
        atomicMin(&res[2], first);
    }
#else
    (void)res;
#endif
}

static int codec_check(dsv4_plugin_tensor *outputs, int noutputs, double *ms, char *err, size_t errlen)
{
    if (noutputs != 1 || outputs[0].nbytes != 3 * sizeof(long long))
        return fail(err, errlen, DSV4_PLUGIN_EINPUT, "%s takes one int64 output of 3", DSV4_PLUGIN_CODEC_CHECK_OP);
    unsigned long long host[3] = {0, 0, ~0ull}, *dev = NULL;
    hipError_t e = hipMalloc((void **)&dev, sizeof host);
    if (e != hipSuccess)
        return hip_fail(err, errlen, "hipMalloc (codec check)", e);
    int rc = DSV4_PLUGIN_OK;
    if ((e = hipMemcpy(dev, host, sizeof host, hipMemcpyHostToDevice)) != hipSuccess)
        rc = hip_fail(err, errlen, "hipMemcpy (codec check)", e);
    const auto t0 = std::chrono::steady_clock::now();
    if (!rc) {
        hipLaunchKernelGGL(codec_check_kernel, dim3((unsigned)g_prop.multiProcessorCount * 8), dim3(256), 0, 0, dev);
        if ((e = hipGetLastError()) != hipSuccess || (e = hipDeviceSynchronize()) != hipSuccess)
            rc = hip_fail(err, errlen, "codec check kernel", e);
    }
    *ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (!rc && (e = hipMemcpy(host, dev, sizeof host, hipMemcpyDeviceToHost)) != hipSuccess)
        rc = hip_fail(err, errlen, "hipMemcpy (codec check)", e);
    (void)hipFree(dev);
    if (rc)
        return rc;
    memcpy(outputs[0].data, host, sizeof host);
    if (host[1])
        return fail(err, errlen, DSV4_PLUGIN_ERUNTIME,
                    "the hardware e4m3 (or bf16) conversion differs from the integer rule on %llu inputs (the first %08llx; "
                    "from 100000000 on, 2^32 + a pair of codes the decode got wrong; from 200000000 on, "
                    "2^33 + pair + 2^16 scale byte + 2^24 fnuz the paged key-lane decode got wrong; from 400000000 on, "
                    "2^34 + four e2m1 codes the indexer's decode got wrong)",
                    host[1], host[2]);
    return DSV4_PLUGIN_OK;
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

/* ms for param "flop" FLOPs (rounded to whole steps of every wave) of mma_peak_kernel; *flop gets the count run. */
static int time_mma(const dsv4_plugin_param *params, int nparams, int iters, double *ms, char *err, size_t errlen)
{
    double flop = 1e12;
    for (int i = 0; i < nparams; i++)
        if (strcmp(params[i].name, "flop") == 0 && params[i].kind == DSV4_PLUGIN_INT && params[i].i > 0)
            flop = (double)params[i].i;
    const unsigned blocks = (unsigned)g_prop.multiProcessorCount * 4;
    const double per_step = (double)blocks * (MMA_THREADS / mma::WAVE) * MMA_CHAINS * 2.0 * 16 * 16 * 16;
    const long long steps = (long long)(flop / per_step) > 0 ? (long long)(flop / per_step) : 1;
    float *sink = NULL;
    hipError_t e = hipMalloc((void **)&sink, (size_t)blocks * MMA_THREADS * sizeof(float));
    if (e != hipSuccess)
        return hip_fail(err, errlen, "hipMalloc (mma probe)", e);
    double t = 0;
    int rc = time_launches(
        [&]() {
            hipLaunchKernelGGL(mma_peak_kernel, dim3(blocks), dim3(MMA_THREADS), 0, 0, steps, sink);
            return hipGetLastError();
        },
        iters, &t, err, errlen);
    (void)hipFree(sink);
    /* report the time of exactly `flop` FLOPs at the measured rate */
    if (!rc)
        *ms = t * flop / (per_step * (double)steps);
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
    if (strcmp(op, DSV4_PLUGIN_MMA_OP) == 0) {
        if (g_device < 0)
            return fail(err, errlen, DSV4_PLUGIN_ERUNTIME, "hip backend used before init");
        return time_mma(params, nparams, iters, ms, err, errlen);
    }
    if (strcmp(op, DSV4_PLUGIN_CODEC_CHECK_OP) == 0) {
        if (g_device < 0)
            return fail(err, errlen, DSV4_PLUGIN_ERUNTIME, "hip backend used before init");
        return codec_check(outputs, noutputs, ms, err, errlen);
    }
    return on_device(op, variant, params, nparams, inputs, ninputs, outputs, noutputs, &all_poison, err, errlen,
                     [&](const dsv4_hip_call &c, const dsv4_hip_kernel *k, const dev_case &d) {
                         int rc = time_launches([&]() { return k->launch(&c, 0); }, iters, ms, err, errlen);
                         if (!rc) {
                             hipError_t e = hipDeviceSynchronize();
                             rc = e != hipSuccess ? hip_fail(err, errlen, "kernel execution", e)
                                                  : check_guards(&c, &all_poison, &d, err, errlen);
                         }
                         return rc;
                     });
}

static void plugin_fini(void)
{
    if (g_scratch)
        (void)hipFree(g_scratch);
    g_scratch = NULL;
    g_scratch_bytes = 0;
    if (g_lookback)
        (void)hipFree(g_lookback);
    g_lookback = NULL;
    g_lookback_words = 0;
    g_epoch = 0;
    g_device = -1;
}

static const dsv4_plugin plugin = {
    DSV4_PLUGIN_ABI_VERSION, "hip-" GPU_PLATFORM, plugin_init, plugin_supports, plugin_run, plugin_time,
    plugin_fini, plugin_run2, /* run2: for the guards an attribution rerun zeroes */
};

extern "C" __attribute__((visibility("default"))) const dsv4_plugin *dsv4_plugin_entry(void)
{
    return &plugin;
}
