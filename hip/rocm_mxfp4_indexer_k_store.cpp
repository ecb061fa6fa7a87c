/* rocm_mxfp4_indexer_k_store.cpp - RMSNorm + RoPE (at the group's first
 * position) + MXFP4 of the index keys, written into the paged (preshuffled
 * or natural) MXFP4 cache; both quant variants, bit-exact with
 * ref/indexer.c dsv4_ref_indexer_k_store (docs/semantics/indexer.md Q4.1).
 *
 * One launch, 32 lanes per token (4 tokens per 128-thread block), lane l
 * holding dims 4l..4l+3 (one 8-byte load).  A token's 32 lanes are one
 * warp (NVIDIA) or half a wave64 (AMD): no block barrier.  Every read goes
 * out first, none waiting for another but the cos/sin (for the position):
 * the slot, the position, the K row (read for every token, written or
 * not: it no longer waits for the slot and position), the weights.  The sum
 * of squares is the reference's: exact squares added in double in dim
 * order; a shuffle tree where the row's exponent span makes every partial
 * sum exact (any order, the same bits), else every lane of the token walks
 * its 128 values in shared memory in the reference's order (the same
 * addresses: broadcast reads), so each lane has rrms without an exchange.
 * Skipped tokens (slot < 0, (pos + 1) % c != 0) still take part in the
 * shuffles and store nothing. */
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
    layout l;
};

/* idxr::rope8_bf16's rotation for a lane's two pairs, cos (c) and sin (s) already loaded,
 * each lane rounded to bf16 on its own. */
__device__ inline void rope2_cs(float x[4], float2 c, float2 s)
{
    const float cv[2] = {c.x, c.y}, sv[2] = {s.x, s.y};
    for (int i = 0; i < 2; i++) {
        const float e = x[2 * i], o = x[2 * i + 1];
        x[2 * i] = round_bf16(__fsub_rn(__fmul_rn(e, cv[i]), __fmul_rn(o, sv[i])));
        x[2 * i + 1] = round_bf16(__fadd_rn(__fmul_rn(e, sv[i]), __fmul_rn(o, cv[i])));
    }
}

/* RULE / ELEM (quant_rules.h numbering) fixed at compile time: one scale rule and one e2m1
 * encoder in the kernel, not every one behind run-time switches. */
template <int RULE, int ELEM>
__global__ void __launch_bounds__(THREADS) kstore_kernel(ks_args a, uint8_t *__restrict__ cache)
{
    __shared__ float xs[TOK_PER_BLOCK][D];
    const int row = (int)threadIdx.x / 32, lane = (int)threadIdx.x % 32, d0 = 4 * lane;
    const long long t = (long long)blockIdx.x * TOK_PER_BLOCK + row;
    long long slot = -1, pos = 0;
    uint2 u = make_uint2(0, 0);
    if (t < a.T) {
        slot = a.slots[t];
        pos = a.pos[t];
        u = *reinterpret_cast<const uint2 *>(a.k + t * D + d0); /* every token's row: no wait on slot, pos */
    }
    const uint2 wu = *reinterpret_cast<const uint2 *>(a.w + d0); /* the 4 weights, one 8-byte read */
    /* docs/semantics/indexer.md Q4.1 step 1: slot < 0 skips; only (pos + 1) % c == 0 writes.  One
     * division (32 bits where it fits): (pos + 1) % c == 0 is pos % c == c - 1, or == -1 for a
     * negative pos (C's truncating %), and the group start (pos // c) * c (step 3) is q * c. */
    long long rem;
    const long long grp = div_fast(pos, a.ratio, &rem) * a.ratio;
    const bool active = t < a.T && slot >= 0 && (rem == a.ratio - 1 || rem == -1);
    const bool rope = d0 >= D - ROPE && active;
    float2 c2 = make_float2(0, 0), s2 = c2;
    if (rope) { /* cos | sin of pairs k0, k0 + 1 (k0 even: 8-byte reads) at the group start */
        const float *csrow = a.cs + grp * ROPE + (d0 - (D - ROPE)) / 2;
        c2 = *reinterpret_cast<const float2 *>(csrow);
        s2 = *reinterpret_cast<const float2 *>(csrow + ROPE / 2);
    }
    float x[4] = {0, 0, 0, 0};
    if (active) {
        x[0] = dsv4q_float(u.x << 16), x[1] = dsv4q_float(u.x & 0xFFFF0000u);
        x[2] = dsv4q_float(u.y << 16), x[3] = dsv4q_float(u.y & 0xFFFF0000u);
    }
    /* docs/semantics/indexer.md Q4.1 step 2: var = fl32(sum k^2 / D) (exact squares, double sum in dim
     * order as the reference); rrms = fl32(1 / sqrt(var + eps)).  The squares of bf16 values have 16-bit
     * significands; when the row's bits span (top bit of the largest square + 8 for the 128-term carry,
     * down to the lowest possible bit of the smallest) fits in 53, every partial sum in any order is
     * exact, so a 5-step shuffle tree gives the reference's bits.  Otherwise (a wide span, Inf or NaN)
     * the row takes the reference's sequential sum. */
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
    /* the same on every lane of the token (the xor tree gives each lane the whole row's) */
    const bool exact = !special && (hi == -100000 || hi + 8 - lo <= 53);
    double ss = part;
    if (!exact) { /* the token's lanes only: one warp on NVIDIA, their half of a wave64 on AMD */
        for (int i = 0; i < 4; i++)
            xs[row][d0 + i] = x[i];
        gpu_wave_sync();
        ss = 0;
        for (int d = 0; d < D; d++)
            ss = __dadd_rn(ss, __dmul_rn((double)xs[row][d], (double)xs[row][d]));
    }
    const float var = __double2float_rn(ss / D);
    const float rrms = __double2float_rn(1.0 / sqrt((double)__fadd_rn(var, a.eps)));
    const float wv[4] = {dsv4q_float(wu.x << 16), dsv4q_float(wu.x & 0xFFFF0000u), dsv4q_float(wu.y << 16),
                         dsv4q_float(wu.y & 0xFFFF0000u)};
    for (int i = 0; i < 4; i++) /* kn = bf16(fl(fl(k * rrms) * w)) */
        x[i] = round_bf16(__fmul_rn(__fmul_rn(x[i], rrms), wv[i]));
    if (rope) /* GPT-J RoPE at the group's first position (pos // c) * c (docs/semantics/indexer.md Q4.1 step 3) */
        rope2_cs(x, c2, s2);
    uint8_t sb;
    const uint32_t w = quant4(x, RULE, ELEM, &sb); /* all lanes: full-mask shuffles */
    if (!active)
        return;
    uint8_t *pg = cache + page_of(a.l, slot) * a.page_bytes;
    const long long p = entry_of(a.l, slot);
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
                 s.ratio, s.P * ENTRY, (float)s.eps, l};
    /* the two variants' (rule, encoder) pairs (indexer_common.h quant_rule, quant_elem) */
    auto kernel = c->variant == 1 ? kstore_kernel<DSV4Q_FP4_CEIL_F32LOG2, DSV4Q_ELEM_THRESHOLD>
                                  : kstore_kernel<DSV4Q_FP4_CEIL, DSV4Q_ELEM_RNE>;
    hipLaunchKernelGGL(kernel, dim3(grid_for(T, TOK_PER_BLOCK)), dim3(THREADS), 0, stream, a, (uint8_t *)c->dout[s.out]);
    return hipGetLastError();
}

} // namespace

dsv4_hip_kernel dsv4_hip_rocm_mxfp4_indexer_k_store = {"rocm_mxfp4_indexer_k_store", idxr::quant_variants, ks_check,
                                                        ks_launch};
