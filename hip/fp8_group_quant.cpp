/* fp8_group_quant.cpp - FP8 per-1xg group quant (docs/semantics/quant.md
 * Q3.1 aiter HIP, Q3.2 vLLM Triton), the four variants of harness/ops_quant.c,
 * bit-exact with ref/fp8quant.c (IEEE fp32 division: nvcc's -prec-div
 * default, HIP clang's correctly rounded default; no fast-math).
 *
 * One launch over [M, K], 256-thread blocks: two chunks of 8 elements per
 * thread (16-byte bf16 loads, both issued first: quant_device.h
 * CHUNKS_PER_THREAD), g/8 aligned lanes per group (g/8 a power of two
 * <= 32: g in 8..256, the production 128 included), xor-shuffle amax of
 * integer keys, 8-byte code stores, the
 * group's first lane stores the fp32 scale (row-major or transposed). */
#include "quant_device.h"

namespace {

const char *const variants[] = {"default", "fp8=fnuz", "impl=triton", "impl=triton,fp8=fnuz", NULL};

/* TRITON, FNUZ and BF16 are template arguments (straight-line element code). */
template <bool TRITON, bool FNUZ, bool BF16>
__global__ void __launch_bounds__(QUANT_THREADS)
    group_kernel(const void *__restrict__ x, long long nchunks, long long M, long long K, int lanes, float fp8_max,
                 float inv_max, int transpose, uint2 *__restrict__ y, float *__restrict__ scale)
{
    float v[CHUNKS_PER_THREAD][8];
    int32_t key[CHUNKS_PER_THREAD];
    /* amax floored at 1e-10 (docs/semantics/quant.md Q3.1 step 1, Q3.2 step 1); NaN ignored */
    load_chunks_amax(x, BF16, nchunks, dsv4q_amax_key(1e-10f), v, key);
    #pragma unroll
    for (int k = 0; k < CHUNKS_PER_THREAD; k++) {
        const long long c = quant_chunk(k);
        const float m = dsv4q_amax_of_key(group_max_key(key[k], lanes)); /* whole warps */
        if (c >= nchunks)
            continue;
        float s, inv = 0.0f;
        if (TRITON) {
            s = m / fp8_max; /* division (Q3.2 step 2) */
        } else {
            s = m * inv_max; /* fl(amax * fl(1/MAX)) (Q3.1 step 2) */
            inv = 1.0f / s;  /* IEEE division (Q3.1 step 3) */
        }
#ifdef DSV4Q_HW_E4M3
        const float f = TRITON ? s : inv;
        /* f finite and nonzero (amax >= 1e-10 and finite: an Inf amax gives inv = 0, and
         * Inf * 0 is x86's negative NaN), the clamp to +-448 is the conversion's own saturation */
        if (!FNUZ && (dsv4q_bits(f) & 0x7F800000u) != 0x7F800000u && f != 0.0f) {
            y[c] = make_uint2(dsv4q_fp8x4_scaled(v[k], f, TRITON), dsv4q_fp8x4_scaled(v[k] + 4, f, TRITON));
        } else
#endif
        {
            float q[8];
            for (int i = 0; i < 8; i++) {
                q[i] = TRITON ? dsv4q_div(v[k][i], s) : dsv4q_mul(v[k][i], inv);
                q[i] = q[i] < -fp8_max ? -fp8_max : q[i] > fp8_max ? fp8_max : q[i]; /* clamp; NaN passes (fp8quant.c clampf) */
            }
            y[c] = make_uint2(dsv4q_fp8x4(q[0], q[1], q[2], q[3], FNUZ), dsv4q_fp8x4(q[4], q[5], q[6], q[7], FNUZ));
        }
        if ((c & (lanes - 1)) == 0) { /* lanes is a power of two */
            const long long g = c / lanes, G = K / (8LL * lanes), row = g / G, col = g % G;
            scale[transpose ? col * M + row : g] = s; /* (m, g) at g*M + m when transposed (docs/semantics/quant.md Q3.1) */
        }
    }
}

struct group_args {
    const void *x;
    long long nchunks, M, K;
    int lanes;
    float mx;
    int transpose;
};

template <bool TRITON, bool FNUZ>
void launch_form(const group_args &a, int is_bf16, hipStream_t stream, uint2 *y, float *scale)
{
    const unsigned grid = grid_for(a.nchunks, QUANT_THREADS * CHUNKS_PER_THREAD);
    launch_by_input_dtype(is_bf16, [&](auto bf16) {
        hipLaunchKernelGGL((group_kernel<TRITON, FNUZ, decltype(bf16)::value>), dim3(grid), dim3(QUANT_THREADS), 0,
                           stream, a.x, a.nchunks, a.M, a.K, a.lanes, a.mx, 1.0f / a.mx, a.transpose, y, scale);
    });
}

struct gq_shape {
    int x, y, s, is_bf16;
    int64_t g, tr;
    long long M, K;
};

int shape_of(const dsv4_hip_call *c, gq_shape *s, char *err, size_t errlen)
{
    int rc;
    const int fnuz = c->variant & 1;
    if ((rc = quant_input_x(c, &s->x, &s->is_bf16, err, errlen)) ||
        (rc = dsv4_hip_tensor(c, 1, "y", fnuz ? DSV4_PLUGIN_FLOAT8_E4M3FNUZ : DSV4_PLUGIN_FLOAT8_E4M3FN, 2,
                              &s->y, err, errlen)) ||
        (rc = dsv4_hip_tensor(c, 1, "scale", DSV4_PLUGIN_FLOAT32, 2, &s->s, err, errlen)) ||
        (rc = dsv4_hip_int(c, "group_size", &s->g, err, errlen)) ||
        (rc = dsv4_hip_int(c, "transpose_scale", &s->tr, err, errlen)))
        return rc;
    dsv4_hip_dims(c->in[s->x], &s->M, &s->K);
    return DSV4_PLUGIN_OK;
}

int check_shape(const dsv4_hip_call *c, const gq_shape &s, char *err, size_t errlen)
{
    const long long lanes = s.g / 8;
    if (s.g % 8 != 0 || lanes < 1 || lanes > 32 || (lanes & (lanes - 1)))
        return QFAIL("fp8_group_quant: group_size %lld: the kernel needs 8 * 2^k <= 256", (long long)s.g);
    if (s.K % s.g != 0)
        return QFAIL("fp8_group_quant: K = %lld is not a multiple of group_size %lld", s.K, (long long)s.g);
    const long long G = s.K / s.g;
    const dsv4_plugin_tensor *y = &c->out[s.y], *sc = &c->out[s.s];
    if (y->shape[0] != s.M || y->shape[1] != s.K || sc->shape[0] != (s.tr ? G : s.M) ||
        sc->shape[1] != (s.tr ? s.M : G))
        return QFAIL("fp8_group_quant: output shapes do not match [M, K] = [%lld, %lld]", s.M, s.K);
    if (s.M * s.K / 8 > (long long)0x7fffffff * 256)
        return QFAIL("fp8_group_quant: tensor too large for the grid");
    return DSV4_PLUGIN_OK;
}

hipError_t launch_shape(const dsv4_hip_call *c, const gq_shape &s, hipStream_t stream)
{
    const long long nchunks = s.M * s.K / 8;
    if (nchunks == 0)
        return hipSuccess;
    const int triton = c->variant >= 2, fnuz = c->variant & 1;
    /* FP8 max: 448 (fn), 240 (aiter fnuz), 224 (vLLM fnuz) (fp8quant.c dsv4_fp8q_default_max) */
    const float mx = !fnuz ? 448.0f : triton ? 224.0f : 240.0f;
    const group_args a = {c->din[s.x], nchunks, s.M, s.K, (int)(s.g / 8), mx, (int)(s.tr != 0)};
    uint2 *y = (uint2 *)c->dout[s.y];
    float *sc = (float *)c->dout[s.s];
    if (triton)
        fnuz ? launch_form<true, true>(a, s.is_bf16, stream, y, sc) : launch_form<true, false>(a, s.is_bf16, stream, y, sc);
    else
        fnuz ? launch_form<false, true>(a, s.is_bf16, stream, y, sc) : launch_form<false, false>(a, s.is_bf16, stream, y, sc);
    return hipGetLastError();
}

} // namespace

DSV4_HIP_SHAPE_KERNEL(fp8_group_quant, variants, gq_shape);
