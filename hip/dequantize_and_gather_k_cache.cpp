/* dequantize_and_gather_k_cache.cpp - decode each request's last G cached
 * tokens into bf16 workspace rows [offset, offset+G)
 * (docs/semantics/kvcache.md A4), bit-exact with ref/kvcache.c in the three
 * variants (default: every read page valid, checked on the host;
 * invalid_block=skip: such rows untouched; invalid_block=zero: zeroed).
 *
 * One launch, grid (rows / 16, R), 64 threads per output row, 4 row slots
 * per 256-thread block and 4 rows per thread (gather_kernel: all loads of
 * the 4 rows in flight together).  Lane l < 56 reads 8 fp8 bytes (one 8-byte load) and
 * its block's scale byte, computes fl(fp8 * 2^(s-127)) in fp32 and rounds to
 * bf16 (as the reference, x86 NaN results included, quant_rules.h; on
 * NVIDIA sm_89+ the e4m3fn codes of a lane without NaN codes or an Inf
 * scale decode in hardware, dsv4q_fp8x2_decode_hw); lanes
 * 56..63 copy 16 bytes of RoPE bf16.  Every lane writes 16 bytes.
 *
 * V4.1 variants format=v41_fp8 / format=v41_fp4 (docs/semantics/kvcache.md A2.4 [S22], ref/kvcache.c
 * dsv4_kv41_decode_token_bf16): one
 * row per 64 lanes (grid (rows / 4, R)); lane l decodes dims 8l..8l+7 from 8 fp8 bytes x its 32-tile's
 * UE8M0 scale, or from 4 packed e2m1 bytes x its 16-tile's e4m3 scale
 * (products exact in bf16).  Block-table entries are checked on the host
 * (the V4.1 Triton gather has no invalid-block mode). */
#include "quant_device.h"

namespace {

const char *const variants[] = {"default", "invalid_block=skip", "invalid_block=zero", "format=v41_fp8",
                                "format=v41_fp4", NULL};
enum { V_ERROR = 0, V_SKIP = 1, V_ZERO = 2, V_FP8 = 3, V_FP4 = 4 };

__device__ inline uint16_t decode_bf16(uint8_t code, float s, int fnuz)
{
    return dsv4q_bf16(dsv4q_mul(dsv4q_fp8_decode(code, fnuz), s)); /* .to(tl.bfloat16): RNE [S1] */
}

/* e2m1 code -> fp32 (numerics.c dsv4_e2m1_to_f32): bit 3 sign, -0 kept. */
__device__ inline float e2m1_value(uint32_t code)
{
    const uint32_t m = code & 7u;
    const float v = m < 2u ? 0.5f * (float)m : (float)(2u + (m & 1u)) * dsv4q_pow2((int)(m >> 1) - 2);
    return (code & 8u) ? -v : v;
}

__global__ void gather41_kernel(const uint8_t *__restrict__ cache, long long B, const int *__restrict__ seq_lens,
                                const int *__restrict__ gather_lens, const int *__restrict__ block_table,
                                long long maxb, long long Wout, long long offset, int fp4,
                                int4 *__restrict__ out)
{
    const long long i = (long long)blockIdx.x * (blockDim.x / 64) + threadIdx.x / 64;
    const long long r = blockIdx.y;
    const int l = (int)threadIdx.x % 64;
    const long long S = seq_lens[r], G = gather_lens ? gather_lens[r] : S;
    if (i >= G)
        return;
    const long long pos = S - G + i; /* start = S - G [S22] */
    const long long page = block_table[r * maxb + pos / B], row = pos % B; /* valid: host check */
    int4 *dst = out + ((r * Wout + offset + i) * 512) / 8 + l;
    uint32_t u[4];
    if (!fp4) {
        const uint8_t *pg = cache + page * B * 528;
        const uint2 w = *reinterpret_cast<const uint2 *>(pg + row * 512 + 8 * l);
        const uint8_t sb = pg[B * 512 + row * 16 + l / 4];
        const float s = sb == 255 ? dsv4q_float(0x7F800000u) : dsv4q_pow2((int)sb - 127); /* exp2(b - 127) */
        for (int k = 0; k < 4; k++) {
            const uint32_t word = k < 2 ? w.x : w.y, sh = 16 * (k & 1);
            u[k] = (uint32_t)decode_bf16((uint8_t)(word >> sh), s, 0) |
                   ((uint32_t)decode_bf16((uint8_t)(word >> (sh + 8)), s, 0) << 16);
        }
    } else {
        const uint8_t *pg = cache + page * B * 288;
        const uint32_t w = *reinterpret_cast<const uint32_t *>(pg + row * 256 + 4 * l);
        const float sf = dsv4q_fp8_decode(pg[B * 256 + row * 32 + l / 2], 0);
        for (int k = 0; k < 4; k++) /* byte k: dims 8l+2k (low nibble), 8l+2k+1 (high) */
            u[k] = (uint32_t)dsv4q_bf16(dsv4q_mul(e2m1_value(w >> (8 * k)), sf)) |
                   ((uint32_t)dsv4q_bf16(dsv4q_mul(e2m1_value(w >> (8 * k + 4)), sf)) << 16);
    }
    *dst = make_int4((int)u[0], (int)u[1], (int)u[2], (int)u[3]);
}

/* Rows per thread of gather_kernel: a block's 4 row slots (64 lanes each)
 * take rows i0, i0 + 4, ..., so a lane has 4 rows' loads in flight (the
 * block-table reads, then the data and scale reads) instead of one chain of
 * dependent reads per row. */
enum { ROW_SLOTS = 4, GATHER_ROWS = 4, ROWS_PER_BLOCK = ROW_SLOTS * GATHER_ROWS };

__global__ void __launch_bounds__(256)
    gather_kernel(const uint8_t *__restrict__ cache, int B, long long nb, const int *__restrict__ seq_lens,
                  const int *__restrict__ gather_lens, const int *__restrict__ block_table, long long maxb,
                  long long Wout, long long offset, int fnuz, int variant, int4 *__restrict__ out)
{
    const long long i0 = (long long)blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / 64;
    const long long r = blockIdx.y;
    const int l = (int)threadIdx.x % 64;
    const int S = seq_lens[r], G = gather_lens ? gather_lens[r] : S;
    long long page[GATHER_ROWS];
    int row[GATHER_ROWS];
#pragma unroll
    for (int k = 0; k < GATHER_ROWS; k++) { /* every block-table read first */
        const long long i = i0 + k * ROW_SLOTS;
        page[k] = -1;
        row[k] = 0;
        if (i < G) {
            const int pos = S - G + (int)i; /* start = S - G [S1]; < 2^31 (int32 seq_lens) */
            page[k] = block_table[r * maxb + pos / B];
            row[k] = pos % B;
        }
    }
    uint2 w[GATHER_ROWS], rope_lo[GATHER_ROWS], rope_hi[GATHER_ROWS];
    uint8_t sb[GATHER_ROWS];
#pragma unroll
    for (int k = 0; k < GATHER_ROWS; k++) { /* then every row's data reads */
        w[k] = rope_lo[k] = rope_hi[k] = make_uint2(0, 0);
        sb[k] = 0;
        if (page[k] < 0 || page[k] >= nb)
            continue; /* no row, or an invalid block (the skip / zero variants: host check) */
        const uint8_t *rec = cache + page[k] * B * 584 + (long long)row[k] * 576;
        if (l < 56) {
            w[k] = *reinterpret_cast<const uint2 *>(rec + 8 * l);
            sb[k] = cache[page[k] * B * 584 + (long long)B * 576 + row[k] * 8 + l / 8];
        } else {
            const uint2 *src = reinterpret_cast<const uint2 *>(rec + 448 + 16 * (l - 56));
            rope_lo[k] = src[0];
            rope_hi[k] = src[1];
        }
    }
#pragma unroll
    for (int k = 0; k < GATHER_ROWS; k++) {
        const long long i = i0 + k * ROW_SLOTS;
        if (i >= G)
            break; /* rows grow with k */
        int4 *dst = out + ((r * Wout + offset + i) * 512) / 8 + l;
        if (page[k] < 0 || page[k] >= nb) { /* only the skip / zero variants get here (host check) */
            if (variant == V_ZERO)
                *dst = make_int4(0, 0, 0, 0); /* zeros [S8] */
            continue;                         /* skip: untouched [S7] */
        }
        if (l < 56) {
            /* fp32 2^(b-127): 2^-127 subnormal, 2^128 = +Inf (kvcache.c scale_f32) */
            const float s = sb[k] == 255 ? dsv4q_float(0x7F800000u) : dsv4q_pow2((int)sb[k] - 127);
            uint32_t u[4];
#ifdef DSV4Q_HW_E4M3
            /* no NaN code and a finite scale: the products are never NaN, so the
             * x86 NaN rules have nothing to do and the codes decode in hardware */
            if (!fnuz && sb[k] != 255 && !dsv4q_fp8x4_has_nan(w[k].x) && !dsv4q_fp8x4_has_nan(w[k].y)) {
                for (int q = 0; q < 4; q++) {
                    float lo, hi;
                    dsv4q_fp8x2_decode_hw((uint16_t)((q < 2 ? w[k].x : w[k].y) >> (16 * (q & 1))), &lo, &hi);
                    u[q] = (uint32_t)dsv4q_bf16(lo * s) | (uint32_t)dsv4q_bf16(hi * s) << 16;
                }
            } else
#endif
            {
                for (int q = 0; q < 4; q++) {
                    const uint32_t word = q < 2 ? w[k].x : w[k].y, sh = 16 * (q & 1);
                    u[q] = (uint32_t)decode_bf16((uint8_t)(word >> sh), s, fnuz) |
                           ((uint32_t)decode_bf16((uint8_t)(word >> (sh + 8)), s, fnuz) << 16);
                }
            }
            *dst = make_int4((int)u[0], (int)u[1], (int)u[2], (int)u[3]);
        } else { /* bits copied, NaN payloads too [S1] */
            *dst = make_int4((int)rope_lo[k].x, (int)rope_lo[k].y, (int)rope_hi[k].x, (int)rope_hi[k].y);
        }
    }
}

struct ga_shape {
    int out, kc, seq, gat, bt;
    int64_t B, offset, fnuz;
    long long R, Wout, nb, maxb;
};

int shape_of(const dsv4_hip_call *c, ga_shape *s, char *err, size_t errlen)
{
    int rc;
    if ((rc = dsv4_hip_tensor(c, 1, "out", DSV4_PLUGIN_BFLOAT16, 3, &s->out, err, errlen)) ||
        (rc = dsv4_hip_tensors(c, "k_cache:uint8:3 seq_lens:int32:1 block_table:int32:2",
                               {&s->kc, &s->seq, &s->bt}, err, errlen)) ||
        (rc = dsv4_hip_ints(c, "block_size offset use_fnuz", {&s->B, &s->offset, &s->fnuz}, err, errlen)))
        return rc;
    s->gat = dsv4_hip_input(c, "gather_lens"); /* absent: G = S */
    s->R = c->in[s->seq].shape[0];
    s->Wout = c->out[s->out].shape[1];
    s->nb = c->in[s->kc].shape[0];
    s->maxb = c->in[s->bt].shape[1];
    return DSV4_PLUGIN_OK;
}

/* Memory safety: the contract of dsv4_gather_check (ref/kvcache.c). */
int check_shape(const dsv4_hip_call *c, const ga_shape &s, char *err, size_t errlen)
{
    const dsv4_plugin_tensor *o = &c->out[s.out], *kc = &c->in[s.kc];
    const int v41 = c->variant == V_FP8 || c->variant == V_FP4;
    const long long tb = c->variant == V_FP8 ? 528 : c->variant == V_FP4 ? 288 : 584;
    if (s.B <= 0 || kc->shape[1] != s.B || kc->shape[2] != tb)
        return QFAIL("dequantize_and_gather_k_cache: k_cache must be [num_blocks, %lld, %lld]", (long long)s.B, tb);
    if (v41 && s.fnuz)
        return QFAIL("dequantize_and_gather_k_cache: the V4.1 formats have no use_fnuz");
    if (o->shape[0] != s.R || o->shape[2] != 512 || c->in[s.bt].shape[0] != s.R ||
        (s.gat >= 0 && (c->in[s.gat].dtype != DSV4_PLUGIN_INT32 || c->in[s.gat].ndim != 1 ||
                        c->in[s.gat].shape[0] != s.R)))
        return QFAIL("dequantize_and_gather_k_cache: out [R, Wout, 512], block_table [R, maxb], gather_lens [R]");
    if (s.offset < 0)
        return QFAIL("dequantize_and_gather_k_cache: offset %lld < 0", (long long)s.offset);
    if (s.R > 65535 || s.Wout > (long long)0x7fffffff * 4 || s.B > 0x7fffffff)
        return QFAIL("dequantize_and_gather_k_cache: R, Wout or block_size too large for the grid");
    const int32_t *seq = (const int32_t *)c->in[s.seq].data, *bt = (const int32_t *)c->in[s.bt].data;
    const int32_t *gat = s.gat >= 0 ? (const int32_t *)c->in[s.gat].data : NULL;
    for (long long r = 0; r < s.R; r++) {
        const long long S = seq[r], G = gat ? gat[r] : S;
        if (S < 0 || G < 0 || G > S || s.offset + G > s.Wout || (G > 0 && (S - 1) / s.B >= s.maxb))
            return QFAIL("dequantize_and_gather_k_cache: request %lld: seq_lens %lld, gather_lens %lld do not "
                         "fit out / block_table",
                         r, S, G);
        for (long long pos = S - G; (c->variant == V_ERROR || v41) && pos < S; pos++) {
            const long long p = bt[r * s.maxb + pos / s.B];
            if (p < 0 || p >= s.nb)
                return QFAIL("dequantize_and_gather_k_cache: block_table[%lld, %lld] = %lld is outside the cache",
                             r, pos / s.B, p);
        }
    }
    return DSV4_PLUGIN_OK;
}

hipError_t launch_shape(const dsv4_hip_call *c, const ga_shape &s, hipStream_t stream)
{
    const long long rows = s.Wout - s.offset; /* G <= Wout - offset (host check) */
    if (s.R == 0 || rows <= 0)
        return hipSuccess;
    if (c->variant == V_FP8 || c->variant == V_FP4) {
        hipLaunchKernelGGL(gather41_kernel, dim3(grid_for(rows, 4), (unsigned)s.R), dim3(256), 0, stream,
                           (const uint8_t *)c->din[s.kc], s.B, (const int *)c->din[s.seq],
                           s.gat >= 0 ? (const int *)c->din[s.gat] : (const int *)NULL, (const int *)c->din[s.bt],
                           s.maxb, s.Wout, s.offset, (int)(c->variant == V_FP4), (int4 *)c->dout[s.out]);
        return hipGetLastError();
    }
    hipLaunchKernelGGL(gather_kernel, dim3(grid_for(rows, ROWS_PER_BLOCK), (unsigned)s.R), dim3(256), 0, stream,
                       (const uint8_t *)c->din[s.kc], (int)s.B, s.nb, (const int *)c->din[s.seq],
                       s.gat >= 0 ? (const int *)c->din[s.gat] : (const int *)NULL, (const int *)c->din[s.bt],
                       s.maxb, s.Wout, s.offset, (int)(s.fnuz != 0), c->variant, (int4 *)c->dout[s.out]);
    return hipGetLastError();
}

} // namespace

DSV4_HIP_SHAPE_KERNEL(dequantize_and_gather_k_cache, variants, ga_shape);
