/* quant_common.c - the quantization ops' shared generator, input readers
 * and outputs (quant.h). */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../ref/numerics.h"
#include "../../ref/parallel.h"
#include "quant.h"

/* Special blocks, written one per block (of blk elements) from the start of
 * the tensor when special = "all": zero, NaN, Inf, denormal and +-0 blocks;
 * amax at powers of two and at significands 1.5 and 1.75; every code and
 * every rounding tie.  All values are exact in bf16. */
enum { SP_ZERO, SP_SIGNED_ZERO, SP_ONE_NAN, SP_ALL_NAN, SP_POS_INF, SP_NEG_INF, SP_DENORMAL,
       SP_POW2, SP_SIG_1_5, SP_SIG_1_75, SP_ABOVE_6, SP_AT_448, SP_ABOVE_448, SP_BELOW_POW2,
       SP_E2M1_CODES, SP_E2M1_NEG, SP_FIXED_COUNT };

/* The e2m1 grid and its ties (docs/semantics/quant.md Q1.2), scaled by 4:
 * every code and tie. */
static const float e2m1_and_ties[15] = {0, 0.25f, 0.5f, 0.75f, 1, 1.25f, 1.5f, 1.75f,
                                        2, 2.5f, 3, 3.5f, 4, 5, 6};

/* Value i of special block k (filler u in (-1, 1) for "ordinary" elements). */
static float special_value(int k, int i, float u)
{
    switch (k) {
    case SP_ZERO: return 0.0f;
    case SP_SIGNED_ZERO: return (i & 1) ? -0.0f : 0.0f;
    case SP_ONE_NAN: return i == 3 ? NAN : u;
    case SP_ALL_NAN: return NAN;
    case SP_POS_INF: return i == 5 ? INFINITY : u;
    case SP_NEG_INF: return i == 5 ? -INFINITY : u;
    case SP_DENORMAL: /* bf16 subnormals m * 2^-133 */
        return ldexpf((float)(1 + i % 127), -133) * ((i & 1) ? -1.0f : 1.0f);
    case SP_POW2: return i == 7 ? -8.0f : u;               /* amax = 2^3, negative */
    case SP_SIG_1_5: return i == 7 ? 12.0f : u;            /* 1.5 * 2^3 */
    case SP_SIG_1_75: return i == 7 ? 14.0f : u;           /* 1.75 * 2^3 */
    case SP_ABOVE_6: return i == 7 ? 24.125f : u;          /* 6*4 + one bf16 ulp */
    case SP_AT_448: return i == 7 ? 448.0f : u * 100.0f;   /* MXFP8 / fp8 boundary */
    case SP_ABOVE_448: return i == 7 ? 450.0f : u * 100.0f; /* 448 + one bf16 ulp */
    case SP_BELOW_POW2: return i == 7 ? 15.9375f : u;      /* 2^4 - one bf16 ulp */
    case SP_E2M1_CODES:
    case SP_E2M1_NEG: { /* codes and ties times 4 (scale 2^2 under every rule) */
        float v = i < 15 ? e2m1_and_ties[i] : i < 30 ? -e2m1_and_ties[i - 15] : (i == 30 ? -0.0f : 6.0f);
        return 4.0f * (k == SP_E2M1_NEG ? -v : v);
    }
    default: return u;
    }
}

/* e4m3fn code sweeps: block b of 8 holds positive codes 32*(b%4) .. +31 (as
 * values, ties when b >= 4: midpoints to the next code), each block with
 * 448 planted at element 31 so that the MXFP8 scale is 2^0. */
static float e4m3_sweep_value(int b, int i)
{
    int c = 32 * (b % 4) + i;
    if (i == 31 || c >= 0x7E)
        return 448.0f;
    float v = dsv4_fp8_to_f32((uint8_t)c, DSV4_FP8_E4M3FN);
    if (b >= 4)
        v = 0.5f * (v + dsv4_fp8_to_f32((uint8_t)(c + 1), DSV4_FP8_E4M3FN));
    return (i & 1) ? -v : v;
}

/* special = log2_edge (fp32 rows): every block's amax is 448 * 2^k times
 * (1 + m 2^-23), m = 1..3 ulps, |k| in [4, 15]: there fl(amax / 448) lies
 * a few ulps above 2^k and the fp32 log2 rounds to k, so the kernels'
 * fp32-log2 scale rule and the exact rule pick binades one apart
 * (docs/semantics/quant.md Q2, Q10). */
static float log2_edge_amax(int64_t b)
{
    const int k = (b & 1 ? -1 : 1) * (int)(4 + (b / 2) % 12);
    const float v = ldexpf(448.0f * (1.0f + (float)(1 + b % 3) * 0x1p-23f), k);
    return (b / 24) & 1 ? -v : v;
}

/* Fill x (dtype bf16 or f32) from the generator params. */
static int fill_input(const dsv4_opctx *c, const char *stream, dsv4_tensor *x, int blk, int fp8_sweep,
                      dsv4_status *st)
{
    const char *sp = dsv4_params_str(c->params, "special");
    const double sd = dsv4_params_float(c->params, "scale");
    const int special = strcmp(sp, "all") == 0, log2_edge = strcmp(sp, "log2_edge") == 0;
    if (!special && !log2_edge && strcmp(sp, "none") != 0)
        return dsv4_fail(st, DSV4_EINPUT, "special = '%s': expected none, all or log2_edge", sp);
    if (log2_edge && x->dtype != DSV4_F32)
        return dsv4_fail(st, DSV4_EINPUT, "special = log2_edge needs dtype float32 (bf16 cannot hold the amax)");
    const int64_t n = dsv4_tensor_numel(x);
    const int nsp = SP_FIXED_COUNT + (fp8_sweep ? 8 : 0);
    if (special && n < (int64_t)nsp * blk)
        return dsv4_fail(st, DSV4_EINPUT, "special = all needs %d blocks of %d, the input has %" PRId64
                         " elements", nsp, blk, n);
    dsv4_rng rng, frng;
    dsv4_rng_init(&rng, c->seed, stream);
    char fs[64];
    snprintf(fs, sizeof fs, "%s.special", stream);
    dsv4_rng_init(&frng, c->seed, fs);
    for (int64_t i = 0; i < n; i++) {
        float v = (float)(dsv4_rng_normal(&rng) * sd);
        int64_t b = i / blk;
        if (special && b < nsp) {
            float u = (float)(2.0 * dsv4_rng_uniform(&frng) - 1.0);
            u = dsv4_round_bf16(u);
            v = b < SP_FIXED_COUNT ? special_value((int)b, (int)(i % blk), u)
                                   : e4m3_sweep_value((int)(b - SP_FIXED_COUNT), (int)(i % blk % 32));
        }
        if (log2_edge && i % blk == (b * 7) % blk)
            v = log2_edge_amax(b);
        if (x->dtype == DSV4_BF16)
            ((uint16_t *)x->data)[i] = dsv4_bf16_from_f32(v);
        else
            ((float *)x->data)[i] = v;
    }
    return DSV4_OK;
}

static int input_dtype(const dsv4_opctx *c, dsv4_dtype *dt, dsv4_status *st)
{
    const char *s = dsv4_params_str(c->params, "dtype");
    if (strcmp(s, "bfloat16") == 0)
        *dt = DSV4_BF16;
    else if (strcmp(s, "float32") == 0)
        *dt = DSV4_F32;
    else
        return dsv4_fail(st, DSV4_EINPUT, "dtype = '%s': expected bfloat16 or float32", s);
    return DSV4_OK;
}

int dsv4_quant_gen_x(const dsv4_opctx *c, dsv4_tensors *in, int64_t rows, int64_t cols, int blk,
                     int fp8_sweep, dsv4_status *st)
{
    dsv4_dtype dt = DSV4_DT_NONE;
    int64_t shape[2] = {rows, cols};
    dsv4_tensor *x;
    int rc;
    if ((rc = input_dtype(c, &dt, st)) || (rc = dsv4_tensors_add(in, "x", dt, 2, shape, &x, st)))
        return rc;
    return fill_input(c, "x", x, blk, fp8_sweep, st);
}

int dsv4_quant_input_2d(const dsv4_tensors *in, const char *name, int64_t mult, const dsv4_tensor **t,
                        dsv4_status *st)
{
    const dsv4_tensor *x = dsv4_tensors_get(in, name);
    if (!x)
        return dsv4_fail(st, DSV4_EINPUT, "input '%s' is missing", name);
    if (x->dtype != DSV4_BF16 && x->dtype != DSV4_F32)
        return dsv4_fail(st, DSV4_EINPUT, "input '%s' is %s, expected bfloat16 or float32", name,
                         dsv4_dtype_name(x->dtype));
    if (x->ndim != 2 || x->shape[1] % mult != 0)
        return dsv4_fail(st, DSV4_EINPUT, "input '%s' must be 2-D with columns a multiple of %" PRId64,
                         name, mult);
    *t = x;
    return DSV4_OK;
}

float *dsv4_quant_as_f32(const dsv4_tensor *x, dsv4_status *st)
{
    int64_t n = dsv4_tensor_numel(x);
    float *f = malloc(n ? (size_t)n * sizeof *f : 1);
    if (!f) {
        dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
        return NULL;
    }
    for (int64_t i = 0; i < n; i++)
        f[i] = x->dtype == DSV4_BF16 ? dsv4_bf16_to_f32(((const uint16_t *)x->data)[i])
                                     : ((const float *)x->data)[i];
    return f;
}

typedef struct rows_job {
    const dsv4_tensor *x;
    dsv4_quant_rows_fn fn;
    void *ctx;
    int64_t grain;
    float **bufs; /* per worker: [grain, cols] (bf16 input) */
} rows_job;

static int rows_range(void *vj, int64_t r0, int64_t r1, int worker, dsv4_status *st)
{
    const rows_job *j = vj;
    const int64_t W = j->x->shape[1];
    for (int64_t r = r0; r < r1; r += j->grain) {
        const int64_t n = r1 - r < j->grain ? r1 - r : j->grain;
        const float *rows = (const float *)j->x->data + r * W;
        if (j->x->dtype == DSV4_BF16) {
            const uint16_t *h = (const uint16_t *)j->x->data + r * W;
            float *f = j->bufs[worker];
            dsv4_bf16_row_to_f32(h, n * W, f);
            rows = f;
        }
        int rc = j->fn(j->ctx, rows, r, n, st);
        if (rc)
            return rc;
    }
    return DSV4_OK;
}

int dsv4_quant_rows_f32(const dsv4_tensor *x, int64_t grain_elems, dsv4_quant_rows_fn fn, void *ctx,
                        dsv4_status *st)
{
    const int64_t T = x->shape[0], W = x->shape[1];
    const int64_t grain = W > 0 && W < grain_elems ? grain_elems / W : 1;
    const int nw = dsv4_parallel_workers(T, grain);
    float *bufs[DSV4_MAX_THREADS] = {0};
    rows_job j = {x, fn, ctx, grain, bufs};
    int rc = DSV4_OK;
    for (int w = 0; x->dtype == DSV4_BF16 && w < nw && !rc; w++)
        if (!(bufs[w] = malloc((size_t)(grain * W + 1) * sizeof(float))))
            rc = dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
    if (!rc)
        rc = dsv4_parallel_for(T, grain, 0, rows_range, &j, st);
    for (int w = 0; w < nw; w++)
        free(bufs[w]);
    return rc;
}

int dsv4_quant_x_f32(const dsv4_tensors *in, int64_t mult, const dsv4_tensor **x, float **f, dsv4_status *st)
{
    int rc = dsv4_quant_input_2d(in, "x", mult, x, st);
    if (rc)
        return rc;
    *f = dsv4_quant_as_f32(*x, st);
    return *f ? DSV4_OK : st->code;
}

int dsv4_quant_mx_generate(const dsv4_opctx *c, dsv4_tensors *in, int fp8_sweep, dsv4_status *st)
{
    const int64_t T = dsv4_params_int(c->params, "T"), W = dsv4_params_int(c->params, "W");
    if (T < 0 || W < 0 || W % 32 != 0)
        return dsv4_fail(st, DSV4_EINPUT, "T = %" PRId64 ", W = %" PRId64 ": W must be a multiple of 32", T, W);
    return dsv4_quant_gen_x(c, in, T, W, 32, fp8_sweep, st);
}

int dsv4_quant_mx_validate(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_status *st)
{
    const dsv4_tensor *x;
    int rc = dsv4_quant_input_2d(in, "x", 32, &x, st);
    if (rc)
        return rc;
    if (x->shape[0] != dsv4_params_int(c->params, "T") || x->shape[1] != dsv4_params_int(c->params, "W"))
        return dsv4_fail(st, DSV4_EINPUT, "input 'x' is [%" PRId64 ", %" PRId64 "], params say T, W = %"
                         PRId64 ", %" PRId64, x->shape[0], x->shape[1], dsv4_params_int(c->params, "T"),
                         dsv4_params_int(c->params, "W"));
    return DSV4_OK;
}

int dsv4_quant_add_pair(dsv4_tensors *out, const char *codes, dsv4_dtype codes_dt, const int64_t *codes_shape,
                        const char *scales, dsv4_dtype scales_dt, const int64_t *scales_shape, dsv4_status *st)
{
    dsv4_tensor *d, *s;
    int rc;
    if ((rc = dsv4_tensors_add(out, codes, codes_dt, 2, codes_shape, &d, st)) ||
        (rc = dsv4_tensors_add(out, scales, scales_dt, 2, scales_shape, &s, st)))
        return rc;
    dsv4_poison(d);
    dsv4_poison(s);
    return DSV4_OK;
}
