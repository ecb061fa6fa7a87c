/* fp8quant.c - FP8 1x128 group quant and the RMSNorm of
 * fused_qk_rmsnorm_group_quant; see fp8quant.h.  Semantics:
 * docs/semantics/quant.md Q3 (tags below are its sections). */
#include "fp8quant.h"

#include <inttypes.h>
#include <math.h>

float dsv4_fp8q_default_max(dsv4_fp8q_impl impl, dsv4_fp8_kind kind)
{
    if (kind == DSV4_FP8_E4M3FN)
        return 448.0f; /* opus finfo / get_fp8_min_max on OCP fp8 (docs/semantics/quant.md Q3.1, Q3.2) */
    /* fnuz: aiter clamps at 240 (gfx942 finfo, docs/semantics/quant.md Q3.1 step 2); vLLM's
     * get_fp8_min_max gives 224 on fnuz platforms (docs/semantics/quant.md Q3.2 step 2). */
    return impl == DSV4_FP8Q_AITER_HIP ? 240.0f : 224.0f;
}

static float clampf(float v, float lo, float hi) { return v < lo ? lo : v > hi ? hi : v; }

float dsv4_fp8q_group(const float *x, int n, const dsv4_fp8q_cfg *cfg, uint8_t *codes)
{
    const float mx = cfg->fp8_max;
    float amax = 1e-10f; /* both floor amax at 1e-10 (docs/semantics/quant.md Q3.1 step 1, Q3.2 step 1) */
    for (int i = 0; i < n; i++) {
        float a = fabsf(x[i]);
        if (a > amax) /* NaN compares false: ignored, as the max reductions do (inferred) */
            amax = a;
    }
    float scale;
    if (cfg->impl == DSV4_FP8Q_AITER_HIP) {
        scale = amax * (1.0f / mx); /* fl(amax * fl(1/MAX)): multiply, not divide (Q3.1 step 2) */
        float inv = 1.0f / scale;   /* IEEE fp32 division, no fast-math (Q3.1 step 3) */
        for (int i = 0; i < n; i++) /* med3 clamp then RNE cvt (Q3.1 step 4) */
            codes[i] = dsv4_fp8_from_f32(clampf(x[i] * inv, -mx, mx), cfg->kind, 1);
    } else {
        scale = amax / mx; /* division (Q3.2 step 2) */
        for (int i = 0; i < n; i++) /* clamp(y / scale) then cast (Q3.2 step 4) */
            codes[i] = dsv4_fp8_from_f32(clampf(x[i] / scale, -mx, mx), cfg->kind, 1);
    }
    return scale;
}

int dsv4_fp8q_rows(const float *x, int64_t M, int64_t K, const dsv4_fp8q_cfg *cfg, uint8_t *y,
                   float *scale, dsv4_status *st)
{
    if (cfg->group <= 0 || M < 0 || K < 0 || K % cfg->group != 0)
        return dsv4_fail(st, DSV4_EINPUT, "fp8 group quant: K = %" PRId64 " is not a multiple of group %d",
                         K, cfg->group);
    const int64_t G = K / cfg->group;
    for (int64_t m = 0; m < M; m++)
        for (int64_t g = 0; g < G; g++) {
            float s = dsv4_fp8q_group(x + m * K + g * cfg->group, cfg->group, cfg,
                                      y + m * K + g * cfg->group);
            /* transpose_scale: (m, g) at g*M + m (docs/semantics/quant.md Q3.1 "Out"). */
            scale[cfg->transpose_scale ? g * M + m : m * G + g] = s;
        }
    return DSV4_OK;
}

void dsv4_rmsnorm_row_ideal(const float *x, const float *w, int64_t n, double eps, double *y)
{
    double ss = 0;
    for (int64_t i = 0; i < n; i++)
        ss += (double)x[i] * x[i];
    double r = 1.0 / sqrt(ss / (double)n + eps);
    for (int64_t i = 0; i < n; i++)
        y[i] = (double)x[i] * r * (double)w[i];
}

void dsv4_rmsnorm_row_f32(const float *x, const float *w, int64_t n, float eps, float *y)
{
    float ss = 0; /* each thread sums sequentially, clang contracts to FMA (docs/semantics/quant.md Q3.3 step 2) */
    for (int64_t i = 0; i < n; i++)
        ss = fmaf(x[i], x[i], ss);
    float rcp = 1.0f / sqrtf(ss / (float)n + eps); /* rsqrtf (Q3.3 step 3) */
    for (int64_t i = 0; i < n; i++)
        y[i] = (x[i] * rcp) * w[i]; /* fl(fl(x * rcp) * w) (Q3.3 step 4) */
}
