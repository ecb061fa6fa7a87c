/* tensor.h - dtype tags and the contiguous row-major tensor every part of
 * dsv4check passes around (the dtypes of data/README.md). */
#ifndef DSV4_TENSOR_H
#define DSV4_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

/* The fixed dtype vocabulary (data/README.md's dtype table), in its order. */
typedef enum dsv4_dtype {
    DSV4_DT_NONE = -1,
    DSV4_F64 = 0,
    DSV4_F32,
    DSV4_BF16,
    DSV4_F16,
    DSV4_I64,
    DSV4_I32,
    DSV4_U8,
    DSV4_F8E4M3FN,
    DSV4_F8E4M3FNUZ,
    DSV4_F8E8M0,
    DSV4_F4E2M1X2, /* two e2m1 codes per byte, even element in the low nibble */
    DSV4_BYTES,    /* opaque bytes, e.g. a KV-cache page */
    DSV4_DTYPE_COUNT
} dsv4_dtype;

const char *dsv4_dtype_name(dsv4_dtype dt);
/* Returns DSV4_OK or DSV4_EINPUT. */
int dsv4_dtype_parse(const char *name, dsv4_dtype *out);
/* Bytes per stored element (a float4_e2m1fn_x2 element is one byte = two values). */
size_t dsv4_dtype_size(dsv4_dtype dt);
int dsv4_dtype_is_float(dsv4_dtype dt);

#define DSV4_MAX_DIMS 6
#define DSV4_NAME_MAX 48

typedef struct dsv4_tensor {
    char name[DSV4_NAME_MAX];
    dsv4_dtype dtype;
    /* For float outputs stored as their ideal value (float64/float32): the
     * dtype the kernel produces, whose ULP measures the error. NONE otherwise. */
    dsv4_dtype output_dtype;
    int ndim;
    int64_t shape[DSV4_MAX_DIMS];
    void *data; /* owned; malloc'd */
    size_t nbytes;
} dsv4_tensor;

/* Upper bound on one case's tensors together; see dsv4_set_memory_limit. */
void dsv4_set_memory_limit(uint64_t bytes);
uint64_t dsv4_memory_limit(void);

/* Allocates zeroed storage after checking every dim >= 0, that the element
 * count and byte size do not overflow, and the memory limit.  On failure
 * returns DSV4_EINPUT (bad shape / over limit) or DSV4_ERUNTIME (malloc). */
int dsv4_tensor_alloc(dsv4_tensor *t, const char *name, dsv4_dtype dt, int ndim,
                      const int64_t *shape, dsv4_status *st);
void dsv4_tensor_free(dsv4_tensor *t);
int64_t dsv4_tensor_numel(const dsv4_tensor *t);
int dsv4_tensor_same_shape(const dsv4_tensor *a, const dsv4_tensor *b);
/* "[2, 3, 4]" into buf. */
const char *dsv4_shape_str(const dsv4_tensor *t, char *buf, size_t len);
/* Flat index -> multi-index "[i, j, k]" into buf. */
const char *dsv4_index_str(const dsv4_tensor *t, int64_t flat, char *buf, size_t len);

/* Element i decoded to double, whatever the dtype (fp4x2: i counts bytes and
 * the low nibble is returned; use dsv4_tensor_get_fp4 for both). */
double dsv4_tensor_get(const dsv4_tensor *t, int64_t i);

#define DSV4_MAX_TENSORS 24

typedef struct dsv4_tensors {
    int n;
    dsv4_tensor t[DSV4_MAX_TENSORS];
} dsv4_tensors;

dsv4_tensor *dsv4_tensors_find(dsv4_tensors *ts, const char *name);
const dsv4_tensor *dsv4_tensors_get(const dsv4_tensors *ts, const char *name);
/* Appends a tensor slot (allocated via dsv4_tensor_alloc). */
int dsv4_tensors_add(dsv4_tensors *ts, const char *name, dsv4_dtype dt, int ndim,
                     const int64_t *shape, dsv4_tensor **out, dsv4_status *st);
void dsv4_tensors_free(dsv4_tensors *ts);



/* Store v into element i, rounding to the tensor's dtype as the kernels do
 * (RNE; fp8 saturating; integers truncated toward zero and wrapped). */
void dsv4_tensor_set(dsv4_tensor *t, int64_t i, double v);
/* dsv4_tensor_set of v[i] into elements [0, n): an ideal stored in the
 * output's dtype. */
void dsv4_tensor_set_all(dsv4_tensor *t, const double *v, int64_t n);
#endif
