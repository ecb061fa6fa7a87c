/* rng.h - the documented, portable input generator.
 *
 * SplitMix64 (Steele, Lea, Flood 2014): state += 0x9E3779B97F4A7C15; then
 *   z = state; z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9;
 *   z = (z ^ (z >> 27)) * 0x94D049BB133111EB; return z ^ (z >> 31).
 * Each tensor of a case draws from its own stream: the initial state is
 * seed XOR FNV-1a-64(stream name), so adding a tensor never shifts another's
 * values.  Only integer arithmetic and exact double operations are used, so
 * the same values come out of any C compiler, Python or a GPU.
 *
 * Test vectors (checked in tests/test_rng.c; README "Inputs and the RNG"):
 *   state 0: first outputs 0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F
 *   FNV-1a-64("") = 0xCBF29CE484222325, FNV-1a-64("a") = 0xAF63DC4C8601EC8C */
#ifndef DSV4_RNG_H
#define DSV4_RNG_H

#include <stdint.h>

typedef struct dsv4_rng {
    uint64_t state;
} dsv4_rng;

uint64_t dsv4_fnv1a64(const char *s);
void dsv4_rng_init(dsv4_rng *r, uint64_t seed, const char *stream);
uint64_t dsv4_rng_next(dsv4_rng *r);
/* [0, 1) with 53 random bits: (next >> 11) * 2^-53. */
double dsv4_rng_uniform(dsv4_rng *r);
/* Uniform integer in [lo, hi) (hi > lo), unbiased by rejection. */
int64_t dsv4_rng_range(dsv4_rng *r, int64_t lo, int64_t hi);
/* Approximately standard normal: the sum of 12 uniforms minus 6 (Irwin-Hall),
 * exact in double arithmetic, hence bit-reproducible everywhere (libm's
 * log/cos are not).  Support [-6, 6]. */
double dsv4_rng_normal(dsv4_rng *r);
/* Fisher-Yates shuffle of n int32 values. */
void dsv4_rng_shuffle_i32(dsv4_rng *r, int32_t *v, int64_t n);

#endif
