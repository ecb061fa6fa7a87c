/* rope.c - GPT-J rotary embedding; see rope.h.  Formulas:
 * docs/semantics/numerics.md A1 ("Forward rotation of pair (e, o)", "Inverse
 * rotation") [S15, S9, S21]. */
#include "rope.h"

#include <inttypes.h>
#include <stdio.h>

#include "numerics.h"

int dsv4_rope_row(const float *cos_sin_cache, int64_t num_pos, int rope_dim, int64_t pos,
                  const char *what, const float **row, dsv4_status *st)
{
    if (rope_dim <= 0 || rope_dim % 2)
        return dsv4_fail(st, DSV4_EINPUT, "rope_dim = %d: must be a positive even number", rope_dim);
    if (pos < 0 || pos >= num_pos)
        return dsv4_fail(st, DSV4_EINPUT,
                         "%s = %" PRId64 ": outside the cos_sin_cache rows [0, %" PRId64 ")", what, pos,
                         num_pos);
    *row = cos_sin_cache + pos * rope_dim;
    return DSV4_OK;
}

int dsv4_rope_row_of_token(const float *cos_sin_cache, int64_t num_pos, int rope_dim, const int64_t *positions,
                           int64_t t, const float **row, dsv4_status *st)
{
    char what[48];
    snprintf(what, sizeof what, "positions[%" PRId64 "]", t);
    return dsv4_rope_row(cos_sin_cache, num_pos, rope_dim, positions[t], what, row, st);
}

void dsv4_rope_gptj_f32(float *x, const float *cs_row, int rope_dim, dsv4_rope_dir dir)
{
    const int half = rope_dim / 2;
    for (int k = 0; k < half; k++) {
        const float c = cs_row[k], s = cs_row[half + k]; /* cos | sin layout [S15] */
        const float e = x[2 * k], o = x[2 * k + 1];      /* GPT-J pairs (2k, 2k+1) [S14] */
        float ec = e * c, os = o * s, es = e * s, oc = o * c;
        if (dir == DSV4_ROPE_FORWARD) {
            x[2 * k] = ec - os;
            x[2 * k + 1] = es + oc;
        } else {
            x[2 * k] = ec + os;
            x[2 * k + 1] = oc - es;
        }
    }
}

void dsv4_rope_gptj_f64(double *x, const float *cs_row, int rope_dim, dsv4_rope_dir dir)
{
    const int half = rope_dim / 2;
    for (int k = 0; k < half; k++) {
        const double c = cs_row[k], s = cs_row[half + k];
        const double e = x[2 * k], o = x[2 * k + 1];
        if (dir == DSV4_ROPE_FORWARD) {
            x[2 * k] = e * c - o * s;
            x[2 * k + 1] = e * s + o * c;
        } else {
            x[2 * k] = e * c + o * s;
            x[2 * k + 1] = o * c - e * s;
        }
    }
}

void dsv4_rope_rows_bf16(uint16_t *x, int64_t rows, int head_dim, const float *cs_row,
                         int rope_dim, dsv4_rope_dir dir)
{
    float lanes[DSV4_HEAD_DIM];
    for (int64_t r = 0; r < rows; r++) {
        uint16_t *p = x + r * head_dim + (head_dim - rope_dim);
        for (int d = 0; d < rope_dim && d < DSV4_HEAD_DIM; d++)
            lanes[d] = dsv4_bf16_to_f32(p[d]);
        dsv4_rope_gptj_f32(lanes, cs_row, rope_dim, dir);
        for (int d = 0; d < rope_dim && d < DSV4_HEAD_DIM; d++)
            p[d] = dsv4_bf16_from_f32(lanes[d]); /* bf16 RNE store [S9] */
    }
}
