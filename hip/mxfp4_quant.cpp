/* mxfp4_quant.cpp - MXFP4 rows (docs/semantics/quant.md Q1; docs/semantics/indexer.md Q4.1), all six
 * variants of harness/ops_quant.c, bit-exact with ref/mx.c.
 *
 * One launch over the whole [T, W] tensor, 256-thread blocks, one
 * 32-element block a thread (quant_device.h MX_THREADS): its four 16-byte
 * bf16 loads (eight for fp32) issued first, the amax (block_amax32) and the
 * scale rule once a block, one 16-byte store of its 16 code bytes and one
 * scale byte.  The shuffled variant's padding entries (0,
 * docs/semantics/quant.md Q1.3) are written by the same launch, thread g
 * the scale entry g (threads past the data's too). */
#include "quant_device.h"

namespace {

const char *const variants[] = {"default",
                                "scale_rule=ceil_log2_f32,e2m1=threshold",
                                "scale_rule=even",
                                "scale_rule=ocp",
                                "scale_rule=ocp,round=half_away",
                                "scale_rule=even,scale_layout=shuffled",
                                NULL};
enum { V_SHUFFLED = 5 };

struct mx4_args {
    const void *x;
    long long nblocks, W, T, npad_cols, npad;
};

/* The exact element path of a block (mx.c dsv4_mx_quant_block_fp4): the
 * blocks the fast path leaves, those with a NaN or an Inf and the rare
 * scales of dsv4q_fp4_fast_ok.  Not inlined, and reading the block again,
 * a chunk at a time (cache hits): inlined with all 32 values, it and the
 * fast path's words were live together (75 registers instead of 48). */
struct mx4_block {
    uint32_t word[MX_BLOCK_CHUNKS], byte;
};

template <int RULE, int ELEM, bool BF16> __device__ __noinline__ mx4_block mxfp4_exact(const void *x, long long g)
{
    /* the amax (dsv4q_amax_key's fold) and whether the block is all finite:
     * x * 0 is NaN exactly for a NaN or infinite x, one FMA a value */
    int32_t key = -1;
    float probe = 0.0f;
    for (int k = 0; k < MX_BLOCK_CHUNKS; k++) {
        float v[8];
        load8(x, BF16, g * 32 + 8 * k, v);
        key = fold_amax_key(v, key);
        for (int i = 0; i < 8; i++)
            probe = fmaf(v[i], 0.0f, probe);
    }
    mx4_block r;
    uint8_t byte;
    float mult;
    const int nanfill = dsv4q_fp4_block(dsv4q_amax_of_key(key), RULE, &byte, &mult);
    r.byte = byte;
    /* all finite: x * mult (mult finite for such a block) is never NaN and
     * the x86 NaN rules have nothing to do */
    const bool finite = !dsv4q_isnan(probe);
    for (int k = 0; k < MX_BLOCK_CHUNKS; k++) {
        float v[8];
        load8(x, BF16, g * 32 + 8 * k, v);
        r.word[k] = 0;
        for (int i = 0; i < 8; i++) {
            /* NaN blocks: every element encodes as NAN does (mx.h) */
            const float q = finite ? v[i] * mult : nanfill ? dsv4q_float(0x7FC00000u) : dsv4q_mul(v[i], mult);
            r.word[k] |= (uint32_t)dsv4q_e2m1(q, ELEM) << (4 * i); /* even element low (docs/semantics/quant.md Q1.2) */
        }
    }
    return r;
}

/* RULE, ELEM, SHUF and BF16 are template arguments: the scale rule and
 * element encoder fold to straight-line code (no per-element switch).  The
 * block's words are loaded raw; the amax is the integer max of the |x| bits,
 * which is below the bits of +Inf exactly when the block is all finite (NaN
 * patterns sort above them), and then it is the amax of mx.c.  Such a block
 * with a scale byte of dsv4q_fp4_fast_ok takes the fast element path of
 * quant_rules.h (one FMA onto the e2m1 grid a value, the signs gathered per
 * 8); every other block the exact one. */
template <int RULE, int ELEM, bool SHUF, bool BF16>
__global__ void __launch_bounds__(MX_THREADS)
    mxfp4_kernel(mx4_args a, uint4 *__restrict__ packed, uint8_t *__restrict__ scales)
{
    const long long g = mx_block_index(), W = a.W, npad_cols = a.npad_cols;
    if (g < a.nblocks) {
        enum { NQ = BF16 ? 4 : 8, NW = 4 * NQ }; /* 16-byte loads, words */
        uint32_t w[NW];
        const uint4 *src = static_cast<const uint4 *>(a.x) + g * NQ;
        #pragma unroll
        for (int k = 0; k < NQ; k++) {
            const uint4 q = src[k];
            w[4 * k] = q.x, w[4 * k + 1] = q.y, w[4 * k + 2] = q.z, w[4 * k + 3] = q.w;
        }
        /* bf16: the high halves' max from the pair words as they are (a larger
         * high half wins), the low halves' from the words shifted up */
        uint32_t key = 0, key_lo = 0;
        #pragma unroll
        for (int j = 0; j < NW; j++) {
            const uint32_t m = w[j] & (BF16 ? 0x7FFF7FFFu : 0x7FFFFFFFu);
            key = key > m ? key : m;
            if (BF16)
                key_lo = key_lo > m << 16 ? key_lo : m << 16;
        }
        if (BF16) {
            key &= 0xFFFF0000u;
            key = key > key_lo ? key : key_lo;
        }
        uint8_t byte = 0;
        bool fast = false;
        if (key < 0x7F800000u) {
            float mult;
            dsv4q_fp4_block(dsv4q_float(key), RULE, &byte, &mult); /* finite: never NaN-filled */
            fast = dsv4q_fp4_fast_ok(byte, ELEM, BF16);
        }
        uint32_t word[MX_BLOCK_CHUNKS];
        if (fast) {
            /* the even and OCP rules reach |q| in [7, 8); the ceil rules stay below 7 */
            const dsv4q_fp4_fast f =
                dsv4q_fp4_fast_make(byte, ELEM, RULE == DSV4Q_FP4_EVEN || RULE == DSV4Q_FP4_OCP);
            #pragma unroll
            for (int k = 0; k < MX_BLOCK_CHUNKS; k++)
                word[k] = BF16 ? dsv4q_fp4_fast_bf16x8(w + 4 * k, &f) : dsv4q_fp4_fast_f32x8(w + 8 * k, &f);
        } else {
            const mx4_block r = mxfp4_exact<RULE, ELEM, BF16>(a.x, g);
            for (int k = 0; k < MX_BLOCK_CHUNKS; k++)
                word[k] = r.word[k];
            byte = (uint8_t)r.byte;
        }
        packed[g] = make_uint4(word[0], word[1], word[2], word[3]);
        const long long nb = W / 32;
        scales[SHUF ? dsv4q_shuffle_idx(g / nb, g % nb, npad_cols) : g] = byte;
    }
    /* shuffled: padding entries (row >= T or column >= W/32) are 0 (docs/semantics/quant.md Q1.3) */
    if (SHUF && g < a.npad) {
        const long long r = g / npad_cols, col = g % npad_cols;
        if (r >= a.T || col >= W / 32)
            scales[dsv4q_shuffle_idx(r, col, npad_cols)] = 0;
    }
}

template <int RULE, int ELEM, bool SHUF>
void launch_rule(const mx4_args &a, int is_bf16, hipStream_t stream, uint4 *packed, uint8_t *scales)
{
    const unsigned grid = grid_for(a.nblocks > a.npad ? a.nblocks : a.npad, MX_THREADS);
    launch_by_input_dtype(is_bf16, [&](auto bf16) {
        hipLaunchKernelGGL((mxfp4_kernel<RULE, ELEM, SHUF, decltype(bf16)::value>), dim3(grid), dim3(MX_THREADS),
                           0, stream, a, packed, scales);
    });
}

/* This file's name for the shared MX shape: dsv4_hip_check_shape finds the
 * functions below through it. */
struct mx4_shape : mx_rows {};

int shape_of(const dsv4_hip_call *c, mx4_shape *s, char *err, size_t errlen)
{
    return mx_rows_of(c, "x_fp4", DSV4_PLUGIN_FLOAT4_E2M1FN_X2, "scales", DSV4_PLUGIN_FLOAT8_E8M0FNU, s, err, errlen);
}

int check_shape(const dsv4_hip_call *c, const mx4_shape &s, char *err, size_t errlen)
{
    const dsv4_plugin_tensor *d = &c->out[s.d], *sc = &c->out[s.s];
    long long sr = s.T, scol = s.W / 32;
    if (c->variant == V_SHUFFLED) { /* ceil(M/256)*256, ceil(ceil(N/32)/8)*8 (docs/semantics/quant.md Q1.3) */
        sr = (s.T + 255) / 256 * 256;
        scol = (s.W / 32 + 7) / 8 * 8;
    }
    if (d->shape[0] != s.T || d->shape[1] != s.W / 2 || sc->shape[0] != sr || sc->shape[1] != scol)
        return QFAIL("mxfp4_quant: outputs must be [%lld, %lld] and [%lld, %lld]", s.T, s.W / 2, sr, scol);
    return DSV4_PLUGIN_OK;
}

hipError_t launch_shape(const dsv4_hip_call *c, const mx4_shape &s, hipStream_t stream)
{
    const int shuffled = c->variant == V_SHUFFLED;
    const long long nblocks = s.T * s.W / 32;
    const long long pcols = c->out[s.s].shape[1], npad = shuffled ? c->out[s.s].shape[0] * pcols : 0;
    const long long n = nblocks > npad ? nblocks : npad;
    if (n == 0)
        return hipSuccess;
    const mx4_args a = {c->din[s.x], nblocks, s.W, s.T, pcols, npad};
    uint4 *packed = (uint4 *)c->dout[s.d];
    uint8_t *sc = (uint8_t *)c->dout[s.s];
    switch (c->variant) { /* the variants table above, in order */
    case 0: launch_rule<DSV4Q_FP4_CEIL, DSV4Q_ELEM_RNE, false>(a, s.is_bf16, stream, packed, sc); break;
    case 1: launch_rule<DSV4Q_FP4_CEIL_F32LOG2, DSV4Q_ELEM_THRESHOLD, false>(a, s.is_bf16, stream, packed, sc); break;
    case 2: launch_rule<DSV4Q_FP4_EVEN, DSV4Q_ELEM_RNE, false>(a, s.is_bf16, stream, packed, sc); break;
    case 3: launch_rule<DSV4Q_FP4_OCP, DSV4Q_ELEM_RNE, false>(a, s.is_bf16, stream, packed, sc); break;
    case 4: launch_rule<DSV4Q_FP4_OCP, DSV4Q_ELEM_HALF_AWAY, false>(a, s.is_bf16, stream, packed, sc); break;
    default: launch_rule<DSV4Q_FP4_EVEN, DSV4Q_ELEM_RNE, true>(a, s.is_bf16, stream, packed, sc); break;
    }
    return hipGetLastError();
}

} // namespace

DSV4_HIP_SHAPE_KERNEL(mxfp4_quant, variants, mx4_shape);
