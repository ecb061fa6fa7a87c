/* mx.c - MXFP4 / MXFP8 scale rules and quantizers; see mx.h.  Semantics:
 * docs/semantics/quant.md Q1, Q2 (and the pages named beside a rule). */
#include "mx.h"

#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "mx_block.h"

float dsv4_log2_f32(float x)
{
    /* Correctly rounded except within one double ulp of an fp32 tie: log2 of
     * an fp32 value is never that close to a tie near a power of two, where
     * the ceil/floor rules are sensitive (mx.h). */
    return (float)log2((double)x);
}

float dsv4_mx_amax(const float *x, int n)
{
    if (n == DSV4_MX_BLOCK)
        return amax_block(x);
    float m = 0.0f;
    int seen = 0;
    for (int i = 0; i < n; i++) {
        float a = fabsf(x[i]);
        if (isnan(a)) /* tl.max ignores NaN unless all are NaN (docs/semantics/quant.md Q1.1, inferred) */
            continue;
        seen = 1;
        if (a > m)
            m = a;
    }
    return seen || n == 0 ? m : NAN;
}

/* ceil(dsv4_log2_f32(r)) for a normal fp32 r = 2^k (1 + f) is k when the
 * fp32 rounding of log2 r lands on k (f = 0 or f tiny), else k + 1; the
 * rounding is monotone in r, so one mantissa threshold per exponent decides
 * it.  The thresholds are found with dsv4_log2_f32 itself (a binary search
 * per exponent, once), so the table reproduces the function bit for bit;
 * subnormal r takes the function. */
static pthread_once_t ceil_log2_once = PTHREAD_ONCE_INIT;
uint32_t dsv4_mx_ceil_log2_thr[256];

static void ceil_log2_init(void)
{
    for (uint32_t E = 1; E < 255; E++) {
        const float k = (float)((int)E - 127);
        uint32_t lo = 0, hi = 0x7FFFFFu; /* ceil gives k at lo; hi gives k + 1 */
        if (ceilf(dsv4_log2_f32(dsv4_f32_of_bits(E << 23))) != k) {
            dsv4_mx_ceil_log2_thr[E] = 0;
            continue;
        }
        while (hi - lo > 1) {
            const uint32_t mid = lo + (hi - lo) / 2;
            if (ceilf(dsv4_log2_f32(dsv4_f32_of_bits(E << 23 | mid))) == k)
                lo = mid;
            else
                hi = mid;
        }
        dsv4_mx_ceil_log2_thr[E] = hi;
    }
}

uint8_t dsv4_mx_scale_byte(dsv4_mx_rule rule, float amax)
{
    pthread_once(&ceil_log2_once, ceil_log2_init);
    return scale_byte(rule, amax);
}

/* The per-rule entry points: one dispatcher behind them all, so the table
 * set-up (pthread_once) stands in one place. */
uint8_t dsv4_mx_fp4_scale_ceil_f32log2(float amax) { return dsv4_mx_scale_byte(DSV4_MX_FP4_CEIL_F32LOG2, amax); }
uint8_t dsv4_mx_fp4_scale_ceil(float amax) { return dsv4_mx_scale_byte(DSV4_MX_FP4_CEIL, amax); }
uint8_t dsv4_mx_fp4_scale_even(float amax) { return dsv4_mx_scale_byte(DSV4_MX_FP4_EVEN, amax); }
uint8_t dsv4_mx_fp4_scale_ocp(float amax) { return dsv4_mx_scale_byte(DSV4_MX_FP4_OCP, amax); }
uint8_t dsv4_mx_fp8_scale_ceil(float amax) { return dsv4_mx_scale_byte(DSV4_MX_FP8_CEIL, amax); }
uint8_t dsv4_mx_fp8_scale_ceil_f32log2(float amax) { return dsv4_mx_scale_byte(DSV4_MX_FP8_CEIL_F32LOG2, amax); }
uint8_t dsv4_mx_fp8_scale_floor(float amax) { return dsv4_mx_scale_byte(DSV4_MX_FP8_FLOOR, amax); }

int dsv4_mx_rule_is_fp4(dsv4_mx_rule rule) { return rule <= DSV4_MX_FP4_OCP; }

uint8_t dsv4_mx_e2m1_encode(float q, dsv4_mx_elem elem) { return e2m1_encode(q, elem); }

uint8_t dsv4_mx_quant_block_fp4(const float *x, int n, dsv4_mx_rule rule, dsv4_mx_elem elem,
                                uint8_t *codes)
{
    pthread_once(&ceil_log2_once, ceil_log2_init);
    return quant_block_fp4(x, n, rule, elem, codes);
}

uint8_t dsv4_mx_quant_block_fp8(const float *x, int n, dsv4_mx_rule rule, uint8_t *codes)
{
    pthread_once(&ceil_log2_once, ceil_log2_init);
    return quant_block_fp8(x, n, rule, codes);
}

void dsv4_mx_prepare(void) { pthread_once(&ceil_log2_once, ceil_log2_init); }

void dsv4_mx_dequant_rows_fp4(const uint8_t *packed, const uint8_t *scales, int64_t T,
                              int64_t W, double *out)
{
    const int64_t nb = W / DSV4_MX_BLOCK;
    for (int64_t t = 0; t < T; t++)
        for (int64_t i = 0; i < W; i++) {
            uint8_t byte = packed[t * (W / 2) + i / 2];
            uint8_t code = (i & 1) ? dsv4_e2m1_hi(byte) : dsv4_e2m1_lo(byte);
            out[t * W + i] = (double)dsv4_e2m1_to_f32(code) *
                             dsv4_e8m0_to_f64(scales[t * nb + i / DSV4_MX_BLOCK]);
        }
}

void dsv4_mx_shuffled_scale_shape(int64_t M, int64_t N, int64_t *rows, int64_t *cols)
{
    int64_t sn = (N + DSV4_MX_BLOCK - 1) / DSV4_MX_BLOCK;
    *rows = (M + 255) / 256 * 256;
    *cols = (sn + 7) / 8 * 8;
}

int64_t dsv4_mx_scale_shuffle_idx(int64_t x, int64_t y, int64_t scaleN_pad)
{
    /* aiter fp4_utils.dynamic_mxfp4_quant(shuffle=True) (docs/semantics/quant.md Q1.3). */
    return (x / 32) * 32 * scaleN_pad + (y / 8) * 256 + (y % 4) * 64 + (x % 16) * 4 +
           ((y % 8) / 4) * 2 + (x % 32) / 16;
}
