#include "rng.h"

uint64_t dsv4_fnv1a64(const char *s)
{
    uint64_t h = 0xCBF29CE484222325ull;
    for (; *s; s++) {
        h ^= (uint8_t)*s;
        h *= 0x100000001B3ull;
    }
    return h;
}

void dsv4_rng_init(dsv4_rng *r, uint64_t seed, const char *stream)
{
    r->state = seed ^ dsv4_fnv1a64(stream ? stream : "");
}

uint64_t dsv4_rng_next(dsv4_rng *r)
{
    uint64_t z = (r->state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

double dsv4_rng_uniform(dsv4_rng *r)
{
    return (double)(dsv4_rng_next(r) >> 11) * 0x1.0p-53;
}

int64_t dsv4_rng_range(dsv4_rng *r, int64_t lo, int64_t hi)
{
    uint64_t span = (uint64_t)hi - (uint64_t)lo;
    if (span == 0)
        return lo;
    /* Reject the top partial copy of [0, span) so every value is equally likely. */
    uint64_t limit = UINT64_MAX - UINT64_MAX % span;
    uint64_t x;
    do
        x = dsv4_rng_next(r);
    while (x >= limit);
    return (int64_t)((uint64_t)lo + x % span);
}

double dsv4_rng_normal(dsv4_rng *r)
{
    double s = 0.0;
    for (int k = 0; k < 12; k++)
        s += dsv4_rng_uniform(r);
    return s - 6.0;
}

void dsv4_rng_shuffle_i32(dsv4_rng *r, int32_t *v, int64_t n)
{
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = dsv4_rng_range(r, 0, i + 1);
        int32_t tmp = v[i];
        v[i] = v[j];
        v[j] = tmp;
    }
}
