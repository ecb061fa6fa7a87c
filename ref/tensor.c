#define _POSIX_C_SOURCE 200809L
#include "tensor.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "numerics.h"

static const struct {
    const char *name;
    size_t size;
    int is_float;
} dtype_info[DSV4_DTYPE_COUNT] = {
    [DSV4_F64] = {"float64", 8, 1},
    [DSV4_F32] = {"float32", 4, 1},
    [DSV4_BF16] = {"bfloat16", 2, 1},
    [DSV4_F16] = {"float16", 2, 1},
    [DSV4_I64] = {"int64", 8, 0},
    [DSV4_I32] = {"int32", 4, 0},
    [DSV4_U8] = {"uint8", 1, 0},
    [DSV4_F8E4M3FN] = {"float8_e4m3fn", 1, 1},
    [DSV4_F8E4M3FNUZ] = {"float8_e4m3fnuz", 1, 1},
    [DSV4_F8E8M0] = {"float8_e8m0fnu", 1, 1},
    [DSV4_F4E2M1X2] = {"float4_e2m1fn_x2", 1, 1},
    [DSV4_BYTES] = {"bytes", 1, 0},
};

const char *dsv4_dtype_name(dsv4_dtype dt)
{
    if (dt < 0 || dt >= DSV4_DTYPE_COUNT)
        return "none";
    return dtype_info[dt].name;
}

int dsv4_dtype_parse(const char *name, dsv4_dtype *out)
{
    for (int k = 0; k < DSV4_DTYPE_COUNT; k++)
        if (strcmp(dtype_info[k].name, name) == 0) {
            *out = (dsv4_dtype)k;
            return DSV4_OK;
        }
    return DSV4_EINPUT;
}

size_t dsv4_dtype_size(dsv4_dtype dt)
{
    if (dt < 0 || dt >= DSV4_DTYPE_COUNT)
        return 0;
    return dtype_info[dt].size;
}

int dsv4_dtype_is_float(dsv4_dtype dt)
{
    if (dt < 0 || dt >= DSV4_DTYPE_COUNT)
        return 0;
    return dtype_info[dt].is_float;
}

/* Default limit: half the machine's RAM (README.md "Limits"), set by the CLI;
 * the library default is 8 GiB so that it is safe without the CLI. */
static uint64_t memory_limit = (uint64_t)8 << 30;
static uint64_t memory_in_use;

void dsv4_set_memory_limit(uint64_t bytes) { memory_limit = bytes; }
uint64_t dsv4_memory_limit(void) { return memory_limit; }

int dsv4_tensor_alloc(dsv4_tensor *t, const char *name, dsv4_dtype dt, int ndim,
                      const int64_t *shape, dsv4_status *st)
{
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->dtype = dt;
    t->output_dtype = DSV4_DT_NONE;
    if (ndim < 0 || ndim > DSV4_MAX_DIMS)
        return dsv4_fail(st, DSV4_EINPUT, "tensor '%s': %d dims (at most %d)", name, ndim,
                         DSV4_MAX_DIMS);
    size_t esize = dsv4_dtype_size(dt);
    if (esize == 0)
        return dsv4_fail(st, DSV4_EINPUT, "tensor '%s': unknown dtype", name);
    uint64_t numel = 1;
    t->ndim = ndim;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0)
            return dsv4_fail(st, DSV4_EINPUT, "tensor '%s': negative size %" PRId64 " in dim %d",
                             name, shape[d], d);
        t->shape[d] = shape[d];
        if (shape[d] != 0 && numel > UINT64_MAX / (uint64_t)shape[d])
            return dsv4_fail(st, DSV4_EINPUT, "tensor '%s': element count overflows", name);
        numel *= (uint64_t)shape[d];
    }
    if (numel > UINT64_MAX / esize || numel * esize > (uint64_t)SIZE_MAX)
        return dsv4_fail(st, DSV4_EINPUT, "tensor '%s': byte size overflows", name);
    uint64_t bytes = numel * esize;
    if (bytes > memory_limit || memory_in_use + bytes > memory_limit)
        return dsv4_fail(st, DSV4_EINPUT,
                         "tensor '%s' needs %" PRIu64 " bytes: over the memory limit of %" PRIu64
                         " bytes (--mem-limit)",
                         name, bytes, memory_limit);
    t->nbytes = (size_t)bytes;
    t->data = calloc(1, t->nbytes ? t->nbytes : 1);
    if (!t->data)
        return dsv4_fail(st, DSV4_ERUNTIME, "tensor '%s': out of memory (%zu bytes)", name,
                         t->nbytes);
    memory_in_use += bytes;
    return DSV4_OK;
}

void dsv4_tensor_free(dsv4_tensor *t)
{
    if (!t)
        return;
    if (t->data)
        memory_in_use -= t->nbytes <= memory_in_use ? t->nbytes : memory_in_use;
    free(t->data);
    t->data = NULL;
    t->nbytes = 0;
}

int64_t dsv4_tensor_numel(const dsv4_tensor *t)
{
    int64_t n = 1;
    for (int d = 0; d < t->ndim; d++)
        n *= t->shape[d];
    return n;
}

int dsv4_tensor_same_shape(const dsv4_tensor *a, const dsv4_tensor *b)
{
    if (a->ndim != b->ndim)
        return 0;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d])
            return 0;
    return 1;
}

static const char *dims_str(const int64_t *v, int n, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    used += (size_t)snprintf(buf, len, "[");
    for (int d = 0; d < n && used < len; d++)
        used += (size_t)snprintf(buf + used, len - used, "%s%" PRId64, d ? ", " : "", v[d]);
    if (used < len)
        snprintf(buf + used, len - used, "]");
    return buf;
}

const char *dsv4_shape_str(const dsv4_tensor *t, char *buf, size_t len)
{
    return dims_str(t->shape, t->ndim, buf, len);
}

const char *dsv4_index_str(const dsv4_tensor *t, int64_t flat, char *buf, size_t len)
{
    int64_t idx[DSV4_MAX_DIMS];
    for (int d = t->ndim - 1; d >= 0; d--) {
        int64_t s = t->shape[d] ? t->shape[d] : 1;
        idx[d] = flat % s;
        flat /= s;
    }
    return dims_str(idx, t->ndim, buf, len);
}

double dsv4_tensor_get(const dsv4_tensor *t, int64_t i)
{
    const uint8_t *p = (const uint8_t *)t->data + (size_t)i * dsv4_dtype_size(t->dtype);
    switch (t->dtype) {
    case DSV4_F64: { double v; memcpy(&v, p, 8); return v; }
    case DSV4_F32: { float v; memcpy(&v, p, 4); return v; }
    case DSV4_BF16: { uint16_t v; memcpy(&v, p, 2); return dsv4_bf16_to_f32(v); }
    case DSV4_F16: { uint16_t v; memcpy(&v, p, 2); return dsv4_f16_to_f32(v); }
    case DSV4_I64: { int64_t v; memcpy(&v, p, 8); return (double)v; }
    case DSV4_I32: { int32_t v; memcpy(&v, p, 4); return v; }
    case DSV4_F8E4M3FN: return dsv4_fp8_to_f32(*p, DSV4_FP8_E4M3FN);
    case DSV4_F8E4M3FNUZ: return dsv4_fp8_to_f32(*p, DSV4_FP8_E4M3FNUZ);
    case DSV4_F8E8M0: return dsv4_e8m0_to_f64(*p);
    case DSV4_F4E2M1X2: return dsv4_e2m1_to_f32(dsv4_e2m1_lo(*p));
    case DSV4_U8:
    case DSV4_BYTES: return *p;
    default: return 0.0;
    }
}

dsv4_tensor *dsv4_tensors_find(dsv4_tensors *ts, const char *name)
{
    for (int k = 0; k < ts->n; k++)
        if (strcmp(ts->t[k].name, name) == 0)
            return &ts->t[k];
    return NULL;
}

const dsv4_tensor *dsv4_tensors_get(const dsv4_tensors *ts, const char *name)
{
    return dsv4_tensors_find((dsv4_tensors *)ts, name);
}

int dsv4_tensors_add(dsv4_tensors *ts, const char *name, dsv4_dtype dt, int ndim,
                     const int64_t *shape, dsv4_tensor **out, dsv4_status *st)
{
    if (dsv4_tensors_find(ts, name))
        return dsv4_fail(st, DSV4_EINPUT, "tensor '%s' given twice", name);
    if (ts->n >= DSV4_MAX_TENSORS)
        return dsv4_fail(st, DSV4_EINPUT, "more than %d tensors", DSV4_MAX_TENSORS);
    dsv4_tensor *t = &ts->t[ts->n];
    int rc = dsv4_tensor_alloc(t, name, dt, ndim, shape, st);
    if (rc) {
        dsv4_tensor_free(t);
        return rc;
    }
    ts->n++;
    if (out)
        *out = t;
    return DSV4_OK;
}

void dsv4_tensors_free(dsv4_tensors *ts)
{
    for (int k = 0; k < ts->n; k++)
        dsv4_tensor_free(&ts->t[k]);
    ts->n = 0;
}

void dsv4_tensor_set(dsv4_tensor *t, int64_t i, double v)
{
    uint8_t *p = (uint8_t *)t->data + (size_t)i * dsv4_dtype_size(t->dtype);
    switch (t->dtype) {
    case DSV4_F64: memcpy(p, &v, 8); break;
    case DSV4_F32: { float f = (float)v; memcpy(p, &f, 4); break; }
    case DSV4_BF16: { uint16_t h = dsv4_bf16_from_f32((float)v); memcpy(p, &h, 2); break; }
    case DSV4_F16: { uint16_t h = dsv4_f16_from_f32((float)v); memcpy(p, &h, 2); break; }
    case DSV4_I64: { int64_t x = (v != v) ? 0 : (int64_t)v; memcpy(p, &x, 8); break; }
    case DSV4_I32: {
        int64_t x = (v != v || v > 9.2e18 || v < -9.2e18) ? 0 : (int64_t)v;
        uint32_t u = (uint32_t)(uint64_t)x;
        memcpy(p, &u, 4);
        break;
    }
    case DSV4_F8E4M3FN: *p = dsv4_fp8_from_f32((float)v, DSV4_FP8_E4M3FN, 1); break;
    case DSV4_F8E4M3FNUZ: *p = dsv4_fp8_from_f32((float)v, DSV4_FP8_E4M3FNUZ, 1); break;
    case DSV4_F8E8M0: *p = dsv4_e8m0_from_f32_torch((float)v); break;
    case DSV4_F4E2M1X2: *p = dsv4_e2m1_pack(dsv4_e2m1_from_f32((float)v), dsv4_e2m1_hi(*p)); break;
    case DSV4_U8:
    case DSV4_BYTES: *p = (uint8_t)((v != v || v < 0) ? 0 : v > 255 ? 255 : v); break;
    default: break;
    }
}

void dsv4_tensor_set_all(dsv4_tensor *t, const double *v, int64_t n)
{
    if (t->dtype == DSV4_F32) { /* the same cast as dsv4_tensor_set, without its switch per element */
        float *f = t->data;
        for (int64_t i = 0; i < n; i++)
            f[i] = (float)v[i];
        return;
    }
    for (int64_t i = 0; i < n; i++)
        dsv4_tensor_set(t, i, v[i]);
}
