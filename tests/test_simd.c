/* test_simd.c - the AVX2 and AVX-512 codec paths (ref/simd.h) against the
 * portable ones: every row entry point that has a vector path runs on the
 * same inputs with the portable paths forced, then at each vector level
 * the CPU has (AVX2, AVX-512), and the output bytes must be identical.
 * The inputs mix random values of many magnitudes with the special ones: NaN of both signs and several payloads, +-Inf, +-0,
 * subnormals, values past the formats' saturation, the e2m1 and e4m3
 * rounding midpoints, and whole blocks of zeros, NaN or Inf; the KV
 * cache insert also gets tiles whose scaled values underflow fp32.  The ideal
 * RMSNorm rows are checked against their serial definition. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../ref/attention.h"
#include "../ref/compressor.h"
#include "../ref/fp8quant.h"
#include "../ref/indexer.h"
#include "../ref/indices.h"
#include "../ref/kvcache.h"
#include "../ref/mx.h"
#include "../ref/numerics.h"
#include "../ref/simd.h"
#include "testutil.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint32_t next_u32(void)
{
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

static float bits_f32(uint32_t b)
{
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

/* One value: mostly random fp32 of exponents -140..+140 around 1, else a
 * special value. */
static float one_value(void)
{
    static const float mids[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 6.0f, 448.0f, 464.0f,
                                 240.0f, 248.0f, 0.0009765625f, 0.001953125f, 0.0029296875f};
    const uint32_t r = next_u32(), sign = (next_u32() & 1u) << 31;
    switch (r % 16) {
    case 0: return bits_f32(sign | 0x7F800000u);                                       /* +-Inf */
    case 1: return bits_f32(sign | 0x7F800000u | (1u + next_u32() % 0x7FFFFFu));       /* NaN, any payload */
    case 2: return bits_f32(sign);                                                     /* +-0 */
    case 3: return bits_f32(sign | (next_u32() & 0x7FFFFFu));                          /* subnormal */
    case 4: return bits_f32(sign | (uint32_t)(200 + next_u32() % 54) << 23 | (next_u32() & 0x7FFFFFu)); /* huge */
    case 5: return sign ? -mids[next_u32() % 15] : mids[next_u32() % 15];
    default: {
        const uint32_t e = 127 + (uint32_t)((int)(next_u32() % 25) - 12) * (r % 3 == 0 ? 10 : 1);
        return bits_f32(sign | (e & 0xFFu) << 23 | (next_u32() & 0x7FFFFFu));
    }
    }
}

/* n values; every eighth 32-block is whole zeros, NaN, Inf or small. */
static void fill(float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = one_value();
    for (int64_t b = 0; b + 32 <= n; b += 32 * 8) {
        const float v[] = {0.0f, NAN, INFINITY, 1e-30f};
        const float c = v[next_u32() % 4];
        for (int k = 0; k < 32; k++)
            x[b + k] = c;
    }
}

static void to_bf16(const float *x, int64_t n, uint16_t *h)
{
    for (int64_t i = 0; i < n; i++)
        h[i] = dsv4_bf16_from_f32(x[i]);
}

/* A finite copy: non-finite values become finite ones. */
static void make_finite(float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i]))
            x[i] = (float)(i % 7) - 3.0f;
}

/* Each 32-block's amax set to a value at or a few ulps beside a scale
 * rule's edge (448 2^e, 6 2^e, 2^e; e over the fp32 range, subnormals
 * included), the other lanes brought below it. */
static void near_scale_edges(float *x, int64_t n)
{
    static const float bases[] = {448.0f, 6.0f, 1.0f, 1.75f, 1.5f};
    for (int64_t b = 0; b + 32 <= n; b += 32) {
        const int e = (int)(next_u32() % 280) - 150;
        const float edge = ldexpf(bases[next_u32() % 5], e);
        uint32_t bits;
        memcpy(&bits, &edge, sizeof bits);
        bits = bits + (next_u32() % 7) - 3;
        const float amax = isfinite(bits_f32(bits)) ? bits_f32(bits) : edge;
        for (int k = 0; k < 32; k++)
            if (fabsf(x[b + k]) > amax)
                x[b + k] = x[b + k] < 0 ? -amax * 0.5f : amax * 0.5f;
        x[b + next_u32() % 32] = next_u32() & 1 ? -amax : amax;
    }
}

#define T_ROWS 37
#define W_COLS 512

typedef struct run_out {
    uint8_t a[T_ROWS * W_COLS * 2], b[T_ROWS * W_COLS];
    float f[T_ROWS * W_COLS];
    int rc;
} run_out;

static run_out out_portable, out_simd;

/* Runs CALL with the portable paths forced into out_portable, then at each
 * vector level above (AVX2 capped below AVX-512, then the default) into
 * out_simd, and compares each with the portable run. */
#define COMPARE_PATHS(what, CALL)                                                                       \
    do {                                                                                                \
        static const int caps[3] = {DSV4_SIMD_PORTABLE, DSV4_SIMD_AVX2_FMA, DSV4_SIMD_AVX512};          \
        for (int pass = 0; pass < 3; pass++) {                                                          \
            run_out *o = pass ? &out_simd : &out_portable;                                              \
            memset(o, 0xA5, sizeof *o);                                                                 \
            dsv4_simd_cap_level(caps[pass]);                                                            \
            dsv4_status st = {0};                                                                       \
            o->rc = (CALL);                                                                             \
            dsv4_simd_cap_level(DSV4_SIMD_AVX512);                                                      \
            if (!pass)                                                                                  \
                continue;                                                                               \
            ck_assert_msg(out_portable.rc == out_simd.rc, "%s, level %d: rc %d vs %d", what, caps[pass],   \
                          out_portable.rc, out_simd.rc);                                                \
            ck_assert_msg(memcmp(&out_portable, &out_simd, sizeof out_portable) == 0,                   \
                          "%s, level %d: outputs differ", what, caps[pass]);                            \
        }                                                                                               \
    } while (0)

START_TEST(avx2_path_is_on_where_supported)
{
    /* Without AVX2 (or under DSV4_SIMD=0) both passes below run the same
     * portable code and this test proves nothing: say so. */
    const char *env = getenv("DSV4_SIMD");
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && !(env && strcmp(env, "0") == 0))
        ck_assert_msg(dsv4_simd_avx2(), "AVX2 CPU but the AVX2 paths are off");
#endif
    dsv4_simd_force_portable(1);
    ck_assert(!dsv4_simd_avx2());
    dsv4_simd_force_portable(0);
    if (!dsv4_simd_avx2())
        fprintf(stderr, "test_simd: the AVX2 paths do not run here; the comparisons are trivial\n");
}
END_TEST

START_TEST(mx_rows_same_bytes)
{
    static float x[T_ROWS * W_COLS];
    static uint16_t h[T_ROWS * W_COLS];
    for (int trial = 0; trial < 6; trial++) {
        fill(x, T_ROWS * W_COLS);
        if (trial >= 2) /* finite blocks: the vector paths, not the NaN / Inf fallback */
            make_finite(x, T_ROWS * W_COLS);
        if (trial >= 4)
            near_scale_edges(x, T_ROWS * W_COLS);
        to_bf16(x, T_ROWS * W_COLS, h);
        for (int rule = 0; rule < DSV4_MX_RULE_COUNT; rule++) {
            if (dsv4_mx_rule_is_fp4((dsv4_mx_rule)rule)) {
                for (int elem = DSV4_MX_ELEM_RNE; elem <= DSV4_MX_ELEM_HALF_AWAY; elem++) {
                    COMPARE_PATHS("fp4 rows", dsv4_mx_quant_rows_fp4(x, T_ROWS, W_COLS, (dsv4_mx_rule)rule,
                                                                     (dsv4_mx_elem)elem, o->a, o->b, &st));
                    COMPARE_PATHS("fp4 bf16 rows", dsv4_mx_quant_rows_fp4_bf16(h, T_ROWS, W_COLS, (dsv4_mx_rule)rule,
                                                                               (dsv4_mx_elem)elem, o->a, o->b, &st));
                }
            } else {
                COMPARE_PATHS("fp8 rows", dsv4_mx_quant_rows_fp8(x, T_ROWS, W_COLS, (dsv4_mx_rule)rule, o->a, o->b, &st));
                COMPARE_PATHS("fp8 bf16 rows",
                              dsv4_mx_quant_rows_fp8_bf16(h, T_ROWS, W_COLS, (dsv4_mx_rule)rule, o->a, o->b, &st));
            }
        }
    }
}
END_TEST

START_TEST(fp8_group_rows_same_bytes)
{
    static float x[T_ROWS * W_COLS];
    static uint16_t h[T_ROWS * W_COLS];
    const int groups[] = {32, 64, 128, 256, 16};
    for (int trial = 0; trial < 3; trial++) {
        fill(x, T_ROWS * W_COLS);
        to_bf16(x, T_ROWS * W_COLS, h);
        for (int impl = 0; impl < 2; impl++)
            for (int kind = 0; kind < 2; kind++)
                for (int g = 0; g < 5; g++)
                    for (int tr = 0; tr < 2; tr++) {
                        dsv4_fp8q_cfg cfg = {(dsv4_fp8q_impl)impl, (dsv4_fp8_kind)kind,
                                             dsv4_fp8q_default_max((dsv4_fp8q_impl)impl, (dsv4_fp8_kind)kind),
                                             groups[g], tr};
                        COMPARE_PATHS("fp8 group rows", dsv4_fp8q_rows(x, T_ROWS, W_COLS, &cfg, o->a, o->f, &st));
                        COMPARE_PATHS("fp8 group bf16 rows",
                                      dsv4_fp8q_rows_bf16(h, T_ROWS, W_COLS, &cfg, o->a, o->f, &st));
                    }
    }
}
END_TEST

START_TEST(indexer_q_quant_same_bytes)
{
    enum { T = 5, H = 8, D = 128, POS = 7 };
    static float x[T * H * D], cs[POS * D], w[T * H];
    static uint16_t q[T * H * D];
    int64_t pos[T];
    for (int trial = 0; trial < 6; trial++) {
        fill(x, T * H * D);
        if (trial >= 4) /* finite blocks near the scale edges: the vector paths */
            make_finite(x, T * H * D), near_scale_edges(x, T * H * D);
        to_bf16(x, T * H * D, q);
        for (int i = 0; i < POS * D; i++) /* cos | sin rows, with a NaN and an Inf in the last trial */
            cs[i] = trial == 3 && i % 97 == 5 ? (i % 2 ? NAN : INFINITY) : (float)sin(0.37 * i + trial);
        for (int i = 0; i < T * H; i++)
            w[i] = one_value();
        for (int t = 0; t < T; t++)
            pos[t] = (t * 3 + trial) % POS;
        for (int rope_dim = 32; rope_dim <= 128; rope_dim *= 2)
            for (int quant = DSV4_IDX_QUANT_B; quant <= DSV4_IDX_QUANT_A; quant++) {
                dsv4_idx_qquant_args a = {q, pos, T, H, D, cs, POS, rope_dim, w, 0.0883883, 0.125,
                                          (dsv4_idx_quant)quant};
                COMPARE_PATHS("indexer q quant",
                              dsv4_ref_indexer_q_quant(&a, o->a, o->b, o->f, &st));
            }
    }
}
END_TEST

START_TEST(inverse_rope_mxfp8_same_bytes)
{
    enum { T = 6, H = 2, D = DSV4_HEAD_DIM, POS = 9 };
    static float x[T * H * D], cs[POS * D];
    static uint16_t o16[T * H * D];
    int64_t pos[T];
    const dsv4_mx_rule rules[] = {DSV4_MX_FP8_CEIL_F32LOG2, DSV4_MX_FP8_CEIL, DSV4_MX_FP8_FLOOR};
    for (int trial = 0; trial < 4; trial++) {
        fill(x, T * H * D);
        if (trial < 3) /* trial 3 keeps non-finite lanes: both paths must fail alike */
            make_finite(x, T * H * D);
        if (trial == 1) /* blocks at the scale edges */
            near_scale_edges(x, T * H * D);
        to_bf16(x, T * H * D, o16);
        if (trial < 3)
            for (int i = 0; i < T * H * D; i++) /* the bf16 rounding may overflow */
                if (!isfinite(dsv4_bf16_to_f32(o16[i])))
                    o16[i] = 0x3F80;
        for (int i = 0; i < POS * D; i++) /* trial 2: a NaN and an Inf in the table */
            cs[i] = trial == 2 && i % 89 == 7 ? (i % 2 ? NAN : INFINITY) : (float)cos(0.11 * i + trial);
        for (int t = 0; t < T; t++)
            pos[t] = (t * 5 + trial) % POS;
        for (int rope_dim = 8; rope_dim <= 64; rope_dim *= 2)
            for (int r = 0; r < 3; r++)
                COMPARE_PATHS("inverse rope mxfp8", dsv4_ref_inverse_rope_mxfp8_rows(o16, T, H, pos, cs, POS, rope_dim,
                                                                                     rules[r], o->a, o->b, &st));
    }
}
END_TEST

/* The ideal RMSNorm of fused_qk_rmsnorm_group_quant (rows side by side
 * in vectors, sixteen or eight at a time, the scaling four, eight or
 * sixteen lanes at a time: AVX2 and AVX-512) against its
 * serial definition (docs/semantics/quant.md Q3.3: the sum of squares in
 * double in order, y = x (1/sqrt(ss/n + eps)) w), in double and rounded
 * to fp32, on every path: row counts that leave partial batches of 16, 8
 * and 4, widths that leave partial vectors, values of many magnitudes. */
START_TEST(rmsnorm_rows_match_serial)
{
    enum { ROWS = 37, N = 517 };
    static float x[ROWS * N], w[N], yf[ROWS * N], want_f[ROWS * N];
    static double y[ROWS * N], want[ROWS * N];
    const int64_t widths[] = {N, 512, 8, 3};
    for (int trial = 0; trial < 3; trial++) {
        fill(x, ROWS * N);
        make_finite(x, ROWS * N);
        fill(w, N);
        make_finite(w, N);
        for (int wi = 0; wi < 4; wi++) {
            const int64_t n = widths[wi];
            const double eps = trial == 2 ? 1e-6 : 1e-30;
            for (int64_t r = 0; r < ROWS; r++) {
                double ss = 0;
                for (int64_t i = 0; i < n; i++)
                    ss += (double)x[r * n + i] * x[r * n + i];
                const double rc = 1.0 / sqrt(ss / (double)n + eps);
                for (int64_t i = 0; i < n; i++) {
                    want[r * n + i] = (double)x[r * n + i] * rc * (double)w[i];
                    want_f[r * n + i] = (float)want[r * n + i];
                }
            }
            for (int pass = 0; pass < 3; pass++) { /* portable, AVX2 at most, every level */
                dsv4_simd_cap_level(pass == 0 ? DSV4_SIMD_PORTABLE : pass == 1 ? DSV4_SIMD_AVX2_FMA : DSV4_SIMD_AVX512);
                for (int64_t rows = ROWS; rows >= 1; rows -= 12) {
                    memset(y, 0, sizeof y), memset(yf, 0, sizeof yf);
                    dsv4_rmsnorm_rows_ideal(x, w, rows, n, eps, y);
                    dsv4_rmsnorm_rows_ideal_f32(x, w, rows, n, eps, yf);
                    ck_assert_msg(!memcmp(y, want, (size_t)(rows * n) * sizeof *y) &&
                                      !memcmp(yf, want_f, (size_t)(rows * n) * sizeof *yf),
                                  "n %d, %d rows, %s path: not the serial values", (int)n, (int)rows,
                                  pass == 2 ? "default" : pass ? "AVX2" : "portable");
                }
            }
            dsv4_simd_cap_level(DSV4_SIMD_AVX512);
        }
    }
}
END_TEST

/* The ideal RMSNorm of bf16 rows (dsv4_rmsnorm_bf16_*: the shortcut sum
 * where it is proven exact, sumsq_rows elsewhere) against the serial
 * definition, at every level.  Row kinds: values within a few binades
 * (the shortcut holds), one 1.0 among 2^-27s (the serial sum absorbs
 * every tiny square, any other order does not: the screen must refuse
 * it), a subnormal among normal values, zeros, values of every magnitude,
 * one element 30 binades below the rest. */
static uint16_t bf16_kind(int kind, int64_t i)
{
    const uint32_t sign = (next_u32() & 1u) << 31, mant = next_u32() & 0x7FFFFFu;
    float v;
    switch (kind) {
    case 1: v = i == 0 ? 1.0f : bits_f32(sign | (127u - 27u) << 23); break;
    case 2: v = i == 5 ? bits_f32(sign | (mant & 0x7F0000u)) : bits_f32(sign | (123u + next_u32() % 8) << 23 | mant); break;
    case 3: v = 0.0f; break;
    case 4: v = one_value(), make_finite(&v, 1); break;
    case 5: v = bits_f32(sign | (i == 2 ? 93u : 123u + next_u32() % 8) << 23 | mant); break;
    default: v = bits_f32(sign | (123u + next_u32() % 8) << 23 | mant); break;
    }
    uint32_t b;
    memcpy(&b, &v, sizeof b);
    return (uint16_t)(b >> 16); /* truncated: a finite float stays finite */
}

START_TEST(rmsnorm_bf16_rows_match_serial)
{
    enum { ROWS = 40, N = 1536 };
    static uint16_t x[ROWS * N];
    static double w[N], rcp[ROWS], want_rcp[ROWS], y[N], want[N];
    static float xf[ROWS * N], wf[N], scratch[16 * N], yf[N], want_f[N];
    const int64_t widths[] = {N, 517, 512, 31, 3};
    for (int wi = 0; wi < 5; wi++) {
        const int64_t n = widths[wi];
        for (int64_t r = 0; r < ROWS; r++)
            for (int64_t i = 0; i < n; i++)
                x[r * n + i] = bf16_kind((int)(r % 6), i);
        for (int64_t i = 0; i < n; i++)
            wf[i] = bits_f32((uint32_t)bf16_kind(0, i) << 16), w[i] = wf[i];
        for (int64_t i = 0; i < ROWS * n; i++)
            xf[i] = bits_f32((uint32_t)x[i] << 16);
        for (int64_t r = 0; r < ROWS; r++) {
            double ss = 0, pair[2] = {0, 0};
            for (int64_t i = 0; i < n; i++)
                ss += (double)xf[r * n + i] * xf[r * n + i], pair[i & 1] += (double)xf[r * n + i] * xf[r * n + i];
            want_rcp[r] = 1.0 / sqrt(ss / (double)n + 1e-6);
            if (r % 6 == 1 && n == N) /* the kind the screen must refuse: another order is another sum */
                ck_assert_msg(pair[0] + pair[1] != ss, "row %d: the order-sensitive row is not", (int)r);
        }
        for (int pass = 0; pass < 3; pass++) { /* portable, AVX2 at most, every level */
            dsv4_simd_cap_level(pass == 0 ? DSV4_SIMD_PORTABLE : pass == 1 ? DSV4_SIMD_AVX2_FMA : DSV4_SIMD_AVX512);
            for (int64_t rows = ROWS; rows >= 1; rows -= 13) {
                memset(rcp, 0, sizeof rcp);
                dsv4_rmsnorm_bf16_rcp(x, rows, n, 1e-6, rcp, scratch);
                for (int64_t r = 0; r < rows; r++) {
                    ck_assert_msg(!memcmp(&rcp[r], &want_rcp[r], sizeof rcp[r]), "n %d, %d rows, pass %d: row %d "
                                  "(kind %d) rcp %a, serial %a", (int)n, (int)rows, pass, (int)r, (int)(r % 6), rcp[r],
                                  want_rcp[r]);
                    dsv4_rmsnorm_bf16_row(x + r * n, w, rcp[r], n, y);
                    dsv4_rmsnorm_bf16_row_f32(x + r * n, w, rcp[r], n, yf);
                    dsv4_rmsnorm_rows_ideal(xf + r * n, wf, 1, n, 1e-6, want); /* the fp32 rows' ideal */
                    for (int64_t i = 0; i < n; i++)
                        want_f[i] = (float)((double)xf[r * n + i] * want_rcp[r] * w[i]);
                    ck_assert_msg(!memcmp(y, want, (size_t)n * sizeof *y) && !memcmp(yf, want_f, (size_t)n * sizeof *yf),
                                  "n %d, pass %d, row %d: y not the serial values", (int)n, pass, (int)r);
                }
            }
        }
        dsv4_simd_cap_level(DSV4_SIMD_AVX512);
    }
}
END_TEST

/* The fused insert's bf16 q rows (dsv4_ref_qnorm_rope_bf16): the AVX-512
 * rows (sixteen heads side by side, head counts that leave a partial
 * group), as bf16 and as doubles, against the portable ones, values of
 * many magnitudes, a token
 * with a zero head (r = 1/sqrt(eps)), a NaN and an Inf in the cos/sin
 * table (trial 2), non-finite q lanes (trial 3: both fail alike). */
START_TEST(qnorm_rope_bf16_same_bytes)
{
    enum { POS = 5, N = 2 * 18 * DSV4_HEAD_DIM };
    static float x[N], cs[POS * DSV4_ROPE_DIM];
    static uint16_t q[N];
    int64_t pos[4];
    const int64_t shapes[2][2] = {{4, 9}, {2, 18}};
    for (int trial = 0; trial < 4; trial++) {
        fill(x, N);
        if (trial < 3)
            make_finite(x, N);
        to_bf16(x, N, q);
        if (trial < 3)
            for (int i = 0; i < N; i++)
                if (!isfinite(dsv4_bf16_to_f32(q[i])))
                    q[i] = 0xBF80;
        for (int i = 0; i < DSV4_HEAD_DIM; i++) /* a zero head */
            q[DSV4_HEAD_DIM + i] = 0;
        for (int i = 0; i < POS * DSV4_ROPE_DIM; i++)
            cs[i] = trial == 2 && i % 67 == 3 ? (i % 2 ? NAN : INFINITY) : (float)cos(0.23 * i + trial);
        for (int t = 0; t < 4; t++)
            pos[t] = (t * 2 + trial) % POS;
        for (int sh = 0; sh < 2; sh++) {
            dsv4_qnorm_insert_args a = {0};
            a.q = q, a.T = shapes[sh][0], a.H = shapes[sh][1], a.positions = pos, a.cos_sin_cache = cs;
            a.num_pos = POS, a.eps = trial == 1 ? 0.0 : 1e-6;
            COMPARE_PATHS("qnorm rope bf16", dsv4_ref_qnorm_rope_bf16(&a, (uint16_t *)(void *)o->a, &st));
            /* the double rows (the golden dtype), each level against the portable ones */
            static double want[N], got[N];
            static const int caps[2] = {DSV4_SIMD_AVX2_FMA, DSV4_SIMD_AVX512};
            dsv4_status st = {0};
            memset(want, 0, sizeof want);
            dsv4_simd_force_portable(1);
            const int rc_want = dsv4_ref_qnorm_rope(&a, want, NULL, &st);
            dsv4_simd_force_portable(0);
            for (int c = 0; c < 2; c++) {
                memset(got, 0, sizeof got);
                dsv4_simd_cap_level(caps[c]);
                const int rc_got = dsv4_ref_qnorm_rope(&a, got, NULL, &st);
                dsv4_simd_cap_level(DSV4_SIMD_AVX512);
                ck_assert_msg(rc_got == rc_want && !memcmp(want, got, sizeof want), "qnorm rope f64, level %d: differ",
                              caps[c]);
            }
        }
    }
}
END_TEST


/* Each 64-lane KV tile set to e4m3 rounding midpoints (between two codes
 * of either kind, subnormal ones included) times 2^e, one lane at
 * +-224 2^e so that the tile's scale exponent is e (OCP: e - 1, which
 * maps midpoints onto midpoints). */
static void kv_midpoint_tiles(float *x, int64_t n)
{
    for (int64_t b = 0; b + DSV4_KV_QBLOCK <= n; b += DSV4_KV_QBLOCK) {
        const int e = (int)(next_u32() % 160) - 60;
        const dsv4_fp8_kind kind = next_u32() & 1 ? DSV4_FP8_E4M3FNUZ : DSV4_FP8_E4M3FN;
        for (int i = 0; i < DSV4_KV_QBLOCK; i++) {
            const uint8_t c = (uint8_t)(next_u32() % 0x7D);
            const float mid = 0.5f * (dsv4_fp8_to_f32(c, kind) + dsv4_fp8_to_f32((uint8_t)(c + 1), kind));
            x[b + i] = ldexpf(next_u32() & 1 ? -mid : mid, e);
        }
        x[b + next_u32() % DSV4_KV_QBLOCK] = ldexpf(next_u32() & 1 ? -224.0f : 224.0f, e);
    }
}

/* Tiles whose amax is huge and whose other lanes are tiny (bf16
 * subnormals among them): x * 2^-e underflows fp32 and rounds there.
 * Every fifth tile holds only subnormals and +-0 (the 1e-4 amax floor;
 * codes +-0), every tenth only +0. */
static void kv_underflow_tiles(float *x, int64_t n)
{
    for (int64_t b = 0, tile = 0; b + DSV4_KV_QBLOCK <= n; b += DSV4_KV_QBLOCK, tile++) {
        const float amax = ldexpf(1.0f + (float)(next_u32() % 128) / 128.0f, 60 + (int)(next_u32() % 67));
        for (int i = 0; i < DSV4_KV_QBLOCK; i++) {
            const uint32_t sign = (next_u32() & 1u) << 31, sub = next_u32() % 4 ? next_u32() & 0x7FFFFFu : 0;
            const uint32_t tiny = next_u32() % 3 ? next_u32() & 0x7FFFFFu
                                                 : (uint32_t)(1 + next_u32() % 40) << 23 | (next_u32() & 0x7FFFFFu);
            x[b + i] = tile % 10 == 0 ? 0.0f : bits_f32(sign | (tile % 5 == 0 ? sub : tiny));
        }
        if (tile % 5)
            x[b + next_u32() % DSV4_KV_QBLOCK] = next_u32() & 1 ? -amax : amax;
    }
}

/* The fp8_ds_mla cache insert (dsv4_ref_quantize_and_insert_k_cache): the
 * AVX2 and AVX-512 token encodes against the portable one, on tokens of
 * random values of many magnitudes, tiles at the scale edges, at e4m3
 * rounding midpoints, underflowing tiles, zero tiles; OCP and FNUZ, the
 * 255 and 254 scale caps, three FP8MAX, int64 and int32 slots with skipped (-1) ones, a
 * mapping that writes slots twice (the serial order), a non-finite lane in
 * a skipped token (ignored), and tokens with NaN or Inf (both fail, the
 * cache untouched). */
/* The KV gather's decode (dsv4_ref_dequantize_and_gather_k_cache): the
 * AVX-512 rows (codes decoded without the table) against the portable
 * ones, e4m3fn and fnuz, on pages of random bytes where every code sits
 * beside every scale byte class: 0 (the subnormal 2^-127), 1, 127, 254,
 * 255 (+Inf: 0 x Inf is NaN) and random ones; the NaN codes take the
 * table in both. */
START_TEST(kv_gather_same_bytes)
{
    enum { B = 8, NB = 40, R = 2, S = B * NB / R, D = DSV4_KV_HEAD_DIM };
    static uint8_t cache[NB * B * DSV4_KV_TOKEN_BYTES];
    static uint16_t out_p[R * S * D], out_v[R * S * D];
    static const uint8_t scale_bytes[] = {0, 1, 127, 254, 255};
    int32_t seq[R] = {S, S - 5}, table[R * NB / R];
    for (int i = 0; i < NB; i++)
        table[i] = NB - 1 - i; /* request r's block b at table[r * NB / R + b] */
    const dsv4_kv_layout L = {B, NB, 0};
    for (int trial = 0; trial < 4; trial++) {
        for (size_t i = 0; i < sizeof cache; i++)
            cache[i] = (uint8_t)next_u32();
        for (int p = 0; p < NB; p++)
            for (int row = 0; row < B; row++) {
                uint8_t *page = cache + (size_t)p * B * DSV4_KV_TOKEN_BYTES;
                for (int d = 0; d < DSV4_KV_NOPE_DIM; d++) /* every code, in every block position */
                    page[dsv4_kv_value_offset(row) + d] = (uint8_t)(d + 7 * (p * B + row) + 31 * trial);
                for (int k = 0; k < DSV4_KV_NQBLOCKS; k++)
                    if ((p + row + k) % 2)
                        page[dsv4_kv_scale_offset(B, row) + k] = scale_bytes[(p + row + k) % 5];
            }
        for (int fnuz = 0; fnuz < 2; fnuz++) {
            dsv4_gather_args a = {out_p, R, S, cache, L, seq, NULL, table, NB / R, 0, fnuz};
            dsv4_status st = {0};
            memset(out_p, 0xA5, sizeof out_p), memset(out_v, 0xA5, sizeof out_v);
            dsv4_simd_cap_level(DSV4_SIMD_PORTABLE);
            ck_assert_int_eq(dsv4_ref_dequantize_and_gather_k_cache(&a, DSV4_GATHER_INVALID_ERROR, &st), DSV4_OK);
            dsv4_simd_cap_level(DSV4_SIMD_AVX512);
            a.out = out_v;
            ck_assert_int_eq(dsv4_ref_dequantize_and_gather_k_cache(&a, DSV4_GATHER_INVALID_ERROR, &st), DSV4_OK);
            for (int i = 0; i < R * S * D; i++)
                ck_assert_msg(out_p[i] == out_v[i], "trial %d, %s: row %d dim %d: %04x vs %04x", trial,
                              fnuz ? "fnuz" : "fn", i / D, i % D, out_p[i], out_v[i]);
        }
    }
}
END_TEST

/* The prefill top-k rows (dsv4_ref_build_prefill_topk_ragged_indices): the
 * AVX-512 rows against the portable ones, both variants, pages of 16
 * (the vector path) and 12 (scalar in both), entries below 0, past
 * num_compressed and in range, rows capped by topk_width and by position
 * (tails of every length), num_rows off, small and past INT32_MAX, and a
 * block table one column short, so that the last page alone is missing (the
 * same error, the same message). */
START_TEST(prefill_topk_same_bytes)
{
    enum { R = 2, QL = 40, T = R * QL, W = 160, NC = 200, COLS = 20 };
    static int32_t topk[T * W], flat[2][T * W], indptr[2][T + 1];
    int32_t t2r[T], qsl[R + 1] = {0, QL, 2 * QL}, seq[R] = {600, 700}, bt[R * COLS];
    uint8_t valid[T];
    const int64_t nrows_of[] = {-1, 300, (int64_t)1 << 40};
    for (int t = 0; t < T; t++)
        t2r[t] = t / QL, valid[t] = t % 13 != 5;
    for (int trial = 0; trial < 12; trial++) {
        for (int i = 0; i < T * W; i++)
            topk[i] = (int32_t)(next_u32() % (NC + 14)) - 3;
        for (int i = 0; i < R * COLS; i++)
            bt[i] = (int32_t)(next_u32() % 50);
        const int64_t bs = trial % 2 ? 12 : 16, cols = trial % 4 >= 2 ? (NC - 1) / bs : COLS;
        dsv4_pftopk_args a = {topk, T, W, t2r, valid, T, qsl, seq, R, bt, R, cols, bs, 4, NC, 0,
                              nrows_of[trial % 3]};
        for (int v = 0; v < 2; v++) {
            dsv4_status st[2] = {{0}, {0}};
            int rc[2];
            memset(flat, 0x5A, sizeof flat), memset(indptr, 0x5A, sizeof indptr);
            for (int pass = 0; pass < 2; pass++) {
                dsv4_simd_cap_level(pass ? DSV4_SIMD_AVX512 : DSV4_SIMD_PORTABLE);
                rc[pass] = dsv4_ref_build_prefill_topk_ragged_indices(&a, (dsv4_pftopk_variant)v, flat[pass],
                                                                      indptr[pass], &st[pass]);
            }
            dsv4_simd_cap_level(DSV4_SIMD_AVX512);
            ck_assert_msg(rc[0] == rc[1] && !strcmp(st[0].msg, st[1].msg), "trial %d: rc %d '%s' vs %d '%s'", trial,
                          rc[0], st[0].msg, rc[1], st[1].msg);
            ck_assert_msg(!memcmp(flat[0], flat[1], sizeof flat[0]) && !memcmp(indptr[0], indptr[1], sizeof indptr[0]),
                          "trial %d, variant %d: outputs differ", trial, v);
            if (trial % 4 >= 2)
                ck_assert_msg(rc[0] == DSV4_EINPUT, "trial %d: the short block table went unnoticed", trial);
        }
    }
}
END_TEST

START_TEST(kv_insert_same_bytes)
{
    enum { B = 16, NB = 4, T = 60, D = DSV4_KV_HEAD_DIM };
    static float x[T * D];
    static uint16_t k[T * D];
    int64_t s64[T];
    int32_t s32[T];
    ck_assert((size_t)NB * B * DSV4_KV_TOKEN_BYTES <= sizeof out_portable.a);
    const dsv4_kv_layout L = {B, NB, 0};
    for (int trial = 0; trial < 8; trial++) {
        fill(x, T * D);
        if (trial < 7) /* trial 7: NaN / Inf lanes in written tokens */
            make_finite(x, T * D);
        if (trial == 1)
            near_scale_edges(x, T * D);
        if (trial == 2 || trial == 5)
            kv_midpoint_tiles(x, T * D);
        if (trial == 3 || trial == 6)
            kv_underflow_tiles(x, T * D);
        to_bf16(x, T * D, k);
        if (trial < 7)
            for (int i = 0; i < T * D; i++) /* the bf16 rounding may overflow */
                if ((k[i] & 0x7F80u) == 0x7F80u)
                    k[i] = 0xBF80;
        int perm[NB * B];
        for (int i = 0; i < NB * B; i++)
            perm[i] = i;
        for (int i = NB * B - 1; i > 0; i--) {
            const int r = (int)(next_u32() % (uint32_t)(i + 1)), tmp = perm[i];
            perm[i] = perm[r], perm[r] = tmp;
        }
        for (int t = 0; t < T; t++) {
            s64[t] = t % 7 == 3 ? -1 : trial == 4 ? perm[t % 20] : perm[t];
            s32[t] = (int32_t)s64[t];
        }
        if (trial == 6) /* a skipped token may hold anything */
            k[3 * D + 5] = 0x7FC1, k[10 * D + 500] = 0xFF80;
        /* FP8MAX as the kernel's, and two that other callers could pass: a
         * small normal one whose scale bytes clamp at the cap for huge tiles
         * (then q passes +-FP8MAX and is clamped), a subnormal one (the
         * one-tile-at-a-time scale rule) */
        static const float maxes[3] = {0, 0.0234375f, 1e-40f};
        for (int fnuz = 0; fnuz < 2; fnuz++)
            for (int cap = 255; cap >= 254; cap--)
                for (int i32 = 0; i32 < 2; i32++)
                    for (int mi = 0; mi < 3; mi++) {
                        dsv4_kv_encode_opts opts = dsv4_kv_encode_opts_default(fnuz);
                        opts.scale_max = cap;
                        if (mi)
                            opts.fp8_max = maxes[mi];
                        COMPARE_PATHS("kv insert", dsv4_ref_quantize_and_insert_k_cache(k, T, i32 ? NULL : s64,
                                                                                        i32 ? s32 : NULL, o->a, &L,
                                                                                        &opts, &st));
                        ck_assert_msg((out_portable.rc == DSV4_OK) == (trial < 7), "trial %d: rc %d", trial,
                                      out_portable.rc);
                    }
    }
}
END_TEST

/* The ideal logits on integer dots (AVX-512 VNNI) against the scalar
 * ideal: heads that do and do not fill the 4-head steps, pages of 16, 64
 * and 24 entries (groups of 16 keys inside one page, and across two),
 * natural and shuffled pages, requests of 1, 2 and more rows than a row
 * block (keys decoded per request), row ends inside key groups, zero,
 * extreme and NaN (0xFF) scales, every e2m1 code, NaN, zero and negative
 * weights.  Every logit, the -inf past the ends included, has the same bits. */
enum { MQA_MAX_ROWS = 520, MQA_MAX_ROW_HEADS = 1024, MQA_WIDTH = 400 };
static double logits_portable[MQA_MAX_ROWS * MQA_WIDTH], logits_simd[MQA_MAX_ROWS * MQA_WIDTH];

START_TEST(mqa_logits_same_bits)
{
    enum { D = 128, B = 3, WIDTH = MQA_WIDTH, MAX_ROWS = MQA_MAX_ROWS };
    static const int heads[4] = {1, 5, 32, 64};
    static const int64_t page_sizes[3] = {16, 64, 24};
    static uint8_t q[MQA_MAX_ROW_HEADS * 64], qs[MQA_MAX_ROW_HEADS * 4], cache[80 * 64 * 72];
    static float w[MQA_MAX_ROW_HEADS];
    for (int trial = 0; trial < 24; trial++) {
        const int H = heads[trial % 4], shuffled = trial / 4 % 2;
        const int64_t P = page_sizes[trial / 8];
        dsv4_idx_layout L;
        dsv4_status st = {0};
        if (dsv4_idx_layout_make(H, D, P, shuffled, &L, &st) != DSV4_OK)
            continue; /* shuffled pages need page_entries % n_per_tile == 0 */
        const int32_t qlen[B] = {1, 2, 512 / H + 3}; /* the last: more rows than a row block */
        int32_t qsl[B + 1] = {0}, ctx[B], ends[MAX_ROWS];
        for (int b = 0; b < B; b++)
            qsl[b + 1] = qsl[b] + qlen[b];
        const int rows = qsl[B];
        ck_assert(rows <= MAX_ROWS && rows * H <= MQA_MAX_ROW_HEADS);
        const int64_t max_blocks = (WIDTH + P - 1) / P, num_pages = 80;
        int32_t bt[B * 26];
        for (int i = 0; i < B * max_blocks; i++)
            bt[i] = (int32_t)(next_u32() % num_pages);
        for (int b = 0; b < B; b++) {
            ctx[b] = trial % 5 == 2 && b == 1 ? 0 : (int32_t)(40 + next_u32() % (WIDTH - 40));
            for (int r = qsl[b]; r < qsl[b + 1]; r++)
                ends[r] = (int32_t)(next_u32() % (WIDTH + 1));
        }
        for (size_t i = 0; i < sizeof cache; i++)
            cache[i] = (uint8_t)next_u32();
        for (int i = 0; i < rows * H * 64; i++)
            q[i] = (uint8_t)next_u32();
        /* scales near 127 (the exact fp32 path of the scalar ideal), far
         * apart (its double fallback), at the ends, and NaN */
        for (int i = 0; i < rows * H * 4; i++) {
            const uint32_t u = next_u32() % 64;
            qs[i] = (uint8_t)(u < 50 ? 124 + u % 7 : u < 58 ? next_u32() % 255 : u < 62 ? (u & 1) * 254 : 255);
        }
        const int64_t pb = dsv4_idx_page_bytes(&L);
        for (int64_t pg = 0; pg < num_pages; pg++)
            for (int64_t e = 0; e < P; e++) {
                uint8_t v[64], sc[4];
                for (int i = 0; i < 64; i++)
                    v[i] = (uint8_t)next_u32();
                for (int i = 0; i < 4; i++) {
                    const uint32_t u = next_u32() % 64;
                    sc[i] = (uint8_t)(u < 52 ? 125 + u % 5 : u < 60 ? next_u32() % 255 : u < 63 ? 0 : 255);
                }
                dsv4_idx_write_entry(&L, cache + pg * pb, e, v, sc);
            }
        for (int i = 0; i < rows * H; i++) {
            const uint32_t u = next_u32() % 32;
            w[i] = u == 0 ? NAN : u == 1 ? 0.0f : ((float)(int)(next_u32() % 2001) - 1000.0f) / 257.0f;
        }
        const dsv4_idx_logits_args a = {q, qs, w, rows, H, D, cache, num_pages, &L, bt, max_blocks,
                                        ctx, qsl, B, ends, WIDTH};
        dsv4_simd_cap_level(DSV4_SIMD_PORTABLE);
        int rc = dsv4_ref_mqa_logits(&a, DSV4_IDX_IDEAL, logits_portable, NULL, &st);
        dsv4_simd_cap_level(DSV4_SIMD_AVX512);
        ck_assert_msg(rc == DSV4_OK, "trial %d: %s", trial, st.msg);
        ck_assert_int_eq(dsv4_ref_mqa_logits(&a, DSV4_IDX_IDEAL, logits_simd, NULL, &st), DSV4_OK);
        for (int i = 0; i < rows * WIDTH; i++)
            ck_assert_msg(memcmp(&logits_portable[i], &logits_simd[i], sizeof(double)) == 0,
                          "trial %d (H %d, P %d, shuffled %d): logit [%d, %d] %a vs %a", trial, H, (int)P, shuffled,
                          i / WIDTH, i % WIDTH, logits_portable[i], logits_simd[i]);
    }
}
END_TEST

DSV4_TEST_MAIN("simd", "core", 120, NULL, NULL, avx2_path_is_on_where_supported, mx_rows_same_bytes,
               fp8_group_rows_same_bytes, indexer_q_quant_same_bytes, inverse_rope_mxfp8_same_bytes,
               rmsnorm_rows_match_serial, rmsnorm_bf16_rows_match_serial, qnorm_rope_bf16_same_bytes,
               kv_insert_same_bytes, kv_gather_same_bytes, prefill_topk_same_bytes, mqa_logits_same_bits)
