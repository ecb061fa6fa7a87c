/* quantize_and_insert_k_cache.cpp - encode bf16 K rows into the 584-byte
 * fp8_ds_mla paged cache (spec sparse_attention.md 2.1-2.3), bit-exact with
 * ref/kvcache.c (default variant, OCP and use_fnuz).
 *
 * One launch, 64 threads per token (4 tokens per 256-thread block; a token
 * is whole warps / one wave64, so a skipped slot returns whole warps).  Lane
 * l loads dims 8l..8l+7 (one 16-byte load) and encodes them with the shared
 * record encoder (kv_encode.h). */
#include "kv_encode.h"

namespace {

const char *const variants[] = {"default", NULL};

__global__ void insert_kernel(const uint16_t *__restrict__ k, const void *__restrict__ slots, int slots64,
                              long long T, long long B, int fnuz, uint8_t *__restrict__ cache)
{
    const long long t = (long long)blockIdx.x * (blockDim.x / 64) + threadIdx.x / 64;
    const int l = (int)threadIdx.x % 64;
    if (t >= T)
        return; /* whole token: whole warps */
    const long long slot = slots64 ? static_cast<const long long *>(slots)[t] : static_cast<const int *>(slots)[t];
    if (slot < 0)
        return; /* slot -1: padding token, skipped [S1] */
    const long long page = slot / B, row = slot % B; /* slot // B, slot % B [S1] */
    float v[8];
    load8_bf16(k, t * 512 + 8 * l, v); /* bf16 values pass the encoder unchanged */
    kv_encode_lane(cache + page * B * 584, B, row, l, v, kv_enc_default(fnuz)); /* kv_encode.h */
}

struct ins_shape {
    int k, sm, kc;
    int64_t B, fnuz;
    long long T, nb;
};

int shape_of(const dsv4_hip_call *c, ins_shape *s, char *err, size_t errlen)
{
    int rc;
    if ((rc = dsv4_hip_tensor(c, 0, "k", DSV4_PLUGIN_BFLOAT16, 2, &s->k, err, errlen)) ||
        (rc = dsv4_hip_tensor(c, 1, "k_cache", DSV4_PLUGIN_UINT8, 3, &s->kc, err, errlen)) ||
        (rc = dsv4_hip_int(c, "block_size", &s->B, err, errlen)) ||
        (rc = dsv4_hip_int(c, "use_fnuz", &s->fnuz, err, errlen)))
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
int insert_check(const dsv4_hip_call *c, char *err, size_t errlen)
{
    ins_shape s;
    int rc = shape_of(c, &s, err, errlen);
    if (rc)
        return rc;
    const dsv4_plugin_tensor *kc = &c->out[s.kc], *k = &c->in[s.k], *sm = &c->in[s.sm];
    if (s.B <= 0 || kc->shape[1] != s.B || kc->shape[2] != 584)
        return QFAIL("quantize_and_insert_k_cache: k_cache must be [num_blocks, block_size = %lld, 584]", (long long)s.B);
    if (k->shape[1] != 512 || k->shape[0] < s.T)
        return QFAIL("quantize_and_insert_k_cache: k must be [>= %lld, 512]", s.T);
    if (s.T > (long long)0x7fffffff * 4)
        return QFAIL("quantize_and_insert_k_cache: too many tokens for the grid");
    const long long nslots = s.nb * s.B;
    for (long long t = 0; t < s.T; t++) {
        const long long v = sm->dtype == DSV4_PLUGIN_INT64 ? ((const int64_t *)sm->data)[t]
                                                           : ((const int32_t *)sm->data)[t];
        if (v < -1 || v >= nslots)
            return QFAIL("quantize_and_insert_k_cache: slot_mapping[%lld] = %lld is neither -1 nor in [0, %lld)",
                         t, v, nslots);
    }
    return DSV4_PLUGIN_OK;
}

hipError_t insert_launch(const dsv4_hip_call *c, hipStream_t stream)
{
    ins_shape s;
    char err[8];
    if (shape_of(c, &s, err, sizeof err))
        return hipErrorInvalidValue;
    if (s.T == 0)
        return hipSuccess;
    hipLaunchKernelGGL(insert_kernel, dim3(grid_for(s.T, 4)), dim3(256), 0, stream, (const uint16_t *)c->din[s.k],
                       c->din[s.sm], (int)(c->in[s.sm].dtype == DSV4_PLUGIN_INT64), s.T, s.B, (int)(s.fnuz != 0),
                       (uint8_t *)c->dout[s.kc]);
    return hipGetLastError();
}

} // namespace

dsv4_hip_kernel dsv4_hip_quantize_and_insert_k_cache = {"quantize_and_insert_k_cache", variants, insert_check,
                                                        insert_launch};
