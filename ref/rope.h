/* rope.h - GPT-J (interleaved-pair) rotary embedding on the last rope_dim
 * lanes of a head row, forward and inverse, with vLLM's cos|sin cache layout
 * (docs/semantics/numerics.md A1 [S14, S21, S15]).
 *
 * cos_sin_cache is fp32 [num_pos, rope_dim]; row p = cos[0..rope_dim/2) |
 * sin[0..rope_dim/2).  Pair k of the rotated lanes is (x[2k], x[2k+1]) and
 * uses cos[p, k], sin[p, k]:
 *   forward  e' = e*c - o*s,  o' = e*s + o*c
 *   inverse  e' = e*c + o*s,  o' = o*c - e*s
 * Callers: the inverse-RoPE epilogues (attention.c), the K store, the fused
 * q-norm/RoPE insert and the compressor.  Pure functions, no allocation. */
#ifndef DSV4_ROPE_H
#define DSV4_ROPE_H

#include <stdint.h>

#include "status.h"

/* DeepSeek V4 head layout: 512 = 448 NoPE + 64 RoPE (docs/semantics/numerics.md A1 [S14]). */
#define DSV4_HEAD_DIM 512
#define DSV4_NOPE_DIM 448
#define DSV4_ROPE_DIM 64

typedef enum dsv4_rope_dir { DSV4_ROPE_FORWARD = 0, DSV4_ROPE_INVERSE = 1 } dsv4_rope_dir;

/* The cache row of position pos, or DSV4_EINPUT naming `what` (e.g.
 * "positions[7]") when pos is outside [0, num_pos) or rope_dim is not a
 * positive even number. */
int dsv4_rope_row(const float *cos_sin_cache, int64_t num_pos, int rope_dim, int64_t pos,
                  const char *what, const float **row, dsv4_status *st);

/* dsv4_rope_row of token t's position positions[t], named "positions[t]". */
int dsv4_rope_row_of_token(const float *cos_sin_cache, int64_t num_pos, int rope_dim, const int64_t *positions,
                           int64_t t, const float **row, dsv4_status *st);

/* Rotates x[0..rope_dim) in place with one cache row, in fp32 as the Triton
 * and HIP kernels do: each product rounded to fp32, then the sum (no FMA
 * contraction: -std=c11 implies -ffp-contract=off). */
void dsv4_rope_gptj_f32(float *x, const float *cs_row, int rope_dim, dsv4_rope_dir dir);

/* The same rotation in double on the fp32 cache values: the ideal. */
void dsv4_rope_gptj_f64(double *x, const float *cs_row, int rope_dim, dsv4_rope_dir dir);

/* Rotates lanes [head_dim - rope_dim, head_dim) of every row of a bf16
 * [rows, head_dim] block in fp32 and rounds each rotated lane to bf16 (RNE);
 * NoPE lanes are untouched, bit for bit (docs/semantics/attention.md A9.1 [S9]). */
void dsv4_rope_rows_bf16(uint16_t *x, int64_t rows, int head_dim, const float *cs_row,
                         int rope_dim, dsv4_rope_dir dir);

#endif
