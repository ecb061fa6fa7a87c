/* test_rng.c - the generator's published test vectors (harness/rng.h). */
#include <math.h>

#include "../harness/rng.h"
#include "testutil.h"

START_TEST(splitmix_vectors)
{
    /* SplitMix64 from state 0 (Steele, Lea, Flood 2014), also in rng.h. */
    dsv4_rng r = {0};
    ck_assert_uint_eq(dsv4_rng_next(&r), 0xE220A8397B1DCDAFull);
    ck_assert_uint_eq(dsv4_rng_next(&r), 0x6E789E6AA1B965F4ull);
    ck_assert_uint_eq(dsv4_rng_next(&r), 0x06C45D188009454Full);
}
END_TEST

START_TEST(fnv_vectors)
{
    ck_assert_uint_eq(dsv4_fnv1a64(""), 0xCBF29CE484222325ull);
    ck_assert_uint_eq(dsv4_fnv1a64("a"), 0xAF63DC4C8601EC8Cull);
}
END_TEST

START_TEST(streams_are_independent)
{
    dsv4_rng a, b, a2;
    dsv4_rng_init(&a, 7, "q");
    dsv4_rng_init(&b, 7, "k");
    dsv4_rng_init(&a2, 7, "q");
    ck_assert_uint_ne(dsv4_rng_next(&a), dsv4_rng_next(&b));
    dsv4_rng_init(&a, 7, "q");
    ck_assert_uint_eq(dsv4_rng_next(&a), dsv4_rng_next(&a2));
}
END_TEST

START_TEST(range_and_uniform_bounds)
{
    dsv4_rng r;
    dsv4_rng_init(&r, 1, "x");
    int hits[5] = {0};
    for (int i = 0; i < 50000; i++) {
        int64_t v = dsv4_rng_range(&r, -2, 3);
        ck_assert(v >= -2 && v < 3);
        hits[v + 2]++;
        double u = dsv4_rng_uniform(&r);
        ck_assert(u >= 0.0 && u < 1.0);
    }
    for (int k = 0; k < 5; k++) /* each bucket near 10000: a gross bias would show */
        ck_assert_int_gt(hits[k], 9000);
}
END_TEST

START_TEST(normal_moments)
{
    dsv4_rng r;
    dsv4_rng_init(&r, 3, "n");
    double s = 0, s2 = 0;
    const int n = 200000;
    for (int i = 0; i < n; i++) {
        double x = dsv4_rng_normal(&r);
        ck_assert(x >= -6.0 && x <= 6.0);
        s += x;
        s2 += x * x;
    }
    ck_assert(fabs(s / n) < 0.01);
    ck_assert(fabs(s2 / n - 1.0) < 0.02);
}
END_TEST

DSV4_TEST_MAIN("rng", "core", 0, NULL, NULL, splitmix_vectors, fnv_vectors, streams_are_independent,
               range_and_uniform_bounds, normal_moments)
