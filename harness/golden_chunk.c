#define _POSIX_C_SOURCE 200809L
/* golden_chunk.c - the chunks of a golden's datasets, decoded by our own
 * filter pipeline instead of H5Dread.
 *
 * Why: libhdf5's deflate filter grows its buffer until the stream ends, so
 * one small chunk of a small file can inflate to gigabytes before anything
 * checks it, and a chunk that inflates to fewer bytes than its shape makes
 * H5Dread copy past the end of its buffer.  Here every stage's output size
 * is known before it runs (the chunk's shape times the element size, plus 4
 * for a Fletcher32 checksum still attached), inflate writes into a buffer of
 * exactly that size, and a stream that would produce more or fewer bytes is
 * refused.  Only the filters schema 1 names are accepted (data/README.md):
 * deflate, shuffle and fletcher32, each at most once, in any order. */
#include "golden_h5.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#define MAX_STAGES 3
#define SIZE_UNKNOWN SIZE_MAX

typedef enum stage { STAGE_FLETCHER32, STAGE_DEFLATE, STAGE_SHUFFLE } stage;

/* The filters in write order and the size entering each when writing. */
typedef struct pipeline {
    int n;
    stage kind[MAX_STAGES];
    size_t in_size[MAX_STAGES]; /* SIZE_UNKNOWN after a deflate */
    size_t chunk_bytes;         /* a whole chunk, unfiltered */
    size_t stored_min, stored_max;
    size_t work;                /* bytes of each work buffer */
} pipeline;

static int failf(const dsv4_h5_chunked *c, dsv4_status *st, const char *fmt, const char *detail)
{
    return dsv4_fail(st, DSV4_EINPUT, "%s:%s: %s%s", c->path, c->where, fmt, detail);
}

/* The most a deflate stream of n bytes can take (zlib's compressBound,
 * which holds for every level), with room for other encoders' headers. */
static size_t deflate_bound(size_t n) { return n + (n >> 12) + (n >> 14) + (n >> 25) + 13 + 64; }

static int parse_pipeline(const dsv4_h5_chunked *c, size_t chunk_bytes, pipeline *p, dsv4_status *st)
{
    int nf = H5Pget_nfilters(c->dcpl);
    if (nf < 0 || nf > MAX_STAGES)
        return failf(c, st, "unreadable filter pipeline or more than 3 filters (schema 1: deflate, "
                     "shuffle, fletcher32)", "");
    memset(p, 0, sizeof *p);
    p->n = nf;
    p->chunk_bytes = chunk_bytes;
    int seen[3] = {0, 0, 0}, after_deflate_checksums = 0;
    size_t size = chunk_bytes;
    for (int k = 0; k < nf; k++) {
        unsigned flags = 0, cd[8] = {0};
        size_t ncd = 8;
        char name[64] = "";
        H5Z_filter_t id = H5Pget_filter2(c->dcpl, (unsigned)k, &flags, &ncd, cd, sizeof name, name, NULL);
        char what[160];
        if (id == H5Z_FILTER_FLETCHER32) {
            p->kind[k] = STAGE_FLETCHER32;
        } else if (id == H5Z_FILTER_DEFLATE) {
            p->kind[k] = STAGE_DEFLATE;
        } else if (id == H5Z_FILTER_SHUFFLE) {
            p->kind[k] = STAGE_SHUFFLE;
            if (ncd < 1 || cd[0] != c->esize) {
                snprintf(what, sizeof what, " (%u-byte elements; the data has %zu-byte ones)",
                         ncd ? cd[0] : 0, c->esize);
                return failf(c, st, "shuffle filter set up for another element size", what);
            }
        } else {
            snprintf(what, sizeof what, "filter %d (%.*s) is not one schema 1 allows (deflate/gzip, shuffle, "
                     "fletcher32)", (int)id, 60, name);
            return failf(c, st, what, "");
        }
        if (seen[p->kind[k]]++)
            return failf(c, st, "a filter appears twice in the pipeline", "");
        p->in_size[k] = size;
        if (p->kind[k] == STAGE_FLETCHER32) {
            if (size != SIZE_UNKNOWN)
                size += 4;
            else
                after_deflate_checksums++;
        } else if (p->kind[k] == STAGE_DEFLATE) {
            p->stored_max = deflate_bound(size);
            size = SIZE_UNKNOWN;
        }
    }
    if (!seen[STAGE_FLETCHER32])
        return failf(c, st, "no Fletcher32 checksum filter (schema 1 wants chunked datasets with "
                     "fletcher32=True)", "");
    if (size != SIZE_UNKNOWN) {
        p->stored_min = p->stored_max = size; /* no deflate: sizes are exact */
    } else {
        p->stored_min = 4 * (size_t)after_deflate_checksums + 1;
        p->stored_max += 4 * (size_t)after_deflate_checksums;
    }
    p->work = p->stored_max > chunk_bytes + 8 ? p->stored_max : chunk_bytes + 8;
    return DSV4_OK;
}

uint32_t dsv4_h5_fletcher32(const uint8_t *p, size_t n)
{
    uint32_t s1 = 0, s2 = 0;
    for (size_t words = n / 2; words > 0;) {
        size_t block = words < 360 ? words : 360;
        words -= block;
        for (; block > 0; block--, p += 2) {
            s1 += (uint32_t)p[0] << 8 | p[1];
            s2 += s1;
        }
        s1 = (s1 & 0xffff) + (s1 >> 16);
        s2 = (s2 & 0xffff) + (s2 >> 16);
    }
    if (n & 1) {
        s1 += (uint32_t)p[0] << 8;
        s2 += s1;
        s1 = (s1 & 0xffff) + (s1 >> 16);
        s2 = (s2 & 0xffff) + (s2 >> 16);
    }
    s1 = (s1 & 0xffff) + (s1 >> 16);
    s2 = (s2 & 0xffff) + (s2 >> 16);
    return s2 << 16 | s1;
}

typedef struct chunk_at {
    const dsv4_h5_chunked *c;
    unsigned long long index; /* in the grid, row-major */
} chunk_at;

static int chunk_fail(const chunk_at *a, dsv4_status *st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int chunk_fail(const chunk_at *a, dsv4_status *st, const char *fmt, ...)
{
    char why[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    return dsv4_fail(st, DSV4_EINPUT, "%s:%s: chunk %llu %s", a->c->path, a->c->where, a->index, why);
}

/* Inflates n bytes into exactly want bytes of out. */
static int inflate_exact(const chunk_at *a, const uint8_t *in, size_t n, uint8_t *out, size_t want,
                         dsv4_status *st)
{
    if (n > UINT_MAX || want > UINT_MAX)
        return chunk_fail(a, st, "is larger than a chunk can be (4 GiB)");
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit(&z) != Z_OK)
        return dsv4_fail(st, DSV4_ERUNTIME, "%s:%s: zlib cannot start: out of memory", a->c->path,
                         a->c->where);
    z.next_in = (Bytef *)in;
    z.avail_in = (uInt)n;
    z.next_out = out;
    z.avail_out = (uInt)want;
    int ret = inflate(&z, Z_FINISH);
    int rc = DSV4_OK;
    if (ret != Z_STREAM_END && z.avail_out == 0) {
        /* Full: the stream must end without one more byte. */
        uint8_t probe;
        z.next_out = &probe;
        z.avail_out = 1;
        ret = inflate(&z, Z_FINISH);
        if (z.total_out > want)
            rc = chunk_fail(a, st, "inflates to more than the %zu bytes its shape declares (a "
                            "decompression bomb or corrupt data)", want);
    }
    if (!rc && ret != Z_STREAM_END)
        rc = chunk_fail(a, st, "is not a complete deflate stream (%s; corrupt data)",
                        z.msg ? z.msg : ret == Z_BUF_ERROR ? "it ends early" : "zlib error");
    else if (!rc && z.total_out != want)
        rc = chunk_fail(a, st, "inflates to %lu bytes, but its shape declares %zu (corrupt data)",
                        (unsigned long)z.total_out, want);
    else if (!rc && z.avail_in != 0)
        rc = chunk_fail(a, st, "has %u bytes after the end of its deflate stream (corrupt data)", z.avail_in);
    inflateEnd(&z);
    return rc;
}

/* HDF5's shuffle undone: byte j of element i was stored at j*count + i;
 * the n % size bytes that make no whole element stay at the end. */
static void unshuffle(const uint8_t *in, size_t n, size_t size, uint8_t *out)
{
    size_t count = n / size;
    if (size < 2 || count < 2) {
        memcpy(out, in, n);
        return;
    }
    for (size_t j = 0; j < size; j++)
        for (size_t i = 0; i < count; i++)
            out[i * size + j] = in[j * count + i];
    memcpy(out + count * size, in + count * size, n - count * size);
}

/* Undoes the pipeline on one stored chunk (raw, n bytes); *res points at
 * the chunk_bytes of unfiltered data, in one of the two work buffers. */
static int decode(const chunk_at *a, const pipeline *p, const uint8_t *raw, size_t n, uint8_t *work[2],
                  const uint8_t **res, dsv4_status *st)
{
    const uint8_t *cur = raw;
    size_t len = n;
    int next = 0, rc = DSV4_OK;
    for (int k = p->n - 1; k >= 0 && !rc; k--) {
        uint8_t *dst = work[next];
        switch (p->kind[k]) {
        case STAGE_FLETCHER32: {
            if (len < 4)
                return chunk_fail(a, st, "is %zu bytes, too few for its Fletcher32 checksum (corrupt data)", len);
            len -= 4;
            uint32_t stored = (uint32_t)cur[len] | (uint32_t)cur[len + 1] << 8 | (uint32_t)cur[len + 2] << 16 |
                              (uint32_t)cur[len + 3] << 24;
            if (dsv4_h5_fletcher32(cur, len) != stored)
                return chunk_fail(a, st, "fails its Fletcher32 checksum (corrupt data)");
            continue;
        }
        case STAGE_DEFLATE:
            rc = inflate_exact(a, cur, len, dst, p->in_size[k], st);
            len = p->in_size[k];
            break;
        case STAGE_SHUFFLE:
            unshuffle(cur, len, a->c->esize, dst);
            break;
        }
        cur = dst;
        next ^= 1;
    }
    if (!rc && len != p->chunk_bytes)
        rc = chunk_fail(a, st, "decodes to %zu bytes, but its shape declares %zu (corrupt data)", len,
                        p->chunk_bytes);
    *res = cur;
    return rc;
}

/* Copies the part of a decoded chunk (dims cdim, at off) inside the
 * dataset into the row-major output. */
static void scatter(const dsv4_h5_chunked *c, const hsize_t *cdim, const hsize_t *off, const uint8_t *chunk)
{
    int nd = c->ndim;
    size_t es = c->esize;
    hsize_t valid[DSV4_MAX_DIMS], idx[DSV4_MAX_DIMS] = {0};
    for (int k = 0; k < nd; k++) {
        hsize_t left = (hsize_t)c->shape[k] - off[k];
        valid[k] = cdim[k] < left ? cdim[k] : left;
    }
    for (;;) {
        size_t src = 0, dst = 0;
        for (int k = 0; k < nd; k++) {
            src = src * cdim[k] + (k < nd - 1 ? idx[k] : 0);
            dst = dst * (size_t)c->shape[k] + (size_t)(off[k] + (k < nd - 1 ? idx[k] : 0));
        }
        memcpy((uint8_t *)c->out + dst * es, chunk + src * es, (size_t)valid[nd - 1] * es);
        int k = nd - 2;
        for (; k >= 0 && ++idx[k] == valid[k]; k--)
            idx[k] = 0;
        if (k < 0)
            return;
    }
}

/* The chunk shape: one per dim, none wider than its dimension (HDF5 never
 * writes that for a fixed-size dataset, so it is a corrupt size). */
static int chunk_dims(const dsv4_h5_chunked *c, hsize_t *cdim, hsize_t *grid, unsigned long long *count,
                      size_t *chunk_bytes, dsv4_status *st)
{
    hsize_t dims[H5S_MAX_RANK];
    if (H5Pget_chunk(c->dcpl, H5S_MAX_RANK, dims) != c->ndim)
        return failf(c, st, "bad chunk shape", "");
    unsigned opts = 0;
    if (H5Pget_chunk_opts(c->dcpl, &opts) < 0 || (opts & H5D_CHUNK_DONT_FILTER_PARTIAL_CHUNKS))
        return failf(c, st, "edge chunks stored without filters (no Fletcher32 on them)", "");
    size_t elems = 1;
    *count = 1;
    for (int k = 0; k < c->ndim; k++) {
        cdim[k] = dims[k];
        if (cdim[k] == 0 || cdim[k] > (hsize_t)c->shape[k])
            return failf(c, st, "bad chunk shape", "");
        grid[k] = ((hsize_t)c->shape[k] + cdim[k] - 1) / cdim[k];
        *count *= grid[k];
        elems *= (size_t)cdim[k]; /* <= the dataset's elements: no overflow */
    }
    *chunk_bytes = elems * c->esize;
    return DSV4_OK;
}

/* Where chunk `a` is stored, checked: present, every filter applied, a
 * stored size the pipeline allows, inside the file. */
static int locate_chunk(const chunk_at *a, const pipeline *p, const hsize_t *off, hsize_t fsize, hsize_t *size,
                        dsv4_status *st)
{
    unsigned mask = ~0u;
    haddr_t addr = HADDR_UNDEF;
    *size = 0;
    if (H5Dget_chunk_info_by_coord(a->c->dset, off, &mask, &addr, size) < 0 || addr == HADDR_UNDEF)
        return chunk_fail(a, st, "is missing (corrupt or partly written)");
    if (mask != 0)
        return chunk_fail(a, st, "was stored with filters skipped (filter mask 0x%x; corrupt data)", mask);
    if (*size < p->stored_min || *size > p->stored_max)
        return chunk_fail(a, st, "is stored in %llu bytes; its %zu bytes of data allow %zu to %zu (corrupt data)",
                          (unsigned long long)*size, p->chunk_bytes, p->stored_min, p->stored_max);
    if (*size > fsize || addr > fsize - *size)
        return chunk_fail(a, st, "of %llu bytes at %llu lies past the end of the file (corrupt or truncated)",
                          (unsigned long long)*size, (unsigned long long)addr);
    return DSV4_OK;
}

/* Every chunk of the grid, and no more: the chunk index has no checksum of
 * its own, and a lost chunk would read back as fill values. */
static int count_chunks(const dsv4_h5_chunked *c, unsigned long long expect, dsv4_status *st)
{
    hsize_t have = 0;
    /* 1.10 mishandles H5S_ALL here; its docs say pass the dataset's space. */
    hid_t sp = H5Dget_space(c->dset);
    herr_t e = sp < 0 ? -1 : H5Dget_num_chunks(c->dset, sp, &have);
    dsv4_h5_close(sp, H5Sclose);
    if (e < 0 || have != expect) {
        char n[96];
        snprintf(n, sizeof n, " (%llu stored, %llu expected)", (unsigned long long)have, expect);
        return failf(c, st, "chunks missing or extra: corrupt or partly written", n);
    }
    return DSV4_OK;
}

static int read_grid(const dsv4_h5_chunked *c, const pipeline *p, const hsize_t *cdim, const hsize_t *grid,
                     unsigned long long count, uint8_t *raw, uint8_t *work[2], dsv4_status *st)
{
    hsize_t fsize = 0, idx[DSV4_MAX_DIMS] = {0}, off[DSV4_MAX_DIMS];
    if (H5Fget_filesize(c->file, &fsize) < 0)
        return dsv4_fail(st, DSV4_EINPUT, "%s: unreadable file size", c->path);
    for (unsigned long long n = 0; n < count; n++) {
        chunk_at a = {c, n};
        for (int k = 0; k < c->ndim; k++)
            off[k] = idx[k] * cdim[k];
        hsize_t size;
        int rc = locate_chunk(&a, p, off, fsize, &size, st);
        uint32_t mask = ~0u;
        if (!rc && (H5Dread_chunk(c->dset, H5P_DEFAULT, off, &mask, raw) < 0 || mask != 0)) {
            char eb[DSV4_H5_ERR_MAX];
            rc = chunk_fail(&a, st, "cannot be read (%s)", dsv4_h5_err(eb));
        }
        const uint8_t *data = NULL;
        if (!rc)
            rc = decode(&a, p, raw, (size_t)size, work, &data, st);
        if (rc)
            return rc;
        scatter(c, cdim, off, data);
        for (int k = c->ndim - 1; k >= 0 && ++idx[k] == grid[k]; k--)
            idx[k] = 0;
    }
    return DSV4_OK;
}

int dsv4_h5_read_chunked(const dsv4_h5_chunked *c, dsv4_status *st)
{
    const uint16_t one = 1;
    if (*(const uint8_t *)&one != 1)
        return dsv4_fail(st, DSV4_ERUNTIME, "%s:%s: the golden reader needs a little-endian host", c->path,
                         c->where);
    hsize_t cdim[DSV4_MAX_DIMS], grid[DSV4_MAX_DIMS];
    unsigned long long count = 0;
    size_t chunk_bytes = 0;
    pipeline p;
    int rc = chunk_dims(c, cdim, grid, &count, &chunk_bytes, st);
    if (!rc)
        rc = parse_pipeline(c, chunk_bytes, &p, st);
    if (!rc)
        rc = count_chunks(c, count, st);
    if (rc)
        return rc;
    /* The buffers are bounded by the chunk's declared size, itself at most
     * the dataset's size, which the memory limit has already allowed. */
    uint8_t *raw = malloc(p.stored_max), *work[2] = {malloc(p.work), malloc(p.work)};
    if (!raw || !work[0] || !work[1])
        rc = dsv4_fail(st, DSV4_ERUNTIME, "%s:%s: out of memory for a %zu-byte chunk", c->path, c->where,
                       chunk_bytes);
    else
        rc = read_grid(c, &p, cdim, grid, count, raw, work, st);
    free(raw);
    free(work[0]);
    free(work[1]);
    return rc;
}
