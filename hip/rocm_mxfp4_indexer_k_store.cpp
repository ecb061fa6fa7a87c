/* rocm_mxfp4_indexer_k_store.cpp - RMSNorm + RoPE (at the group's first
 * position) + MXFP4 of the index keys, written into the paged (preshuffled
 * or natural) MXFP4 cache; both quant variants, bit-exact with
 * ref/indexer.c dsv4_ref_indexer_k_store (docs/semantics/indexer.md Q4.1).
 *
 * One launch, 32 lanes per token (4 tokens per 128-thread block), lane l
 * holding dims 4l..4l+3 (one 8-byte load).  The sum of squares is the
 * reference's: exact squares added in double in dim order; a shuffle tree
 * where the row's exponent span makes every partial sum exact (any order,
 * the same bits), else one lane walks the token's 128 values in shared
 * memory in the reference's order.  Skipped tokens (slot < 0,
 * (pos + 1) % c != 0) still take part in the shuffles and barriers and
 * store nothing. */
#include "indexer_common.h"

namespace {

using namespace idxr;

enum { TOK_PER_BLOCK = 4, THREADS = 32 * TOK_PER_BLOCK };

struct ks_args {
    const uint16_t *k, *w;
    const int64_t *pos, *slots;
    const float *cs;
    long long T, nslots, ratio, page_bytes;
    float eps;
    int rule, elem;
    layout l;
};

__global__ void __launch_bounds__(THREADS) kstore_kernel(ks_args a, uint8_t *__restrict__ cache)
{
    __shared__ float xs[TOK_PER_BLOCK][D];
    __shared__ float rr[TOK_PER_BLOCK];
    const int row = (int)threadIdx.x / 32, lane = (int)threadIdx.x % 32, d0 = 4 * lane;
    const long long t = (long long)blockIdx.x * TOK_PER_BLOCK + row;
    long long slot = -1, pos = 0;
    if (t < a.T) {
        slot = a.slots[t];
        pos = a.pos[t];
    }
    /* docs/semantics/indexer.md Q4.1 step 1: slot < 0 skips; only (pos + 1) % c == 0 writes */
    const bool active = t < a.T && slot >= 0 && (pos + 1) % a.ratio == 0;
    float x[4] = {0, 0, 0, 0};
    if (active) {
        const uint2 u = *reinterpret_cast<const uint2 *>(a.k + t * D + d0);
        x[0] = dsv4q_float(u.x << 16), x[1] = dsv4q_float(u.x & 0xFFFF0000u);
        x[2] = dsv4q_float(u.y << 16), x[3] = dsv4q_float(u.y & 0xFFFF0000u);
    }
    /* docs/semantics/indexer.md Q4.1 step 2: var = fl32(sum k^2 / D) (exact squares, double sum in dim
     * order as the reference); rrms = fl32(1 / sqrt(var + eps)).  The squares of bf16 values have 16-bit
     * significands; when the row's bits span (top bit of the largest square + 8 for the 128-term carry,
     * down to the lowest possible bit of the smallest) fits in 53, every partial sum in any order is
     * exact, so a 5-step shuffle tree gives the reference's bits.  Otherwise (a wide span, Inf or NaN)
     * the row takes the reference's sequential sum on one lane. */
    double part = 0;
    int hi = -100000, lo = 100000, special = 0;
    for (int i = 0; i < 4; i++) {
        const uint32_t b = dsv4q_bits(x[i]), field = (b >> 23) & 0xFFu;
        part = __dadd_rn(part, __dmul_rn((double)x[i], (double)x[i]));
        if ((b & 0x7FFFFFFFu) == 0)
            continue;
        special |= field == 255;
        const int E = field ? (int)field - 127 : -126; /* bf16 subnormals: lowest bit 2^-133 */
        hi = max(hi, 2 * E + 1);
        lo = min(lo, field ? 2 * (E - 7) : -266);
    }
    for (int off = 16; off > 0; off >>= 1) { /* xor offsets below 32: inside the token's 32 lanes */
        part = __dadd_rn(part, __shfl_xor(part, off));
        hi = max(hi, __shfl_xor(hi, off));
        lo = min(lo, __shfl_xor(lo, off));
        special |= __shfl_xor(special, off);
    }
    const bool exact = !special && (hi == -100000 || hi + 8 - lo <= 53);
    for (int i = 0; i < 4; i++)
        xs[row][d0 + i] = x[i];
    __syncthreads();
    if (lane == 0) {
        double ss = part;
        if (!exact) {
            ss = 0;
            for (int d = 0; d < D; d++)
                ss = __dadd_rn(ss, __dmul_rn((double)xs[row][d], (double)xs[row][d]));
        }
        const float var = __double2float_rn(ss / D);
        rr[row] = __double2float_rn(1.0 / sqrt((double)__fadd_rn(var, a.eps)));
    }
    __syncthreads();
    const float rrms = rr[row];
    for (int i = 0; i < 4; i++) /* kn = bf16(fl(fl(k * rrms) * w)) */
        x[i] = round_bf16(__fmul_rn(__fmul_rn(x[i], rrms), dsv4q_float((uint32_t)a.w[d0 + i] << 16)));
    if (d0 >= D - ROPE && active) {
        /* GPT-J RoPE at the group's first position (pos // c) * c (docs/semantics/indexer.md Q4.1 step 3) */
        const long long g = (pos / a.ratio) * a.ratio;
        rope4(x, a.cs + g * ROPE, (d0 - (D - ROPE)) / 2);
    }
    uint8_t sb;
    const uint32_t w = quant4(x, a.rule, a.elem, &sb); /* all lanes: full-mask shuffles */
    if (!active)
        return;
    uint8_t *pg = cache + (slot / a.l.P) * a.page_bytes;
    const long long p = slot % a.l.P;
    *reinterpret_cast<uint16_t *>(pg + value_off(a.l, p, d0 / 2)) = (uint16_t)w; /* bytes 2l, 2l+1 */
    if (d0 % 32 == 0)
        pg[scale_off(a.l, p, d0 / 32)] = sb;
}

struct ks_shape {
    int k, pos, cs, w, slots, out;
    int64_t heads, P, shuffle, ratio;
    double eps;
};

int shape_of(const dsv4_hip_call *c, ks_shape *s, char *err, size_t errlen)
{
    int rc;
    int64_t hd;
    if ((rc = dsv4_hip_tensors(c, "k_pre:bfloat16:2 positions:int64:1 cos_sin_cache:float32:2 "
                                  "rms_norm_weight:bfloat16:1 kv_slot_mapping:int64:1 -> k_cache:uint8:3",
                               {&s->k, &s->pos, &s->cs, &s->w, &s->slots, &s->out}, err, errlen)) ||
        (rc = dsv4_hip_ints(c, "num_heads head_dim page_entries shuffle compress_ratio",
                            {&s->heads, &hd, &s->P, &s->shuffle, &s->ratio}, err, errlen)) ||
        (rc = dsv4_hip_float(c, "rms_norm_eps", &s->eps, err, errlen)))
        return rc;
    if (hd != D)
        return IFAIL("%s: head_dim %lld: the kernel is written for 128 (64 NoPE + 64 RoPE)", c->op, (long long)hd);
    return DSV4_PLUGIN_OK;
}

/* Memory safety: shapes, every written slot inside the cache, every
 * written token's group position inside cos_sin_cache. */
int ks_check(const dsv4_hip_call *c, char *err, size_t errlen)
{
    ks_shape s;
    layout l;
    int rc = shape_of(c, &s, err, errlen);
    if (rc || (rc = layout_make((int)s.heads, s.P, (int)(s.shuffle != 0), &l, err, errlen)))
        return rc;
    const dsv4_plugin_tensor *k = &c->in[s.k], *o = &c->out[s.out], *cs = &c->in[s.cs];
    const long long T = k->shape[0];
    if (k->shape[1] != D || c->in[s.pos].shape[0] != T || c->in[s.slots].shape[0] != T ||
        c->in[s.w].shape[0] != D || cs->shape[1] != ROPE || o->shape[1] != s.P || o->shape[2] != ENTRY)
        return IFAIL("%s: k_pre [T, 128], positions and kv_slot_mapping [T], rms_norm_weight [128], cos_sin_cache "
                     "[P, 64], k_cache [pages, %lld, 68] expected", c->op, (long long)s.P);
    if (s.ratio < 1)
        return IFAIL("%s: compress_ratio %lld must be >= 1", c->op, (long long)s.ratio);
    const long long nslots = o->shape[0] * s.P;
    const int64_t *pos = (const int64_t *)c->in[s.pos].data, *sl = (const int64_t *)c->in[s.slots].data;
    for (long long t = 0; t < T; t++) {
        if (sl[t] < 0 || (pos[t] + 1) % s.ratio != 0)
            continue;
        if (sl[t] >= nslots)
            return IFAIL("%s: kv_slot_mapping[%lld] = %lld >= pages * page_entries = %lld", c->op, t,
                         (long long)sl[t], nslots);
        if (pos[t] < 0 || pos[t] >= cs->shape[0])
            return IFAIL("%s: positions[%lld] = %lld outside cos_sin_cache [0, %lld)", c->op, t, (long long)pos[t],
                         (long long)cs->shape[0]);
    }
    if (T > (long long)0x7fffffff)
        return IFAIL("%s: too many tokens for the grid", c->op);
    return DSV4_PLUGIN_OK;
}

hipError_t ks_launch(const dsv4_hip_call *c, hipStream_t stream)
{
    ks_shape s;
    layout l;
    char err[160];
    if (shape_of(c, &s, err, sizeof err) || layout_make((int)s.heads, s.P, (int)(s.shuffle != 0), &l, err, sizeof err))
        return hipErrorInvalidValue;
    const long long T = c->in[s.k].shape[0];
    if (T == 0)
        return hipSuccess;
    ks_args a = {(const uint16_t *)c->din[s.k], (const uint16_t *)c->din[s.w], (const int64_t *)c->din[s.pos],
                 (const int64_t *)c->din[s.slots], (const float *)c->din[s.cs], T, c->out[s.out].shape[0] * s.P,
                 s.ratio, s.P * ENTRY, (float)s.eps, quant_rule(c->variant), quant_elem(c->variant), l};
    hipLaunchKernelGGL(kstore_kernel, dim3(grid_for(T, TOK_PER_BLOCK)), dim3(THREADS), 0, stream, a,
                       (uint8_t *)c->dout[s.out]);
    return hipGetLastError();
}

} // namespace

dsv4_hip_kernel dsv4_hip_rocm_mxfp4_indexer_k_store = {"rocm_mxfp4_indexer_k_store", idxr::quant_variants, ks_check,
                                                        ks_launch};
