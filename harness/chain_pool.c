/* chain_pool.c - a chain run's errors, its pool of named tensors, the
 * glue that moves data between steps exactly, and step parameters
 * (chain.h). */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chain_impl.h"

int dsv4_chain_failed(const dsv4_chain *x) { return x->err; }

int dsv4_chain_fail(dsv4_chain *x, int code, const char *fmt, ...)
{
    if (x->err)
        return x->err;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(x->st.msg, sizeof x->st.msg, fmt, ap);
    va_end(ap);
    x->st.code = code;
    return x->err = code;
}

int dsv4_chain_adopt(dsv4_chain *x, int rc, const dsv4_status *st, const char *step)
{
    if (!rc || x->err)
        return x->err ? x->err : rc;
    return dsv4_chain_fail(x, rc, "step %s: %s", step, st->msg[0] ? st->msg : "error");
}

int dsv4_chain_stage(dsv4_chain *x, const char *stage)
{
    if (x->err)
        return x->err;
    int k = 0;
    for (const dsv4_io_spec *io = dsv4_op_outputs(x->def->desc); io->name; io++, k++)
        if (strcmp(io->name, stage) == 0) {
            x->stage = k;
            return DSV4_OK;
        }
    return dsv4_chain_fail(x, DSV4_ERUNTIME, "chain %s has no stage '%s'", x->def->desc->name, stage);
}

/* ---- the pool ------------------------------------------------------------- */

pool_entry *dsv4_chain_pool_find(const dsv4_chain *x, const char *name)
{
    for (int i = 0; i < x->npool; i++)
        if (strcmp(x->pool[i]->t.name, name) == 0)
            return x->pool[i];
    return NULL;
}

void dsv4_chain_pool_free_entry(pool_entry *e)
{
    dsv4_tensor_free(&e->t);
    free(e);
}

void dsv4_chain_drop(dsv4_chain *x, const char *name)
{
    for (int i = 0; i < x->npool; i++)
        if (strcmp(x->pool[i]->t.name, name) == 0) {
            dsv4_chain_pool_free_entry(x->pool[i]);
            x->pool[i] = x->pool[--x->npool];
            return;
        }
}

int dsv4_chain_pool_put(dsv4_chain *x, const char *name, dsv4_tensor *t, int diverged)
{
    pool_entry *e = malloc(sizeof *e);
    if (!e) {
        free(e);
        dsv4_tensor_free(t);
        return dsv4_chain_fail(x, DSV4_ERUNTIME, "out of memory (chain pool)");
    }
    if (x->npool == x->cap) {
        int cap = x->cap ? 2 * x->cap : 64;
        pool_entry **p = realloc(x->pool, (size_t)cap * sizeof *p);
        if (!p) {
            free(e);
            dsv4_tensor_free(t);
            return dsv4_chain_fail(x, DSV4_ERUNTIME, "out of memory (chain pool)");
        }
        x->pool = p;
        x->cap = cap;
    }
    dsv4_chain_drop(x, name);
    e->t = *t;
    snprintf(e->t.name, sizeof e->t.name, "%s", name);
    e->diverged = diverged;
    memset(t, 0, sizeof *t);
    x->pool[x->npool++] = e;
    return DSV4_OK;
}

int dsv4_chain_diverged(dsv4_chain *x, const char *name)
{
    const pool_entry *e = dsv4_chain_pool_find(x, name);
    return e && e->diverged;
}

static int any_diverged(dsv4_chain *x, const char *const *from)
{
    int d = 0;
    for (; from && *from; from++) {
        const pool_entry *e = dsv4_chain_pool_find(x, *from);
        d |= e && e->diverged;
    }
    return d;
}

dsv4_tensor *dsv4_chain_new(dsv4_chain *x, const char *name, dsv4_dtype dt, int ndim, const int64_t *shape,
                            const char *const *from)
{
    if (x->err)
        return NULL;
    dsv4_tensor t;
    memset(&t, 0, sizeof t);
    dsv4_status st = {0};
    int rc = dsv4_tensor_alloc(&t, name, dt, ndim, shape, &st);
    if (rc) {
        dsv4_tensor_free(&t);
        dsv4_chain_adopt(x, rc, &st, name);
        return NULL;
    }
    if (dsv4_chain_pool_put(x, name, &t, any_diverged(x, from)))
        return NULL;
    return &dsv4_chain_pool_find(x, name)->t;
}

const dsv4_tensor *dsv4_chain_get(dsv4_chain *x, const char *name)
{
    if (x->err)
        return NULL;
    pool_entry *e = dsv4_chain_pool_find(x, name);
    if (!e)
        dsv4_chain_fail(x, DSV4_ERUNTIME, "chain %s: no tensor '%s' at this point", x->def->desc->name, name);
    return e ? &e->t : NULL;
}

/* The source of a glue step; dst must be another name (the source's
 * storage is read after dst is added). */
static const dsv4_tensor *glue_src(dsv4_chain *x, const char *dst, const char *src)
{
    if (!x->err && strcmp(dst, src) == 0) {
        dsv4_chain_fail(x, DSV4_ERUNTIME, "glue from '%s' into itself", src);
        return NULL;
    }
    return dsv4_chain_get(x, src);
}

static int64_t row_elems(const dsv4_tensor *t)
{
    int64_t n = 1;
    for (int d = 1; d < t->ndim; d++)
        n *= t->shape[d];
    return n;
}

int dsv4_chain_rows(dsv4_chain *x, const char *dst, const char *src, int64_t r0, int64_t r1)
{
    const dsv4_tensor *s = glue_src(x, dst, src);
    if (!s)
        return x->err;
    if (s->ndim < 1 || r0 < 0 || r1 < r0 || r1 > s->shape[0])
        return dsv4_chain_fail(x, DSV4_ERUNTIME, "rows [%" PRId64 ", %" PRId64 ") of '%s' out of range", r0, r1, src);
    int64_t shape[DSV4_MAX_DIMS];
    memcpy(shape, s->shape, sizeof shape);
    shape[0] = r1 - r0;
    const size_t row = (size_t)row_elems(s) * dsv4_dtype_size(s->dtype);
    const void *from = (const char *)s->data + (size_t)r0 * row;
    dsv4_tensor *d = dsv4_chain_new(x, dst, s->dtype, s->ndim, shape, (const char *const[]){src, NULL});
    if (d && d->nbytes)
        memcpy(d->data, from, d->nbytes);
    return x->err;
}

int dsv4_chain_cols(dsv4_chain *x, const char *dst, const char *src, int64_t c0, int64_t c1)
{
    const dsv4_tensor *s = glue_src(x, dst, src);
    if (!s)
        return x->err;
    if (s->ndim != 2 || c0 < 0 || c1 < c0 || c1 > s->shape[1])
        return dsv4_chain_fail(x, DSV4_ERUNTIME, "columns [%" PRId64 ", %" PRId64 ") of '%s' out of range", c0, c1, src);
    const int64_t rows = s->shape[0], shape[2] = {rows, c1 - c0};
    const size_t es = dsv4_dtype_size(s->dtype);
    const char *base = s->data;
    const int64_t w = s->shape[1];
    dsv4_tensor *d = dsv4_chain_new(x, dst, s->dtype, 2, shape, (const char *const[]){src, NULL});
    for (int64_t i = 0; d && i < rows; i++)
        memcpy((char *)d->data + (size_t)(i * (c1 - c0)) * es, base + (size_t)(i * w + c0) * es,
               (size_t)(c1 - c0) * es);
    return x->err;
}

int dsv4_chain_reshape(dsv4_chain *x, const char *dst, const char *src, int ndim, const int64_t *shape)
{
    const dsv4_tensor *s = glue_src(x, dst, src);
    if (!s)
        return x->err;
    int64_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= shape[d];
    if (n != dsv4_tensor_numel(s))
        return dsv4_chain_fail(x, DSV4_ERUNTIME, "reshape of '%s': %" PRId64 " elements, not %" PRId64, src,
                               dsv4_tensor_numel(s), n);
    const void *from = s->data;
    dsv4_tensor *d = dsv4_chain_new(x, dst, s->dtype, ndim, shape, (const char *const[]){src, NULL});
    if (d && d->nbytes)
        memcpy(d->data, from, d->nbytes);
    return x->err;
}

int dsv4_chain_to_f32(dsv4_chain *x, const char *dst, const char *src)
{
    const dsv4_tensor *s = glue_src(x, dst, src);
    if (!s)
        return x->err;
    if (s->dtype != DSV4_BF16)
        return dsv4_chain_fail(x, DSV4_ERUNTIME, "'%s' is %s, not bfloat16", src, dsv4_dtype_name(s->dtype));
    dsv4_tensor *d = dsv4_chain_new(x, dst, DSV4_F32, s->ndim, s->shape, (const char *const[]){src, NULL});
    const int64_t n = dsv4_tensor_numel(s);
    for (int64_t i = 0; d && i < n; i++)
        ((float *)d->data)[i] = (float)dsv4_tensor_get(s, i);
    return x->err;
}

int dsv4_chain_put_rows(dsv4_chain *x, const char *dst, const char *src, int64_t r0)
{
    pool_entry *d = x->err ? NULL : dsv4_chain_pool_find(x, dst);
    const dsv4_tensor *s = dsv4_chain_get(x, src);
    if (!s)
        return x->err;
    if (!d)
        return dsv4_chain_fail(x, DSV4_ERUNTIME, "no tensor '%s' to write rows into", dst);
    if (d->t.dtype != s->dtype || d->t.ndim != s->ndim || row_elems(&d->t) != row_elems(s) || r0 < 0 ||
        r0 + s->shape[0] > d->t.shape[0])
        return dsv4_chain_fail(x, DSV4_ERUNTIME, "rows of '%s' do not fit '%s' at row %" PRId64, src, dst, r0);
    const size_t row = (size_t)row_elems(s) * dsv4_dtype_size(s->dtype);
    if (s->nbytes)
        memcpy((char *)d->t.data + (size_t)r0 * row, s->data, s->nbytes);
    d->diverged |= dsv4_chain_pool_find(x, src)->diverged;
    return DSV4_OK;
}

/* ---- step parameters -------------------------------------------------------- */

static void pset(dsv4_chain *x, dsv4_params *ps, const dsv4_param *p)
{
    dsv4_status st = {0};
    if (!x->err && dsv4_params_set(ps, p, &st))
        dsv4_chain_adopt(x, st.code, &st, "params");
}

static dsv4_param *param_named(dsv4_param *p, const char *name, dsv4_ptype type)
{
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", name);
    p->type = type;
    return p;
}

void dsv4_chain_pint(dsv4_chain *x, dsv4_params *ps, const char *name, int64_t v)
{
    dsv4_param p;
    param_named(&p, name, DSV4_P_INT)->i = v;
    pset(x, ps, &p);
}

void dsv4_chain_pfloat(dsv4_chain *x, dsv4_params *ps, const char *name, double v)
{
    dsv4_param p;
    param_named(&p, name, DSV4_P_FLOAT)->f = v;
    pset(x, ps, &p);
}

void dsv4_chain_pstr(dsv4_chain *x, dsv4_params *ps, const char *name, const char *v)
{
    dsv4_param p;
    snprintf(param_named(&p, name, DSV4_P_STR)->s, sizeof p.s, "%s", v);
    pset(x, ps, &p);
}

void dsv4_chain_plist(dsv4_chain *x, dsv4_params *ps, const char *name, const int64_t *v, int n)
{
    dsv4_param p;
    param_named(&p, name, DSV4_P_INTLIST);
    if (n > DSV4_PARAM_LIST_MAX) {
        dsv4_chain_fail(x, DSV4_EINPUT, "parameter %s: %d entries, at most %d", name, n, DSV4_PARAM_LIST_MAX);
        return;
    }
    p.n = n;
    if (n)
        memcpy(p.list, v, (size_t)n * sizeof *v);
    pset(x, ps, &p);
}

