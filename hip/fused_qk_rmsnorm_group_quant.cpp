/* fused_qk_rmsnorm_group_quant.cpp - RMSNorm of q and kv, then the aiter
 * 1x128 fp8 group quant of q; kv stays bf16 (docs/semantics/quant.md Q3.3).
 * Both variants of harness/ops_quant.c: the kernel computes y in fp32 as
 * the production kernel does (per-thread fmaf sum of squares, a tree across
 * the block, rcp = 1/sqrtf(ss/n + eps) with IEEE sqrt and division,
 * y = fl(fl(x*rcp)*w)), which the policies of both variants bound.
 *
 * One launch: block (r, 0) normalizes and quantizes q row r, block (r, 1)
 * normalizes kv row r.  256 threads, 8 elements per thread per step (16-byte
 * loads); pass 1 sums squares, pass 2 re-reads the row (from cache) and
 * writes codes with 8-byte stores (groups of 128 = 16 aligned lanes,
 * xor-shuffle amax) or bf16 with 16-byte stores. */
#include "quant_device.h"

namespace {

const char *const variants[] = {"default", "mode=faithful", NULL};

__global__ void fused_kernel(const uint16_t *__restrict__ q, const uint16_t *__restrict__ qw,
                             const uint16_t *__restrict__ kv, const uint16_t *__restrict__ kvw, long long m,
                             long long n1, long long n2, float qeps, float kveps, int transpose,
                             uint2 *__restrict__ q_out, float *__restrict__ q_scale, int4 *__restrict__ kv_out)
{
    const long long r = blockIdx.x;
    const int is_q = blockIdx.y == 0;
    const long long n = is_q ? n1 : n2;
    const uint16_t *x = (is_q ? q : kv) + r * n, *w = is_q ? qw : kvw;
    const long long nchunks = n / 8;
    /* pass 1: sum of squares, sequential fmaf per thread (docs/semantics/quant.md Q3.3 step 2) */
    float ss = 0.0f;
    for (long long ch = threadIdx.x; ch < nchunks; ch += blockDim.x) {
        float v[8];
        load8_bf16(x, ch * 8, v);
        for (int i = 0; i < 8; i++)
            ss = fmaf(v[i], v[i], ss);
    }
    ss = block_sum(ss);
    const float rcp = 1.0f / sqrtf(ss / (float)n + (is_q ? qeps : kveps)); /* step 3 */
    /* pass 2: uniform trip count over the block so that every lane shuffles */
    for (long long base = 0; base < nchunks; base += blockDim.x) {
        const long long ch = base + threadIdx.x;
        const bool active = ch < nchunks;
        float y[8];
        float amax = 1e-10f;
        if (active) {
            float v[8], wv[8];
            load8_bf16(x, ch * 8, v);
            load8_bf16(w, ch * 8, wv);
            for (int i = 0; i < 8; i++) {
                y[i] = (v[i] * rcp) * wv[i]; /* fl(fl(x * rcp) * w) (step 4) */
                amax = dsv4q_amax_step(amax, y[i]);
            }
        }
        if (!is_q) { /* kv_out = bf16(y) (step 8) */
            if (active) {
                uint32_t u[4];
                for (int k = 0; k < 4; k++)
                    u[k] = (uint32_t)dsv4q_bf16(y[2 * k]) | ((uint32_t)dsv4q_bf16(y[2 * k + 1]) << 16);
                kv_out[(r * n2) / 8 + ch] = make_int4((int)u[0], (int)u[1], (int)u[2], (int)u[3]);
            }
            continue;
        }
        amax = group_amax(amax, 16); /* 128-element groups (step 6) */
        if (!active)
            continue;
        const float s = amax * (1.0f / 448.0f); /* fl(amax * fl(1/448)) */
        const float inv = 1.0f / s;
        uint32_t lo = 0, hi = 0;
        for (int i = 0; i < 8; i++) {
            float qv = y[i] * inv;
            qv = qv < -448.0f ? -448.0f : qv > 448.0f ? 448.0f : qv;
            const uint32_t code = dsv4q_fp8(qv, 0);
            if (i < 4)
                lo |= code << (8 * i);
            else
                hi |= code << (8 * (i - 4));
        }
        q_out[(r * n1) / 8 + ch] = make_uint2(lo, hi);
        if ((ch & 15) == 0) {
            const long long g = ch / 16, G = n1 / 128;
            q_scale[transpose ? g * m + r : r * G + g] = s;
        }
    }
}

struct fq_shape {
    int q, qw, kv, kvw, qo, qs, ko;
    int64_t g, tr;
    long long m, n1, n2;
};

int shape_of(const dsv4_hip_call *c, fq_shape *s, char *err, size_t errlen)
{
    int rc;
    if ((rc = dsv4_hip_tensor(c, 0, "q", DSV4_PLUGIN_BFLOAT16, 2, &s->q, err, errlen)) ||
        (rc = dsv4_hip_tensor(c, 0, "q_weight", DSV4_PLUGIN_BFLOAT16, 1, &s->qw, err, errlen)) ||
        (rc = dsv4_hip_tensor(c, 0, "kv", DSV4_PLUGIN_BFLOAT16, 2, &s->kv, err, errlen)) ||
        (rc = dsv4_hip_tensor(c, 0, "kv_weight", DSV4_PLUGIN_BFLOAT16, 1, &s->kvw, err, errlen)) ||
        (rc = dsv4_hip_tensor(c, 1, "q_out", DSV4_PLUGIN_FLOAT8_E4M3FN, 2, &s->qo, err, errlen)) ||
        (rc = dsv4_hip_tensor(c, 1, "q_scale", DSV4_PLUGIN_FLOAT32, 2, &s->qs, err, errlen)) ||
        (rc = dsv4_hip_tensor(c, 1, "kv_out", DSV4_PLUGIN_BFLOAT16, 2, &s->ko, err, errlen)) ||
        (rc = dsv4_hip_int(c, "group_size", &s->g, err, errlen)) ||
        (rc = dsv4_hip_int(c, "transpose_scale", &s->tr, err, errlen)))
        return rc;
    s->m = c->in[s->q].shape[0];
    s->n1 = c->in[s->q].shape[1];
    s->n2 = c->in[s->kv].shape[1];
    return DSV4_PLUGIN_OK;
}

int fused_check(const dsv4_hip_call *c, char *err, size_t errlen)
{
    fq_shape s;
    int rc = shape_of(c, &s, err, errlen);
    if (rc)
        return rc;
    if (s.g != 128 || s.n1 % 128 != 0 || s.n1 <= 0)
        return QFAIL("fused_qk_rmsnorm_group_quant: group_size must be 128 and n1 a positive multiple of it");
    if (s.n2 % 8 != 0 || s.n2 <= 0)
        return QFAIL("fused_qk_rmsnorm_group_quant: the kernel needs n2 a positive multiple of 8 (n2 = %lld)",
                     s.n2);
    if (c->in[s.kv].shape[0] != s.m || c->in[s.qw].shape[0] != s.n1 || c->in[s.kvw].shape[0] != s.n2)
        return QFAIL("fused_qk_rmsnorm_group_quant: q [m, n1], q_weight [n1], kv [m, n2], kv_weight [n2]");
    const long long G = s.n1 / 128;
    if (c->out[s.qo].shape[0] != s.m || c->out[s.qo].shape[1] != s.n1 || c->out[s.ko].shape[0] != s.m ||
        c->out[s.ko].shape[1] != s.n2 || c->out[s.qs].shape[0] != (s.tr ? G : s.m) ||
        c->out[s.qs].shape[1] != (s.tr ? s.m : G))
        return QFAIL("fused_qk_rmsnorm_group_quant: output shapes do not match the inputs");
    if (s.m > 0x7fffffff)
        return QFAIL("fused_qk_rmsnorm_group_quant: m too large for the grid");
    const dsv4_plugin_param *qe = dsv4_hip_param(c, "q_epsilon"), *ke = dsv4_hip_param(c, "kv_epsilon");
    if (!qe || !ke || qe->kind != DSV4_PLUGIN_FLOAT || ke->kind != DSV4_PLUGIN_FLOAT)
        return QFAIL("fused_qk_rmsnorm_group_quant: float parameters q_epsilon, kv_epsilon missing");
    return DSV4_PLUGIN_OK;
}

hipError_t fused_launch(const dsv4_hip_call *c, hipStream_t stream)
{
    fq_shape s;
    char err[8];
    if (shape_of(c, &s, err, sizeof err))
        return hipErrorInvalidValue;
    if (s.m == 0)
        return hipSuccess;
    const float qe = (float)dsv4_hip_param(c, "q_epsilon")->f, ke = (float)dsv4_hip_param(c, "kv_epsilon")->f;
    hipLaunchKernelGGL(fused_kernel, dim3((unsigned)s.m, 2), dim3(256), 0, stream,
                       (const uint16_t *)c->din[s.q], (const uint16_t *)c->din[s.qw],
                       (const uint16_t *)c->din[s.kv], (const uint16_t *)c->din[s.kvw], s.m, s.n1, s.n2, qe, ke,
                       (int)(s.tr != 0), (uint2 *)c->dout[s.qo], (float *)c->dout[s.qs], (int4 *)c->dout[s.ko]);
    return hipGetLastError();
}

} // namespace

dsv4_hip_kernel dsv4_hip_fused_qk_rmsnorm_group_quant = {"fused_qk_rmsnorm_group_quant", variants, fused_check,
                                                         fused_launch};
