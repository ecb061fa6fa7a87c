/* quantize_and_insert_k_cache.cpp - encode bf16 K rows into the 584-byte
 * fp8_ds_mla paged cache (docs/semantics/kvcache.md A2.1-A2.3), bit-exact with
 * ref/kvcache.c (default variant, OCP and use_fnuz).
 *
 * One launch, 64 threads per token (4 token slots per 256-thread block, 2
 * tokens per thread, both tokens' reads in flight together; a token is whole
 * warps / one wave64, so a skipped slot skips whole warps).  Lane l loads
 * dims 8l..8l+7 (one 16-byte load) and encodes them with the shared record
 * encoder (kv_encode.h).
 *
 * V4.1 variants (docs/semantics/kvcache.md A2.4 [S22], ref/kvcache.c dsv4_kv41_encode_token),
 * format=v41_fp8 (528 B, page = B
 * data rows of 512 e4m3fn, then B rows of 16 UE8M0 bytes) and format=v41_fp4
 * (288 B, B rows of 256 packed e2m1, then B rows of 32 e4m3fn scales).
 * Same mapping, 64 lanes per token, lane l holds dims 8l..8l+7: a 32-tile
 * is 4 lanes, a 16-tile 2 lanes (xor-shuffle amax); every negative slot is
 * skipped ([S22] `if slot < 0`). */
#include "kv_encode.h"

namespace {

const char *const variants[] = {"default", "format=v41_fp8", "format=v41_fp4", NULL};
enum { V_DS_MLA = 0, V_FP8 = 1, V_FP4 = 2 };

/* v41_fp8 scale byte (kvcache.c dsv4_kv41_fp8_scale_byte): s = max(fl(amax *
 * fl(1/448)), 1e-4), e = ceil(log2 s) from the fp32 bits, byte e + 127 [S22]. */
__device__ inline uint8_t v41_fp8_scale(float amax)
{
    float s = amax * (1.0f / 448.0f);
    s = s > 1e-4f ? s : 1e-4f;
    const uint32_t b = dsv4q_bits(s);
    return (uint8_t)(((b >> 23) & 0xFFu) + ((b & 0x7FFFFFu) != 0));
}

/* v41_fp4 e4m3fn scale byte: fp8(clamp(amax / 6, 2^-9, 448)), IEEE division [S22]. */
__device__ inline uint8_t v41_fp4_scale(float amax)
{
    float s = dsv4q_div(amax, 6.0f);
    s = s < 0.001953125f ? 0.001953125f : s > 448.0f ? 448.0f : s;
    return dsv4q_fp8(s, 0);
}

__global__ void insert41_kernel(const uint16_t *__restrict__ k, const void *__restrict__ slots, int slots64,
                                long long T, long long B, int fp4, uint8_t *__restrict__ cache)
{
    const long long t = (long long)blockIdx.x * (blockDim.x / 64) + threadIdx.x / 64;
    const int l = (int)threadIdx.x % 64;
    if (t >= T)
        return; /* whole token: whole warps */
    const long long slot = slots64 ? static_cast<const long long *>(slots)[t] : static_cast<const int *>(slots)[t];
    if (slot < 0)
        return; /* every negative slot is skipped [S22] */
    const long long page = slot / B, row = slot % B;
    const long long D = fp4 ? 256 : 512, S = fp4 ? 32 : 16;
    uint8_t *pg = cache + page * B * (fp4 ? 288 : 528);
    float v[8];
    load8_bf16(k, t * 512 + 8 * l, v);
    float m = 0.0f;
    for (int i = 0; i < 8; i++)
        m = dsv4q_amax_step(m, v[i]); /* finite (validated) */
    m = group_amax(m, fp4 ? 2 : 4);   /* tile of 16 / 32 dims */
    if (!fp4) {
        const uint8_t sb = v41_fp8_scale(m);
        const float inv = dsv4q_pow2(127 - (int)sb); /* ((127 - e) << 23) [S22] */
        uint32_t lo = 0, hi = 0;
        for (int i = 0; i < 8; i++) {
            float q = v[i] * inv;
            q = q > 448.0f ? 448.0f : q < -448.0f ? -448.0f : q;
            const uint32_t code = dsv4q_fp8(q, 0);
            if (i < 4)
                lo |= code << (8 * i);
            else
                hi |= code << (8 * (i - 4));
        }
        *reinterpret_cast<uint2 *>(pg + row * D + 8 * l) = make_uint2(lo, hi);
        if ((l & 3) == 0)
            pg[B * D + row * S + l / 4] = sb;
    } else {
        const uint8_t sb = v41_fp4_scale(m);
        const float sf = dsv4q_fp8_decode(sb, 0); /* >= 2^-9 */
        uint32_t w = 0;
        for (int i = 0; i < 8; i++) /* even dim in the low nibble [S22] */
            w |= (uint32_t)dsv4q_e2m1_rne(dsv4q_div(v[i], sf)) << (4 * i);
        *reinterpret_cast<uint32_t *>(pg + row * D + 4 * l) = w;
        if ((l & 1) == 0)
            pg[B * D + row * S + l / 2] = sb;
    }
}

/* Tokens per thread of insert_kernel: a block's 4 token slots (64 lanes
 * each) take tokens t0, t0 + 4: both tokens' slot and K reads are issued
 * before either is encoded (the K read does not wait for the slot).  With
 * 32 registers (8 blocks of 256 an SM on NVIDIA) 8192 tokens are one wave
 * of 1024 blocks on a 132-SM H200, every K read in flight at once (at 40
 * registers, 6 blocks an SM: 1.3 waves, the second a quarter full). */
enum { TOKEN_SLOTS = 4, INSERT_TOKENS = 2, TOKENS_PER_BLOCK = TOKEN_SLOTS * INSERT_TOKENS, INSERT_BLOCKS_PER_SM = 8 };

/* SLOT32: every slot of the cache (nb * B) below 2^31, checked on the host: slots and the
 * page / row split in 32 bits.  FNUZ a template argument: the OCP kernel holds no registers
 * for the integer e4m3fnuz encoder.  At the 32-register budget ptxas (CUDA 13, sm_90) spills
 * 4 bytes (one store, one load a thread: L1) in three of the four, 24 in the 64-bit-slot fnuz one. */
template <bool SLOT32, bool FNUZ>
__global__ void GPU_LAUNCH_BOUNDS_OCC(256, INSERT_BLOCKS_PER_SM)
    insert_kernel(const uint16_t *__restrict__ k, const void *__restrict__ slots, int slots64, long long T,
                  long long B, uint8_t *__restrict__ cache)
{
    using slot_t = typename std::conditional<SLOT32, int, long long>::type;
    const long long t0 = (long long)blockIdx.x * TOKENS_PER_BLOCK + threadIdx.x / 64;
    const int l = (int)threadIdx.x % 64;
    slot_t slot[INSERT_TOKENS];
    uint4 raw[INSERT_TOKENS]; /* held as the loaded bf16 words: 4 registers a token, not 8 */
#pragma unroll
    for (int j = 0; j < INSERT_TOKENS; j++) {
        const long long t = t0 + j * TOKEN_SLOTS;
        slot[j] = -1;
        if (t < T) {
            slot[j] = slots64 ? (slot_t) static_cast<const long long *>(slots)[t]
                              : (slot_t) static_cast<const int *>(slots)[t];
            raw[j] = *reinterpret_cast<const uint4 *>(k + t * 512 + 8 * l);
        }
    }
#pragma unroll
    for (int j = 0; j < INSERT_TOKENS; j++) {
        if (slot[j] < 0)
            continue; /* slot -1: padding token, skipped [S1]; past T; a whole token: whole warps */
        float v[8];
        unpack8_bf16(raw[j], v); /* bf16 values pass the encoder unchanged */
        long long page, row; /* slot // B, slot % B [S1] */
        if (SLOT32) {
            const uint32_t p = (uint32_t)slot[j] / (uint32_t)B;
            page = p, row = (uint32_t)slot[j] - p * (uint32_t)B;
        } else {
            page = div_fast(slot[j], B, &row);
        }
        kv_encode_lane(cache + page * B * 584, B, row, l, v, kv_enc_default(FNUZ)); /* kv_encode.h */
    }
}

struct ins_shape {
    int k, sm, kc;
    int64_t B, fnuz;
    long long T, nb;
};

int shape_of(const dsv4_hip_call *c, ins_shape *s, char *err, size_t errlen)
{
    int rc;
    if ((rc = dsv4_hip_tensors(c, "k:bfloat16:2 -> k_cache:uint8:3", {&s->k, &s->kc}, err, errlen)) ||
        (rc = dsv4_hip_ints(c, "block_size use_fnuz", {&s->B, &s->fnuz}, err, errlen)))
        return rc;
    s->sm = dsv4_hip_input(c, "slot_mapping");
    if (s->sm < 0 || c->in[s->sm].ndim != 1 ||
        (c->in[s->sm].dtype != DSV4_PLUGIN_INT64 && c->in[s->sm].dtype != DSV4_PLUGIN_INT32))
        return QFAIL("quantize_and_insert_k_cache: 'slot_mapping' must be a 1-D int64 or int32 tensor");
    s->T = c->in[s->sm].shape[0];
    s->nb = c->out[s->kc].shape[0];
    return DSV4_PLUGIN_OK;
}

/* Memory safety: shapes, and every slot -1 or inside the cache. */
int check_shape(const dsv4_hip_call *c, const ins_shape &s, char *err, size_t errlen)
{
    const dsv4_plugin_tensor *kc = &c->out[s.kc], *k = &c->in[s.k], *sm = &c->in[s.sm];
    const long long tb = c->variant == V_FP8 ? 528 : c->variant == V_FP4 ? 288 : 584;
    if (s.B <= 0 || kc->shape[1] != s.B || kc->shape[2] != tb)
        return QFAIL("quantize_and_insert_k_cache: k_cache must be [num_blocks, block_size = %lld, %lld]",
                     (long long)s.B, tb);
    if (c->variant != V_DS_MLA && s.fnuz)
        return QFAIL("quantize_and_insert_k_cache: the V4.1 formats have no use_fnuz");
    if (k->shape[1] != 512 || k->shape[0] < s.T)
        return QFAIL("quantize_and_insert_k_cache: k must be [>= %lld, 512]", s.T);
    if (s.T > (long long)0x7fffffff * 4)
        return QFAIL("quantize_and_insert_k_cache: too many tokens for the grid");
    const long long nslots = s.nb * s.B;
    for (long long t = 0; t < s.T; t++) {
        const long long v = sm->dtype == DSV4_PLUGIN_INT64 ? ((const int64_t *)sm->data)[t]
                                                           : ((const int32_t *)sm->data)[t];
        if ((v < -1 && c->variant == V_DS_MLA) || v >= nslots)
            return QFAIL("quantize_and_insert_k_cache: slot_mapping[%lld] = %lld is neither -1 nor in [0, %lld)",
                         t, v, nslots);
    }
    return DSV4_PLUGIN_OK;
}

hipError_t launch_shape(const dsv4_hip_call *c, const ins_shape &s, hipStream_t stream)
{
    if (s.T == 0)
        return hipSuccess;
    if (c->variant != V_DS_MLA) {
        hipLaunchKernelGGL(insert41_kernel, dim3(grid_for(s.T, 4)), dim3(256), 0, stream,
                           (const uint16_t *)c->din[s.k], c->din[s.sm], (int)(c->in[s.sm].dtype == DSV4_PLUGIN_INT64),
                           s.T, s.B, (int)(c->variant == V_FP4), (uint8_t *)c->dout[s.kc]);
        return hipGetLastError();
    }
    const bool slot32 = s.nb * s.B <= 0x7fffffffLL;
    auto kernel = s.fnuz ? (slot32 ? insert_kernel<true, true> : insert_kernel<false, true>)
                         : (slot32 ? insert_kernel<true, false> : insert_kernel<false, false>);
    hipLaunchKernelGGL(kernel, dim3(grid_for(s.T, TOKENS_PER_BLOCK)), dim3(256), 0, stream, (const uint16_t *)c->din[s.k],
                       c->din[s.sm], (int)(c->in[s.sm].dtype == DSV4_PLUGIN_INT64), s.T, s.B, (uint8_t *)c->dout[s.kc]);
    return hipGetLastError();
}

} // namespace

DSV4_HIP_SHAPE_KERNEL(quantize_and_insert_k_cache, variants, ins_shape);
