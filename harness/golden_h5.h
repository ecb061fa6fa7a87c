/* golden_h5.h - what the golden writer (golden.c), reader (golden_read.c),
 * chunk decoder (golden_chunk.c) and op check (golden_op.c) share.
 * Internal to the harness. */
#ifndef DSV4_GOLDEN_H5_H
#define DSV4_GOLDEN_H5_H

#include <stdio.h>

#include <hdf5.h>

#include "golden.h"

#define DSV4_FP4_PACKING "low_nibble_first"
#define DSV4_H5_ERR_MAX 200

static inline void dsv4_h5_close(hid_t id, herr_t (*fn)(hid_t))
{
    if (id >= 0)
        fn(id);
}

/* The most specific entry of HDF5's error stack (where the error was
 * detected); for a failed system call it carries errno's text. */
static inline herr_t dsv4_h5_err_walk(unsigned n, const H5E_error2_t *e, void *data)
{
    if (n == 0 && e->desc)
        snprintf(data, DSV4_H5_ERR_MAX, "%s", e->desc);
    return 0;
}

/* buf (DSV4_H5_ERR_MAX bytes) holds the reason, "unknown HDF5 error" when
 * the stack is empty. */
static inline const char *dsv4_h5_err(char *buf)
{
    snprintf(buf, DSV4_H5_ERR_MAX, "unknown HDF5 error");
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, dsv4_h5_err_walk, buf);
    return buf;
}

/* File storage type of each logical dtype (little-endian, no custom types). */
static inline hid_t dsv4_h5_file_type(dsv4_dtype dt)
{
    switch (dt) {
    case DSV4_F64: return H5T_IEEE_F64LE;
    case DSV4_F32: return H5T_IEEE_F32LE;
    case DSV4_BF16:
    case DSV4_F16: return H5T_STD_U16LE;
    case DSV4_I64: return H5T_STD_I64LE;
    case DSV4_I32: return H5T_STD_I32LE;
    default: return H5T_STD_U8LE;
    }
}

static inline hid_t dsv4_h5_mem_type(dsv4_dtype dt)
{
    switch (dt) {
    case DSV4_F64: return H5T_NATIVE_DOUBLE;
    case DSV4_F32: return H5T_NATIVE_FLOAT;
    case DSV4_BF16:
    case DSV4_F16: return H5T_NATIVE_UINT16;
    case DSV4_I64: return H5T_NATIVE_INT64;
    case DSV4_I32: return H5T_NATIVE_INT32;
    default: return H5T_NATIVE_UINT8;
    }
}

/* Non-zero when s[0..n) is well-formed UTF-8 (no overlong forms,
 * surrogates or code points past U+10FFFF) without a NUL byte. */
int dsv4_h5_utf8_ok(const unsigned char *s, size_t n);

/* One chunked dataset to decode: where it is (for messages) and what it
 * holds.  shape has ndim dims, none 0; out holds prod(shape) * esize bytes. */
typedef struct dsv4_h5_chunked {
    const char *path;  /* the file */
    const char *where; /* "/inputs/NAME" */
    hid_t file, dset, dcpl;
    int ndim;
    const int64_t *shape;
    size_t esize;
    void *out;
} dsv4_h5_chunked;

/* Reads every chunk of a chunked dataset through dsv4check's own copy of
 * the filter pipeline (Fletcher32, deflate, shuffle): each chunk's sizes are
 * checked against its declared shape before any byte is inflated, so no
 * chunk can make the reader allocate or write more than the dataset's size.
 * DSV4_EINPUT naming the file, the dataset and the chunk otherwise. */
int dsv4_h5_read_chunked(const dsv4_h5_chunked *c, dsv4_status *st);

/* Fletcher-32 as HDF5 computes it: big-endian 16-bit words (an odd last
 * byte is the high byte of a word), the two sums folded to 16 bits every
 * 360 words, and once more at the end. */
uint32_t dsv4_h5_fletcher32(const uint8_t *p, size_t n);

/* Writing (golden.c).  fill writes a file's contents into the open file f;
 * dsv4_h5_write_file builds the file in memory with the HDF5 1.8 formats,
 * writes it to a temporary file beside path, syncs it and renames it into
 * place (an existing path is kept unless force). */
typedef int (*dsv4_h5_fill_fn)(hid_t f, const void *arg, dsv4_status *st);
int dsv4_h5_write_file(const char *path, int force, dsv4_h5_fill_fn fill, const void *arg, dsv4_status *st);
/* One tensor as schema 1 stores it (chunked, Fletcher32, deflate; a dtype
 * attribute); messages name /gname/NAME. */
int dsv4_h5_write_tensor(hid_t grp, const char *gname, const dsv4_tensor *t, dsv4_status *st);
/* A fixed-length UTF-8 string attribute (value shorter than max); -1 on failure. */
int dsv4_h5_write_str_attr(hid_t loc, const char *name, const char *value, size_t max);
/* An int64 scalar attribute; -1 on failure. */
int dsv4_h5_write_int_attr(hid_t loc, const char *name, int64_t v);

/* Opens path read-only for a reader of untrusted files (golden_walk.c):
 * with fapl H5P_DEFAULT a regular, non-empty HDF5 file (else the core
 * driver's image), then a walk over every link: hard links only, each
 * object linked once, at most max_objects of them, datasets stored in the
 * file (no external storage, no virtual datasets).  kind ("golden",
 * "actuals file") names the file in messages.  DSV4_EINPUT naming the file
 * and the object; *file is closed again on failure. */
int dsv4_h5_open(const char *path, hid_t fapl, int max_objects, const char *kind, hid_t *file, dsv4_status *st);
int dsv4_h5_walk(const char *path, hid_t file, int max_objects, const char *kind, dsv4_status *st);
/* A core-driver file access list holding len bytes at buf (the fuzzers'
 * in-memory files); -1 on failure. */
int dsv4_h5_image_fapl(const void *buf, size_t len, hid_t *fapl);
/* Every dataset of /group (a top-level group) read as the golden reader
 * reads /inputs: dtype attribute matching the storage type, shapes within
 * the memory limit, chunked with Fletcher32 (scalars compact or
 * contiguous), decoded by golden_chunk.c.  Messages name path:/group/NAME. */
int dsv4_h5_read_group(const char *path, hid_t file, const char *group, dsv4_tensors *ts, dsv4_status *st);
/* An optional string attribute of loc into buf (untouched when absent),
 * read as golden attributes are (UTF-8, no NUL, shorter than max). */
int dsv4_h5_str_attr(const char *path, hid_t loc, const char *name, const char *where, char *buf, size_t max,
                     dsv4_status *st);
/* An optional integer scalar attribute of the root group (*v untouched
 * when absent). */
int dsv4_h5_int_attr(const char *path, hid_t file, const char *name, int64_t *v, dsv4_status *st);

/* The checks of a golden that need its op (golden_op.c); path for messages. */
int dsv4_golden_check_op(const char *path, const dsv4_golden *g, dsv4_status *st);

#endif
