/* gemm_common.c - helpers shared by the GEMM family's op files (gemm.h). */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../ref/kvcache.h"
#include "gemm.h"

int dsv4_gemmops_oom(dsv4_status *st) { return dsv4_fail(st, DSV4_ERUNTIME, "out of memory"); }

int dsv4_gemmops_add_poisoned(dsv4_tensors *out, const char *name, dsv4_dtype dt, int ndim, const int64_t *shape,
                              dsv4_status *st)
{
    dsv4_tensor *t;
    int rc = dsv4_tensors_add(out, name, dt, ndim, shape, &t, st);
    if (rc)
        return rc;
    dsv4_poison(t);
    return DSV4_OK;
}

int dsv4_gemmops_add_wo_a_out(dsv4_tensors *out, int64_t T, int64_t G, int64_t R, dsv4_status *st)
{
    const int64_t shape[2] = {T, G * R};
    return dsv4_gemmops_add_poisoned(out, "out", DSV4_BF16, 2, shape, st);
}

int dsv4_gemmops_add_inplace(dsv4_tensors *out, const dsv4_tensors *in, const char *name, dsv4_status *st)
{
    const dsv4_tensor *src = dsv4_tensors_get(in, name);
    dsv4_tensor *t;
    if (!src)
        return dsv4_fail(st, DSV4_EINPUT, "input '%s' is missing", name);
    int rc = dsv4_tensors_add(out, name, src->dtype, src->ndim, src->shape, &t, st);
    if (rc)
        return rc;
    memcpy(t->data, src->data, src->nbytes);
    return DSV4_OK;
}

int dsv4_bf16_ideal_alloc(dsv4_bf16_ideal *id, int64_t n, int with_extra, dsv4_status *st)
{
    memset(id, 0, sizeof *id);
    id->n = n;
    id->e = malloc((size_t)(n + 1) * sizeof *id->e);
    id->gauge = malloc((size_t)(n + 1) * sizeof *id->gauge);
    id->extra = with_extra ? malloc((size_t)(n + 1) * sizeof *id->extra) : NULL;
    if (!id->e || !id->gauge || (with_extra && !id->extra))
        return dsv4_gemmops_oom(st);
    return DSV4_OK;
}

void dsv4_bf16_ideal_free(dsv4_bf16_ideal *id)
{
    free(id->e), free(id->gauge), free(id->extra);
    memset(id, 0, sizeof *id);
}

void dsv4_bf16_ideal_bounds(const dsv4_bf16_ideal *id, double *bound)
{
    for (int64_t i = 0; i < id->n; i++)
        bound[i] = dsv4_bf16_store_bound(id->e[i], id->gamma * id->gauge[i] + (id->extra ? id->extra[i] : 0.0));
}

int dsv4_bf16_ideal_reference(dsv4_bf16_ideal_fn ideal, const dsv4_opctx *c, const dsv4_tensors *in,
                              dsv4_tensor *y, dsv4_status *st)
{
    dsv4_bf16_ideal id;
    memset(&id, 0, sizeof id);
    int rc = ideal(c, in, &id, st);
    if (!rc && id.n != dsv4_tensor_numel(y))
        rc = dsv4_fail(st, DSV4_EINPUT, "output '%s' has %" PRId64 " elements, the op computes %" PRId64,
                       y->name, dsv4_tensor_numel(y), id.n);
    if (!rc)
        dsv4_tensor_set_all(y, id.e, id.n);
    dsv4_bf16_ideal_free(&id);
    return rc;
}

int dsv4_bf16_ideal_bound(dsv4_bf16_ideal_fn ideal, const dsv4_opctx *c, const dsv4_tensors *in, double *bound,
                          int64_t n, const char *what, dsv4_status *st)
{
    dsv4_bf16_ideal id;
    memset(&id, 0, sizeof id);
    int rc = ideal(c, in, &id, st);
    if (!rc && id.n != n)
        rc = dsv4_fail(st, DSV4_EINPUT, "%s bound: element count", what);
    if (!rc)
        dsv4_bf16_ideal_bounds(&id, bound);
    dsv4_bf16_ideal_free(&id);
    return rc;
}

int dsv4_bf16_ideal_validate(dsv4_bf16_ideal_fn ideal, const dsv4_opctx *c, const dsv4_tensors *in,
                             const char *finite_inputs, dsv4_status *st)
{
    dsv4_bf16_ideal id;
    memset(&id, 0, sizeof id);
    int rc = ideal(c, in, &id, st);
    for (int64_t i = 0; !rc && finite_inputs && i < id.n; i++)
        if (!isfinite(id.e[i]))
            rc = dsv4_fail(st, DSV4_EINPUT, "%s holds a non-finite value (output %" PRId64 ")", finite_inputs, i);
    dsv4_bf16_ideal_free(&id);
    return rc;
}

void dsv4_gemmops_cache_locate(int64_t flat, int64_t B, char *buf, size_t len)
{
    buf[0] = '\0';
    if (B < 1)
        return;
    const int64_t page = flat / (B * DSV4_KV_TOKEN_BYTES), off = flat % (B * DSV4_KV_TOKEN_BYTES);
    if (off < B * DSV4_KV_DATA_BYTES) {
        const int64_t tok = off / DSV4_KV_DATA_BYTES, b = off % DSV4_KV_DATA_BYTES;
        snprintf(buf, len, "page %" PRId64 ", token %" PRId64 " (slot %" PRId64 "), %s %" PRId64, page, tok,
                 page * B + tok, b < DSV4_KV_NOPE_DIM ? "fp8 value of dim" : "bf16 RoPE byte", b);
    } else {
        const int64_t s = off - B * DSV4_KV_DATA_BYTES;
        snprintf(buf, len, "page %" PRId64 ", token %" PRId64 " (slot %" PRId64 "), scale byte %" PRId64, page,
                 s / DSV4_KV_SCALE_BYTES, page * B + s / DSV4_KV_SCALE_BYTES, s % DSV4_KV_SCALE_BYTES);
    }
}
