/* indices_internal.h - what the index builders' files share (indices.c,
 * global_topk.c): the parallel check loop, torch's int32 wrap and floor
 * division, the division by a page size and the global slot of a
 * request's position. */
#ifndef DSV4_REF_INDICES_INTERNAL_H
#define DSV4_REF_INDICES_INTERNAL_H

#include <stdint.h>
#include <string.h>

#include "status.h"


/* Tokens per parallel chunk of the index builders. */
#define TOKEN_GRAIN 64

/* Defines name, a dsv4_par_fn that runs the per-item check check(ctx, i, st)
 * on every item of its range and stops at the first failure (a macro, so the
 * check stays inlined in the loop). */
#define CHECK_RANGE_OF(name, check)                                                          \
    static int name(void *ctx, int64_t i0, int64_t i1, int worker, dsv4_status *st)         \
    {                                                                                        \
        (void)worker;                                                                        \
        for (int64_t i = i0; i < i1; i++) {                                                  \
            int rc = check(ctx, i, st);                                                      \
            if (rc)                                                                          \
                return rc;                                                                   \
        }                                                                                    \
        return DSV4_OK;                                                                      \
    }

/* Torch's .to(int32) (and int32 tensor arithmetic) wraps modulo 2^32; do the
 * same without signed-overflow UB. */
static inline int32_t wrap_i32(int64_t v)
{
    const uint32_t u = (uint32_t)(uint64_t)v;
    int32_t w; /* int32_t is two's complement: the bits of u are the wrapped value */
    memcpy(&w, &u, sizeof w);
    return w;
}

/* Torch integer `//` is floor division (docs/semantics/numerics.md A1: "floor division plus
 * clamp_min(0)" [S4]); C's `/` truncates toward zero. */
static inline int64_t floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0)))
        q--;
    return q;
}


/* Division by the page size: a shift for powers of two (every real page
 * size), else the 32-bit division; the same quotient either way. */
typedef struct page_div {
    uint32_t b;
    int shift; /* log2 b, or -1 */
} page_div;

static inline page_div page_div_of(int64_t bc)
{
    page_div d = {(uint32_t)bc, -1};
    if (bc > 0 && (bc & (bc - 1)) == 0)
        for (d.shift = 0; ((int64_t)1 << d.shift) < bc; d.shift++)
            ;
    return d;
}

static inline uint32_t page_of(uint32_t v, page_div d) { return d.shift >= 0 ? v >> d.shift : v / d.b; }

/* block_table[r, v // Bc] * Bc + v % Bc in int32 arithmetic (docs/semantics/indices.md A5.6 [S1]);
 * v >= 0 here, so C division is floor division (and v < 2^31, bc < 2^31 in
 * every caller: 32-bit division is exact). */
static inline int32_t global_slot(const int32_t *bt, int64_t cols, int64_t r, int64_t v, page_div d)
{
    const uint32_t uv = (uint32_t)v, page = page_of(uv, d);
    return wrap_i32((int64_t)bt[r * cols + page] * (int64_t)d.b + (uv - page * d.b));
}

#endif
