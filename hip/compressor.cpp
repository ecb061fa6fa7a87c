/* compressor.cpp - one KV compressor step (docs/semantics/gemm.md A11,
 * kvcache.md A2.5, indices.md A5.4 [S17-S20]; ref/compressor.c dsv4_ref_compressor_step), the
 * reference's state handling: first save_partial_states for every token,
 * then the compression of every emitting token reads the updated state.
 *
 * Two launches on one stream (the chain's two steps; the second reads rows
 * the first writes for other tokens of the same step, so a single launch
 * would need a grid-wide barrier):
 *  1. save: state[slot] = [kv | score + ape[pos % c]] (one fp32 add,
 *     bit-exact), slot < 0 skipped; 4 floats per thread.
 *  2. compress + insert: one 64-thread block per token; tokens with slot
 *     >= 0 and (pos + 1) % c == 0 emit.  Lane l owns dims 8l..8l+7: per dim
 *     the softmax over the coff*c window rows of positions pos-coff*c+1..pos
 *     (rows with position < 0 masked; C4's newer c rows read dims
 *     [512, 1024) of the state row), fp32 with expf; RMSNorm with weight
 *     (fp32 block sum, 1/sqrt); forward GPT-J RoPE of lanes 448..511 at
 *     (pos // c) * c in fp32; bf16; the 584-byte record (OCP, 448) at the
 *     compressed slot block_table[r, cidx // B] * B + cidx % B, cidx = pos //
 *     c, B = 256 / c (kv_encode.h).  The reference computes the float steps
 *     in double; the fp32 steps flip a byte only near a rounding boundary
 *     (the op's budget, docs/semantics/README.md A14). */
#include "idx_common.h"
#include "kv_encode.h"
#include "rope_device.h"

namespace {

const char *const variants[] = {"default", NULL};

constexpr int D = 512, RD = 64, NOPE_LANES = 56;

__global__ void save_kernel(const float *__restrict__ ks, const int64_t *__restrict__ positions,
                            const int64_t *__restrict__ slots, const float *__restrict__ ape, long long T, int c,
                            int half, float *__restrict__ state)
{
    const long long W2 = 2 * half, per = W2 / 4;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < T * per; i += stride) {
        const long long t = i / per, j = 4 * (i % per);
        const long long slot = slots[t];
        if (slot < 0)
            continue;
        float4 v = *reinterpret_cast<const float4 *>(ks + t * W2 + j);
        if (j >= half) { /* score + ape[pos % c] (docs/semantics/gemm.md A11 step 2 [S18]) */
            const float4 a = *reinterpret_cast<const float4 *>(ape + (positions[t] % c) * half + (j - half));
            v.x = __fadd_rn(v.x, a.x), v.y = __fadd_rn(v.y, a.y), v.z = __fadd_rn(v.z, a.z), v.w = __fadd_rn(v.w, a.w);
        }
        *reinterpret_cast<float4 *>(state + slot * W2 + j) = v;
    }
}

struct comp_tabs {
    const int64_t *positions, *slots;
    const int32_t *qsl, *sbt, *bt;
    const float *state, *nw, *cs;
    long long R, msb, mb;
    int c, coff, Bs;
    float eps;
};

__device__ inline void load8f(const float *p, float v[8])
{
    const float4 a = *reinterpret_cast<const float4 *>(p), b = *reinterpret_cast<const float4 *>(p + 4);
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
}

__global__ void __launch_bounds__(64) compress_kernel(comp_tabs a, uint8_t *__restrict__ kv_cache)
{
    const long long t = blockIdx.x;
    const int l = (int)threadIdx.x;
    const long long pos = a.positions[t];
    if (a.slots[t] < 0 || (pos + 1) % a.c != 0)
        return; /* emits only at the end of a c-chunk (docs/semantics/gemm.md A11 step 3); whole block */
    const long long r = idx::request_of_row(a.qsl, a.R, t);
    const int half = a.coff * D, W2 = 2 * half, nu = a.coff * a.c;
    float m[8], z[8], s[8], kv[8], sc[8];
    for (int i = 0; i < 8; i++)
        m[i] = -INFINITY, z[i] = 0.0f, s[i] = 0.0f;
    for (int pass = 0; pass < 2; pass++)
        for (int u = 0; u < nu; u++) {
            const long long p = pos - nu + 1 + u;
            if (p < 0)
                continue; /* masked: score -inf, kv 0 */
            /* docs/semantics/gemm.md A11 step 3 */
            const long long ri = (long long)a.sbt[r * a.msb + p / a.Bs] * a.Bs + p % a.Bs;
            const int off = (a.coff == 2 && u >= a.c) ? D : 0; /* C4: newer c rows in dims [512, 1024) */
            const float *row = a.state + ri * W2 + off + 8 * l;
            load8f(row + half, sc);
            if (pass == 0) {
                for (int i = 0; i < 8; i++)
                    m[i] = sc[i] > m[i] ? sc[i] : m[i];
            } else {
                load8f(row, kv);
                for (int i = 0; i < 8; i++) {
                    const float w = expf(sc[i] - m[i]);
                    z[i] += w;
                    s[i] = fmaf(w, kv[i], s[i]);
                }
            }
        }
    float y[8], ss = 0.0f;
    for (int i = 0; i < 8; i++) {
        y[i] = s[i] / z[i];
        ss = fmaf(y[i], y[i], ss);
    }
    ss = block_sum(ss);
    const float inv = 1.0f / sqrtf(ss / (float)D + a.eps); /* RMSNorm with weight (step 3) */
    for (int i = 0; i < 8; i++)
        y[i] = y[i] * inv * a.nw[8 * l + i];
    if (l >= NOPE_LANES) /* RoPE at (pos // c) * c */
        rope4(y, a.cs + (pos / a.c * a.c) * RD, RD / 2, 4 * (l - NOPE_LANES), 1);
    for (int i = 0; i < 8; i++)
        y[i] = kv_round_bf16(y[i]); /* the record stores bf16(n) [S19] */
    const long long B = 256 / a.c, cidx = pos / a.c; /* docs/semantics/indices.md A5.4 [S20] */
    const long long page = a.bt[r * a.mb + cidx / B];
    kv_encode_lane(kv_cache + page * B * 584, B, cidx % B, l, y, kv_enc_default(0)); /* OCP, 448 (A2.3 [S19]) */
}

struct comp_shape {
    int ks, pos, qsl, ape, sc, ssm, sbt, nw, cs, kc, bt, osc, okc;
    int64_t c;
    double eps;
    long long T, R;
};

int shape_of(const dsv4_hip_call *c, comp_shape *s, char *err, size_t errlen)
{
    int rc;
    if ((rc = dsv4_hip_tensors(c, "kv_score:float32:2 positions:int64:1 query_start_loc:int32:1 ape:float32:2 "
                                  "state_cache:float32:3 state_slot_mapping:int64:1 state_block_table:int32:2 "
                                  "norm_weight:float32:1 cos_sin_cache:float32:2 kv_cache:uint8:3 "
                                  "block_table:int32:2 -> state_cache:float32:3 kv_cache:uint8:3",
                               {&s->ks, &s->pos, &s->qsl, &s->ape, &s->sc, &s->ssm, &s->sbt, &s->nw,
                                &s->cs, &s->kc, &s->bt, &s->osc, &s->okc}, err, errlen)) ||
        (rc = dsv4_hip_int(c, "compress_ratio", &s->c, err, errlen)) ||
        (rc = dsv4_hip_float(c, "eps", &s->eps, err, errlen)))
        return rc;
    s->T = c->in[s->ks].shape[0];
    s->R = c->in[s->qsl].shape[0] - 1;
    return DSV4_PLUGIN_OK;
}

static int same_shape(const dsv4_plugin_tensor *a, const dsv4_plugin_tensor *b)
{
    for (int k = 0; k < a->ndim; k++)
        if (a->shape[k] != b->shape[k])
            return 0;
    return a->ndim == b->ndim;
}

/* comp_args_of's shapes and dsv4_compressor_check's indices: every state
 * row of an emitting token's window, its compressed slot and RoPE row. */
int check_shape(const dsv4_hip_call *c, const comp_shape &s, char *err, size_t errlen)
{
    if (s.c != 4 && s.c != 128)
        return QFAIL("compressor: compress_ratio = %lld: 4 or 128", (long long)s.c);
    const long long coff = s.c == 4 ? 2 : 1, Bs = s.c == 4 ? 4 : 8, W2 = 2 * coff * D, B = 256 / s.c;
    const int64_t *sks = c->in[s.ks].shape, *sape = c->in[s.ape].shape, *ssc = c->in[s.sc].shape,
                  *ssbt = c->in[s.sbt].shape, *scs = c->in[s.cs].shape, *skc = c->in[s.kc].shape,
                  *sbt = c->in[s.bt].shape;
    if (s.R < 0 || sks[1] != W2 || c->in[s.pos].shape[0] != s.T || sape[0] != s.c || sape[1] != coff * D ||
        ssc[1] != Bs || ssc[2] != W2 || c->in[s.ssm].shape[0] != s.T || ssbt[0] != s.R || c->in[s.nw].shape[0] != D ||
        scs[1] != RD || skc[1] != B || skc[2] != 584 || sbt[0] != s.R || !same_shape(&c->in[s.sc], &c->out[s.osc]) ||
        !same_shape(&c->in[s.kc], &c->out[s.okc]))
        return QFAIL("compressor: shapes (c = %lld)", (long long)s.c);
    if (s.T > 0x7fffffffLL)
        return QFAIL("compressor: too many tokens for the grid");
    const int32_t *q = (const int32_t *)c->in[s.qsl].data, *st = (const int32_t *)c->in[s.sbt].data,
                  *bt = (const int32_t *)c->in[s.bt].data;
    const int64_t *pos = (const int64_t *)c->in[s.pos].data, *sl = (const int64_t *)c->in[s.ssm].data;
    if (q[0] != 0 || q[s.R] != s.T)
        return QFAIL("compressor: query_start_loc must run from 0 to T = %lld", s.T);
    for (long long r = 0; r < s.R; r++)
        if (q[r + 1] < q[r])
            return QFAIL("compressor: query_start_loc[%lld] decreases", r + 1);
    const long long nsb = ssc[0], msb = ssbt[1], nb = skc[0], mb = sbt[1], P = scs[0];
    long long r = 0;
    for (long long t = 0; t < s.T; t++) {
        while (r < s.R && q[r + 1] <= t)
            r++;
        if (pos[t] < 0)
            return QFAIL("compressor: positions[%lld] = %lld is negative", t, (long long)pos[t]);
        if (sl[t] >= nsb * Bs)
            return QFAIL("compressor: state_slot_mapping[%lld] = %lld outside the state cache", t, (long long)sl[t]);
        if (sl[t] < 0 || (pos[t] + 1) % s.c != 0)
            continue;
        for (long long p = pos[t] - coff * s.c + 1; p <= pos[t]; p++) {
            if (p < 0)
                continue;
            if (p / Bs >= msb || st[r * msb + p / Bs] < 0 || st[r * msb + p / Bs] >= nsb)
                return QFAIL("compressor: token %lld: state page of position %lld missing or out of range", t, p);
        }
        const long long cidx = pos[t] / s.c;
        if (cidx / B >= mb || bt[r * mb + cidx / B] < 0 || bt[r * mb + cidx / B] >= nb)
            return QFAIL("compressor: token %lld: block_table entry of compressed index %lld missing or out of range",
                         t, cidx);
        if (pos[t] / s.c * s.c >= P)
            return QFAIL("compressor: token %lld: RoPE row %lld outside cos_sin_cache", t, (long long)(pos[t] / s.c * s.c));
    }
    return DSV4_PLUGIN_OK;
}

hipError_t launch_shape(const dsv4_hip_call *c, const comp_shape &s, hipStream_t stream)
{
    if (s.T == 0)
        return hipSuccess;
    const int coff = s.c == 4 ? 2 : 1, half = coff * D;
    const long long work = s.T * (2LL * half / 4);
    long long blocks = (work + 255) / 256;
    const long long cap = (long long)c->prop->multiProcessorCount * 32;
    blocks = blocks < cap ? blocks : cap;
    float *state = (float *)c->dout[s.osc];
    hipLaunchKernelGGL(save_kernel, dim3((unsigned)blocks), dim3(256), 0, stream, (const float *)c->din[s.ks],
                       (const int64_t *)c->din[s.pos], (const int64_t *)c->din[s.ssm], (const float *)c->din[s.ape],
                       s.T, (int)s.c, half, state);
    hipError_t e = hipGetLastError();
    if (e != hipSuccess)
        return e;
    comp_tabs a;
    a.positions = (const int64_t *)c->din[s.pos];
    a.slots = (const int64_t *)c->din[s.ssm];
    a.qsl = (const int32_t *)c->din[s.qsl];
    a.sbt = (const int32_t *)c->din[s.sbt];
    a.bt = (const int32_t *)c->din[s.bt];
    a.state = state;
    a.nw = (const float *)c->din[s.nw];
    a.cs = (const float *)c->din[s.cs];
    a.R = s.R;
    a.msb = c->in[s.sbt].shape[1];
    a.mb = c->in[s.bt].shape[1];
    a.c = (int)s.c;
    a.coff = coff;
    a.Bs = s.c == 4 ? 4 : 8; /* state page (docs/semantics/kvcache.md A2.5 [S17]) */
    a.eps = (float)s.eps;
    hipLaunchKernelGGL(compress_kernel, dim3((unsigned)s.T), dim3(64), 0, stream, a, (uint8_t *)c->dout[s.okc]);
    return hipGetLastError();
}

} // namespace

DSV4_HIP_SHAPE_KERNEL(compressor, variants, comp_shape);
