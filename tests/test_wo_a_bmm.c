/* test_wo_a_bmm.c - the blocked rocm_mxfp8_wo_a_bmm reference against the
 * serial definition it replaced, bit for bit (docs/semantics/gemm.md A10.3):
 * per output, acc += P_kb * 2^(sa+sw-254) over the K/32 blocks in order,
 * P_kb the block's exact fp8 dot (and the same of |products| for the
 * gauge), on shapes that leave partial column, token and K chunks, at 1
 * and 3 threads, at every vector level the CPU has (the portable decode,
 * AVX2, and the fused kernels: AVX2 + FMA, AVX-512); at the extremes of
 * the exponent range (subnormal codes at scale 0, 448 at scale 254, -0);
 * and the NaN scan's first element at every level. */

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../ref/gemm.h"
#include "../ref/numerics.h"
#include "../ref/parallel.h"
#include "../ref/simd.h"
#include "testutil.h"

static const int levels[] = {DSV4_SIMD_PORTABLE, DSV4_SIMD_AVX2, DSV4_SIMD_AVX2_FMA, DSV4_SIMD_AVX512};
#define NLEVELS (int)(sizeof levels / sizeof levels[0])

static uint64_t lcg_state;

static uint32_t lcg(void)
{
    lcg_state = lcg_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(lcg_state >> 33);
}

/* Any e4m3fn code but the NaNs 0x7F / 0xFF (subnormals and -0 included). */
static uint8_t random_code(void)
{
    for (;;) {
        const uint8_t c = (uint8_t)lcg();
        if ((c & 0x7F) != 0x7F)
            return c;
    }
}

static void serial_bmm(const dsv4_wo_a_bmm_args *a, double *out, double *gauge)
{
    const int64_t T = a->T, G = a->G, R = a->R, K = a->K, KB = K / 32;
    for (int64_t t = 0; t < T; t++)
        for (int64_t g = 0; g < G; g++)
            for (int64_t r = 0; r < R; r++) {
                double acc = 0, acc_abs = 0;
                for (int64_t kb = 0; kb < KB; kb++) {
                    double p = 0, pa = 0;
                    for (int64_t k = kb * 32; k < kb * 32 + 32; k++) {
                        const double x = (double)dsv4_fp8_to_f32(a->a[(t * G + g) * K + k], DSV4_FP8_E4M3FN) *
                                         (double)dsv4_fp8_to_f32(a->w[(g * R + r) * K + k], DSV4_FP8_E4M3FN);
                        p += x;
                        pa += fabs(x);
                    }
                    const double sc = dsv4_e8m0_to_f64(a->a_scale[(t * G + g) * KB + kb]) *
                                      dsv4_e8m0_to_f64(a->w_scale[(g * R + r) * KB + kb]);
                    acc += p * sc;
                    acc_abs += pa * sc;
                }
                out[(t * G + g) * R + r] = acc;
                gauge[(t * G + g) * R + r] = acc_abs;
            }
}

typedef struct bmm_data {
    uint8_t *a, *as, *w, *ws;
    dsv4_wo_a_bmm_args args;
} bmm_data;

static bmm_data make_data(int64_t T, int64_t G, int64_t R, int64_t K, uint64_t seed)
{
    bmm_data d;
    lcg_state = seed;
    d.a = malloc((size_t)(T * G * K + 1));
    d.as = malloc((size_t)(T * G * K / 32 + 1));
    d.w = malloc((size_t)(G * R * K + 1));
    d.ws = malloc((size_t)(G * R * K / 32 + 1));
    ck_assert(d.a && d.as && d.w && d.ws);
    for (int64_t i = 0; i < T * G * K; i++)
        d.a[i] = random_code();
    for (int64_t i = 0; i < G * R * K; i++)
        d.w[i] = random_code();
    /* scales over the whole e8m0 range (but NaN), so that block sums of very
     * different size meet in one accumulator */
    for (int64_t i = 0; i < T * G * K / 32; i++)
        d.as[i] = (uint8_t)(lcg() % 255);
    for (int64_t i = 0; i < G * R * K / 32; i++)
        d.ws[i] = (uint8_t)(lcg() % 4 ? 100 + lcg() % 54 : lcg() % 255);
    d.args = (dsv4_wo_a_bmm_args){d.a, d.as, d.w, d.ws, T, G, R, K};
    return d;
}

static void free_data(bmm_data *d)
{
    free(d->a), free(d->as), free(d->w), free(d->ws);
}

START_TEST(blocked_matches_serial_bit_for_bit)
{
    /* T odd (a lone last token) and past one 64-token slice of the a
     * decode, R not a multiple of 4, 8 or 16, K past one 256-lane chunk and
     * not a multiple of it */
    static const int64_t shapes[][4] = {{1, 1, 1, 32}, {3, 2, 17, 96}, {9, 3, 33, 544}, {16, 2, 40, 1056},
                                        {21, 1, 7, 64}, {70, 1, 9, 64}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int64_t T = shapes[s][0], G = shapes[s][1], R = shapes[s][2], K = shapes[s][3], n = T * G * R;
        bmm_data d = make_data(T, G, R, K, 1000 + s);
        double *want = malloc((size_t)n * sizeof *want), *want_g = malloc((size_t)n * sizeof *want_g);
        double *got = malloc((size_t)n * sizeof *got), *got_g = malloc((size_t)n * sizeof *got_g);
        ck_assert(want && want_g && got && got_g);
        serial_bmm(&d.args, want, want_g);
        static const int threads[] = {1, 3};
        for (int li = 0; li < NLEVELS; li++)
            for (int ti = 0; ti < 2; ti++) {
                dsv4_simd_cap_level(levels[li]);
                dsv4_set_threads(threads[ti]);
                dsv4_status st = {0};
                ck_assert_int_eq(dsv4_ref_mxfp8_wo_a_bmm(&d.args, got, got_g, &st), 0);
                ck_assert_msg(!memcmp(got, want, (size_t)n * sizeof *got) &&
                                  !memcmp(got_g, want_g, (size_t)n * sizeof *got),
                              "shape %zu, level %d, %d threads: blocked sums differ from the serial ones", s,
                              levels[li], threads[ti]);
                memset(got, 0, (size_t)n * sizeof *got);
                ck_assert_int_eq(dsv4_ref_mxfp8_wo_a_bmm(&d.args, got, NULL, &st), 0);
                ck_assert_msg(!memcmp(got, want, (size_t)n * sizeof *got), "shape %zu, level %d: without the gauge", s,
                              levels[li]);
            }
        dsv4_simd_cap_level(DSV4_SIMD_AVX512);
        dsv4_set_threads(0);
        free(want), free(want_g), free(got), free(got_g);
        free_data(&d);
    }
}
END_TEST

/* Products at both ends of the range and signed zeros: the smallest
 * (subnormal codes 0x01 / 0x81 = +-2^-9 at scale byte 0, products 2^-272),
 * the largest (0x7E / 0xFE = +-448 at scale 254), zeros of both signs, in
 * blocks that meet in one accumulator (one block's sum below the other's
 * last bit), against the serial sums at every level. */
START_TEST(extreme_exponents_and_zeros_match_serial)
{
    static const uint8_t small_codes[] = {0x01, 0x81, 0x02, 0x07, 0x87, 0x00, 0x80};
    static const uint8_t big_codes[] = {0x7E, 0xFE, 0x7D, 0x00, 0x80};
    const int64_t T = 9, G = 2, R = 11, K = 192, KB = K / 32, n = T * G * R;
    bmm_data d = make_data(T, G, R, K, 77);
    for (int64_t i = 0; i < T * G * K; i++) { /* blocks alternate small and big codes */
        const int64_t kb = (i % K) / 32;
        d.a[i] = kb % 2 ? big_codes[lcg() % sizeof big_codes] : small_codes[lcg() % sizeof small_codes];
    }
    for (int64_t i = 0; i < G * R * K; i++) {
        const int64_t kb = (i % K) / 32;
        d.w[i] = kb % 2 ? big_codes[lcg() % sizeof big_codes] : small_codes[lcg() % sizeof small_codes];
    }
    for (int64_t i = 0; i < T * G * KB; i++)
        d.as[i] = (i % KB) % 2 ? 254 : (lcg() % 3 ? 0 : 127);
    for (int64_t i = 0; i < G * R * KB; i++)
        d.ws[i] = (i % KB) % 2 ? (lcg() % 3 ? 254 : 1) : 0;
    double *want = malloc((size_t)n * sizeof *want), *want_g = malloc((size_t)n * sizeof *want_g);
    double *got = malloc((size_t)n * sizeof *got), *got_g = malloc((size_t)n * sizeof *got_g);
    ck_assert(want && want_g && got && got_g);
    serial_bmm(&d.args, want, want_g);
    for (int li = 0; li < NLEVELS; li++) {
        dsv4_simd_cap_level(levels[li]);
        dsv4_status st = {0};
        ck_assert_int_eq(dsv4_ref_mxfp8_wo_a_bmm(&d.args, got, got_g, &st), 0);
        ck_assert_msg(!memcmp(got, want, (size_t)n * sizeof *got) && !memcmp(got_g, want_g, (size_t)n * sizeof *got),
                      "level %d: sums at the exponent extremes differ from the serial ones", levels[li]);
    }
    dsv4_simd_cap_level(DSV4_SIMD_AVX512);
    free(want), free(want_g), free(got), free(got_g);
    free_data(&d);
}
END_TEST

START_TEST(nan_scan_names_the_first_code)
{
    for (int li = 0; li < NLEVELS; li++) {
        dsv4_simd_cap_level(levels[li]);
        bmm_data d = make_data(2, 2, 5, 64, 7);
        double out[20], gauge[20];
        dsv4_status st = {0};
        d.w[301] = 0x7F, d.w[517] = 0xFF; /* the first NaN: flat 301 = row 4, lane 45 */
        ck_assert_int_eq(dsv4_ref_mxfp8_wo_a_bmm(&d.args, out, gauge, &st), DSV4_EINPUT);
        ck_assert_msg(strstr(st.msg, "wo_a[4, 45]") != NULL, "level %d: %s", levels[li], st.msg);
        d.a[203] = 0xFF; /* a is scanned first: flat 203 of [T, G*K = 128] */
        st = (dsv4_status){0};
        ck_assert_int_eq(dsv4_ref_mxfp8_wo_a_bmm(&d.args, out, NULL, &st), DSV4_EINPUT);
        ck_assert_msg(strstr(st.msg, "a[1, 75]") != NULL, "level %d: %s", levels[li], st.msg);
        d.a[203] = 0x01, d.w[301] = d.w[517] = 0x01; /* no NaN code: the scales' NaN bytes */
        d.ws[7] = 0xFF;
        st = (dsv4_status){0};
        ck_assert_int_eq(dsv4_ref_mxfp8_wo_a_bmm(&d.args, out, NULL, &st), DSV4_EINPUT);
        ck_assert_msg(strstr(st.msg, "wo_a scale flat element 7 ") != NULL, "level %d: %s", levels[li], st.msg);
        d.as[5] = 0xFF;
        st = (dsv4_status){0};
        ck_assert_int_eq(dsv4_ref_mxfp8_wo_a_bmm(&d.args, out, gauge, &st), DSV4_EINPUT);
        ck_assert_msg(strstr(st.msg, "a_scale flat element 5 ") != NULL, "level %d: %s", levels[li], st.msg);
        free_data(&d);
    }
    dsv4_simd_cap_level(DSV4_SIMD_AVX512);
}
END_TEST

DSV4_TEST_MAIN("wo_a_bmm", "core", 60, NULL, NULL, blocked_matches_serial_bit_for_bit,
                extreme_exponents_and_zeros_match_serial, nan_scan_names_the_first_code)
