#define _POSIX_C_SOURCE 200809L
/* golden.c - writing HDF5 golden files, schema 1 (data/README.md is the
 * spec); reading is golden_read.c.
 *
 * Integrity: every non-empty dataset is chunked and carries the Fletcher32
 * filter, so corrupt raw data fails its checksum.  Files are written with the
 * HDF5 1.8 object formats (libver bounds V18..V18) because those put a
 * checksum on the superblock, every object header (dataspace, datatype,
 * layout, filters, attributes, links) and the attribute/link heaps; with the
 * EARLIEST formats a flipped byte in a dims or byte-order field would change
 * the data silently.  The one structure left without a checksum, the v1
 * B-tree that indexes the chunks, is covered by checking on read that every
 * chunk of the grid is present, with all filters applied.
 *
 * A golden is built in memory and written, synced and renamed into place
 * by us (build_image, write_temp, publish), so every I/O error is ours to
 * report with its reason. */
#include "golden_h5.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <hdf5.h>

#include "version.h"

#define CHUNK_TARGET_BYTES ((size_t)64 << 10)
#define REPRO_NOTE "the implementation's outputs; /outputs holds the expected ones"

void dsv4_h5_quiet(void) { H5Eset_auto2(H5E_DEFAULT, NULL, NULL); }

/* A dataset or attribute name we can create without making a path. */
static int name_ok(const char *s, size_t max)
{
    size_t n = strnlen(s, max);
    return n > 0 && n < max && !strchr(s, '/') && strcmp(s, ".") != 0;
}

/* ---- writing ----------------------------------------------------------- */

static hid_t str_type(size_t len)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    if (t < 0)
        return t;
    /* Fixed length with the terminator; size 0 is not allowed. */
    if (H5Tset_size(t, len + 1) < 0 || H5Tset_strpad(t, H5T_STR_NULLTERM) < 0 ||
        H5Tset_cset(t, H5T_CSET_UTF8) < 0) {
        H5Tclose(t);
        return -1;
    }
    return t;
}

static int write_attr(hid_t loc, const char *name, hid_t ftype, hid_t mtype, hid_t space,
                      const void *buf, int skip_data)
{
    hid_t a = H5Acreate2(loc, name, ftype, space, H5P_DEFAULT, H5P_DEFAULT);
    if (a < 0)
        return -1;
    herr_t e = skip_data ? 0 : H5Awrite(a, mtype, buf);
    herr_t c = H5Aclose(a);
    return (e < 0 || c < 0) ? -1 : 0;
}

/* -1: HDF5 failed; NOT_TEXT: value is not UTF-8 ending inside its max
 * bytes (what the reader would refuse). */
#define NOT_TEXT (-2)
int dsv4_h5_write_str_attr(hid_t loc, const char *name, const char *value, size_t max)
{
    size_t len = strnlen(value, max);
    if (len >= max || !dsv4_h5_utf8_ok((const unsigned char *)value, len))
        return NOT_TEXT;
    hid_t t = str_type(len), s = H5Screate(H5S_SCALAR);
    int rc = (t < 0 || s < 0) ? -1 : write_attr(loc, name, t, t, s, value, 0);
    dsv4_h5_close(s, H5Sclose);
    dsv4_h5_close(t, H5Tclose);
    return rc;
}

static int write_scalar_attr(hid_t loc, const char *name, hid_t ftype, hid_t mtype,
                             const void *v)
{
    hid_t s = H5Screate(H5S_SCALAR);
    int rc = s < 0 ? -1 : write_attr(loc, name, ftype, mtype, s, v, 0);
    dsv4_h5_close(s, H5Sclose);
    return rc;
}

int dsv4_h5_write_int_attr(hid_t loc, const char *name, int64_t v)
{
    return write_scalar_attr(loc, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &v);
}

static int write_list_attr(hid_t loc, const char *name, int n, const int64_t *v)
{
    hsize_t dim = (hsize_t)n;
    hid_t s = H5Screate_simple(1, &dim, NULL);
    int rc = s < 0 ? -1 : write_attr(loc, name, H5T_STD_I64LE, H5T_NATIVE_INT64, s, v, n == 0);
    dsv4_h5_close(s, H5Sclose);
    return rc;
}

static int write_root_attrs(hid_t f, const dsv4_golden *g, dsv4_status *st)
{
    int64_t schema = g->schema ? g->schema : DSV4_SCHEMA_VERSION;
    int64_t seed;
    memcpy(&seed, &g->seed, sizeof seed); /* uint64 bit pattern as int64 */
    struct { const char *name; const char *v; size_t max; } s[] = {
        {"op", g->op, sizeof g->op},
        {"variant", g->variant, sizeof g->variant},
        {"case", g->case_name, sizeof g->case_name},
        {"generator", g->generator, sizeof g->generator},
        {"created", g->created, sizeof g->created},
    };
    char eb[DSV4_H5_ERR_MAX];
    if (write_scalar_attr(f, "dsv4check_schema", H5T_STD_I64LE, H5T_NATIVE_INT64, &schema) < 0 ||
        write_scalar_attr(f, "seed", H5T_STD_I64LE, H5T_NATIVE_INT64, &seed) < 0)
        return dsv4_fail(st, DSV4_ERUNTIME, "cannot write the root attributes (%s)", dsv4_h5_err(eb));
    for (size_t k = 0; k < sizeof s / sizeof s[0]; k++) {
        int e = dsv4_h5_write_str_attr(f, s[k].name, s[k].v, s[k].max);
        if (e == NOT_TEXT)
            return dsv4_fail(st, DSV4_EINPUT, "root attribute '%s' is not UTF-8 text of at most %zu bytes",
                             s[k].name, s[k].max - 1);
        if (e < 0)
            return dsv4_fail(st, DSV4_ERUNTIME, "cannot write root attribute '%s' (%s)", s[k].name,
                             dsv4_h5_err(eb));
    }
    return DSV4_OK;
}

static int write_param(hid_t grp, const dsv4_param *p, dsv4_status *st)
{
    int rc = -1;
    if (!name_ok(p->name, sizeof p->name))
        return dsv4_fail(st, DSV4_EINPUT, "bad parameter name '%.*s'", (int)sizeof p->name,
                         p->name);
    switch (p->type) {
    case DSV4_P_INT:
        rc = write_scalar_attr(grp, p->name, H5T_STD_I64LE, H5T_NATIVE_INT64, &p->i);
        break;
    case DSV4_P_FLOAT:
        rc = write_scalar_attr(grp, p->name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &p->f);
        break;
    case DSV4_P_STR: rc = dsv4_h5_write_str_attr(grp, p->name, p->s, sizeof p->s); break;
    case DSV4_P_INTLIST:
        if (p->n < 0 || p->n > DSV4_PARAM_LIST_MAX)
            return dsv4_fail(st, DSV4_EINPUT, "parameter '%s': list length %d", p->name, p->n);
        rc = write_list_attr(grp, p->name, p->n, p->list);
        break;
    }
    char eb[DSV4_H5_ERR_MAX];
    if (rc == NOT_TEXT)
        return dsv4_fail(st, DSV4_EINPUT, "/params/%s is not UTF-8 text of at most %zu bytes", p->name,
                         sizeof p->s - 1);
    return rc < 0 ? dsv4_fail(st, DSV4_ERUNTIME, "cannot write /params/%s (%s)", p->name, dsv4_h5_err(eb))
                  : DSV4_OK;
}

/* Chunk shape of about CHUNK_TARGET_BYTES: whole trailing dims while they
 * fit, then as many rows of the first dim that does not as fit. */
static void chunk_shape(const dsv4_tensor *t, size_t esize, hsize_t *chunk)
{
    size_t inner = esize;
    int d = t->ndim - 1;
    for (; d >= 0; d--) {
        size_t n = (size_t)t->shape[d];
        if (inner * n > CHUNK_TARGET_BYTES)
            break;
        chunk[d] = n;
        inner *= n;
    }
    if (d < 0)
        return;
    size_t rows = CHUNK_TARGET_BYTES / inner;
    chunk[d] = rows ? rows : 1;
    for (d--; d >= 0; d--)
        chunk[d] = 1;
}

static hid_t make_dcpl(const dsv4_tensor *t, int64_t numel)
{
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    if (dcpl < 0)
        return -1;
    herr_t e = 0;
    size_t esize = dsv4_dtype_size(t->dtype);
    if (t->ndim == 0) {
        /* A scalar cannot be chunked; compact keeps its value inside the
         * checksummed object header. */
        e = H5Pset_layout(dcpl, H5D_COMPACT);
    } else if (numel == 0) {
        /* An empty dataset cannot be chunked with filters: contiguous. */
        e = H5Pset_layout(dcpl, H5D_CONTIGUOUS);
    } else {
        hsize_t chunk[DSV4_MAX_DIMS];
        chunk_shape(t, esize, chunk);
        if (H5Pset_chunk(dcpl, t->ndim, chunk) < 0 ||
            (esize > 1 && H5Pset_shuffle(dcpl) < 0) || H5Pset_deflate(dcpl, 4) < 0 ||
            H5Pset_fletcher32(dcpl) < 0)
            e = -1;
    }
    if (e < 0) {
        H5Pclose(dcpl);
        return -1;
    }
    return dcpl;
}

static int check_tensor(const dsv4_tensor *t, dsv4_status *st)
{
    if (!name_ok(t->name, sizeof t->name))
        return dsv4_fail(st, DSV4_EINPUT, "bad tensor name '%.*s'", (int)sizeof t->name, t->name);
    if (dsv4_dtype_size(t->dtype) == 0 || t->ndim < 0 || t->ndim > DSV4_MAX_DIMS)
        return dsv4_fail(st, DSV4_EINPUT, "tensor '%s': bad dtype or rank", t->name);
    if (t->output_dtype != DSV4_DT_NONE && dsv4_dtype_size(t->output_dtype) == 0)
        return dsv4_fail(st, DSV4_EINPUT, "tensor '%s': bad output_dtype", t->name);
    uint64_t n = 1;
    for (int d = 0; d < t->ndim; d++) {
        if (t->shape[d] < 0 || (t->shape[d] && n > UINT64_MAX / (uint64_t)t->shape[d]))
            return dsv4_fail(st, DSV4_EINPUT, "tensor '%s': bad shape", t->name);
        n *= (uint64_t)t->shape[d];
    }
    if (n > SIZE_MAX / dsv4_dtype_size(t->dtype) ||
        n * dsv4_dtype_size(t->dtype) != t->nbytes || (t->nbytes && !t->data))
        return dsv4_fail(st, DSV4_EINPUT, "tensor '%s': %zu bytes do not match its shape",
                         t->name, t->nbytes);
    return DSV4_OK;
}

static int write_tensor_attrs(hid_t d, const dsv4_tensor *t)
{
    if (dsv4_h5_write_str_attr(d, "dtype", dsv4_dtype_name(t->dtype), 64) < 0)
        return -1;
    if (t->output_dtype != DSV4_DT_NONE &&
        dsv4_h5_write_str_attr(d, "output_dtype", dsv4_dtype_name(t->output_dtype), 64) < 0)
        return -1;
    if (t->dtype == DSV4_F4E2M1X2 && dsv4_h5_write_str_attr(d, "packing", DSV4_FP4_PACKING, 64) < 0)
        return -1;
    return 0;
}

int dsv4_h5_write_tensor(hid_t grp, const char *gname, const dsv4_tensor *t, dsv4_status *st)
{
    int rc = check_tensor(t, st);
    if (rc)
        return rc;
    hsize_t dims[DSV4_MAX_DIMS];
    for (int d = 0; d < t->ndim; d++)
        dims[d] = (hsize_t)t->shape[d];
    int64_t numel = dsv4_tensor_numel(t);
    hid_t space = t->ndim ? H5Screate_simple(t->ndim, dims, NULL) : H5Screate(H5S_SCALAR);
    hid_t dcpl = make_dcpl(t, numel), d = -1;
    if (space >= 0 && dcpl >= 0)
        d = H5Dcreate2(grp, t->name, dsv4_h5_file_type(t->dtype), space, H5P_DEFAULT, dcpl,
                       H5P_DEFAULT);
    int bad = d < 0;
    if (!bad && numel > 0)
        bad = H5Dwrite(d, dsv4_h5_mem_type(t->dtype), H5S_ALL, H5S_ALL, H5P_DEFAULT, t->data) < 0;
    if (!bad)
        bad = write_tensor_attrs(d, t) < 0;
    if (d >= 0 && H5Dclose(d) < 0)
        bad = 1;
    dsv4_h5_close(dcpl, H5Pclose);
    dsv4_h5_close(space, H5Sclose);
    if (bad) {
        char eb[DSV4_H5_ERR_MAX];
        return dsv4_fail(st, DSV4_ERUNTIME, "cannot write /%s/%s (%s)", gname, t->name,
                         dsv4_h5_err(eb));
    }
    return DSV4_OK;
}

static int write_group(hid_t f, const char *gname, const dsv4_tensors *ts, dsv4_status *st)
{
    char eb[DSV4_H5_ERR_MAX];
    hid_t g = H5Gcreate2(f, gname, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (g < 0)
        return dsv4_fail(st, DSV4_ERUNTIME, "cannot create /%s (%s)", gname, dsv4_h5_err(eb));
    int rc = DSV4_OK;
    for (int k = 0; k < ts->n && !rc; k++)
        rc = dsv4_h5_write_tensor(g, gname, &ts->t[k], st);
    if (H5Gclose(g) < 0 && !rc)
        rc = dsv4_fail(st, DSV4_ERUNTIME, "cannot close /%s (%s)", gname, dsv4_h5_err(eb));
    return rc;
}

static int write_params(hid_t f, const dsv4_params *ps, dsv4_status *st)
{
    char eb[DSV4_H5_ERR_MAX];
    hid_t g = H5Gcreate2(f, "params", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (g < 0)
        return dsv4_fail(st, DSV4_ERUNTIME, "cannot create /params (%s)", dsv4_h5_err(eb));
    int rc = DSV4_OK;
    if (ps->n < 0 || ps->n > DSV4_MAX_PARAMS)
        rc = dsv4_fail(st, DSV4_EINPUT, "bad parameter count %d", ps->n);
    for (int k = 0; k < ps->n && !rc; k++)
        rc = write_param(g, &ps->p[k], st);
    if (H5Gclose(g) < 0 && !rc)
        rc = dsv4_fail(st, DSV4_ERUNTIME, "cannot close /params (%s)", dsv4_h5_err(eb));
    return rc;
}

/* A repro file's /actual: what the implementation produced, beside the
 * expected /outputs, for people and h5py. */
static int write_actual(hid_t f, const dsv4_tensors *actual, dsv4_status *st)
{
    int rc = write_group(f, "actual", actual, st);
    if (rc)
        return rc;
    hid_t g = H5Gopen2(f, "actual", H5P_DEFAULT);
    int bad = g < 0 || dsv4_h5_write_str_attr(g, "note", REPRO_NOTE, sizeof REPRO_NOTE) < 0;
    if (g >= 0 && H5Gclose(g) < 0)
        bad = 1;
    char eb[DSV4_H5_ERR_MAX];
    return bad ? dsv4_fail(st, DSV4_ERUNTIME, "cannot write the note of /actual (%s)", dsv4_h5_err(eb))
               : DSV4_OK;
}

/* What a golden (or a repro file, with actual) holds. */
typedef struct golden_contents {
    const dsv4_golden *g;
    const dsv4_tensors *actual;
} golden_contents;

static int write_contents(hid_t f, const void *arg, dsv4_status *st)
{
    const dsv4_golden *g = ((const golden_contents *)arg)->g;
    const dsv4_tensors *actual = ((const golden_contents *)arg)->actual;
    int rc = write_root_attrs(f, g, st);
    if (!rc)
        rc = write_params(f, &g->params, st);
    if (!rc)
        rc = write_group(f, "inputs", &g->inputs, st);
    if (!rc)
        rc = write_group(f, "outputs", &g->outputs, st);
    if (!rc && actual)
        rc = write_actual(f, actual, st);
    return rc;
}

/* The core driver's buffer, kept past H5Fclose (file image callbacks):
 * the bytes the file would have on disk once closed.  (H5Fget_file_image
 * on the open file gives a superblock with a wrong checksum in 1.10.8.) */
typedef struct mem_image {
    void *p;
    size_t size;
    int kept;
    /* Every other buffer handed to libhdf5 through these callbacks and not
     * given back: freed after H5Fclose (some libhdf5 paths allocate a
     * buffer through the callbacks and drop it without the free callback). */
    void *extra[8];
    int n_extra;
} mem_image;

static void image_forget(mem_image *m, const void *ptr)
{
    for (int k = 0; k < m->n_extra; k++)
        if (m->extra[k] == ptr) {
            m->extra[k] = m->extra[--m->n_extra];
            return;
        }
}

static void *image_malloc(size_t size, H5FD_file_image_op_t op, void *udata)
{
    (void)op;
    mem_image *m = udata;
    void *q = malloc(size ? size : 1);
    if (!q)
        return NULL;
    if (m->p) { /* a second buffer: remember the first, which may be dropped */
        if (m->n_extra == (int)(sizeof m->extra / sizeof m->extra[0])) {
            free(q);
            return NULL;
        }
        m->extra[m->n_extra++] = m->p;
    }
    m->p = q;
    m->size = size;
    return q;
}

static void *image_memcpy(void *dst, const void *src, size_t size, H5FD_file_image_op_t op, void *udata)
{
    (void)op;
    (void)udata;
    return memcpy(dst, src, size);
}

static void *image_realloc(void *ptr, size_t size, H5FD_file_image_op_t op, void *udata)
{
    (void)op;
    mem_image *m = udata;
    /* Compare and forget before the call: ptr is dead once realloc moves it. */
    const int was_main = ptr == m->p;
    image_forget(m, ptr);
    void *q = realloc(ptr, size ? size : 1);
    if (q) {
        if (!was_main && m->p && m->n_extra < (int)(sizeof m->extra / sizeof m->extra[0]))
            m->extra[m->n_extra++] = m->p;
        m->p = q;
        m->size = size;
    }
    return q;
}

static herr_t image_free(void *ptr, H5FD_file_image_op_t op, void *udata)
{
    mem_image *m = udata;
    if (op == H5FD_FILE_IMAGE_OP_FILE_CLOSE && ptr == m->p) {
        m->kept = 1;
        return 0;
    }
    if (ptr == m->p)
        m->p = NULL, m->size = 0;
    image_forget(m, ptr);
    free(ptr);
    return 0;
}

static void *image_udata_copy(void *udata) { return udata; }
static herr_t image_udata_free(void *udata)
{
    (void)udata;
    return 0;
}

/* The file's length: the end-of-file address of its version-2 superblock
 * (what libver v18 writes), 0 if the buffer is not that. */
static size_t image_length(const mem_image *m)
{
    static const unsigned char sig[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
    const unsigned char *b = m->p;
    if (!b || m->size < 48 || memcmp(b, sig, 8) != 0 || b[8] != 2 || b[9] != 8)
        return 0;
    uint64_t eof = 0;
    for (int k = 7; k >= 0; k--)
        eof = eof << 8 | b[28 + k];
    return eof >= 48 && eof <= m->size ? (size_t)eof : 0;
}

/* The whole file built in memory (HDF5's core driver, no backing store):
 * libhdf5 then never does file I/O, so a full disk cannot leave it with a
 * half-closed file (1.10.8 crashes at exit after a failed H5Fclose), and the
 * write's errors are ours to report with errno's reason.  *image is
 * malloc'd. */
static int build_image(const char *name, dsv4_h5_fill_fn fill, const void *arg, void **image, size_t *len,
                       dsv4_status *st)
{
    char eb[DSV4_H5_ERR_MAX];
    mem_image m = {NULL, 0, 0, {NULL}, 0};
    H5FD_file_image_callbacks_t cb = {image_malloc, image_memcpy, image_realloc, image_free,
                                      image_udata_copy, image_udata_free, &m};
    *image = NULL;
    *len = 0;
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl < 0 || H5Pset_libver_bounds(fapl, H5F_LIBVER_V18, H5F_LIBVER_V18) < 0 ||
        H5Pset_fapl_core(fapl, (size_t)1 << 20, 0) < 0 || H5Pset_file_image_callbacks(fapl, &cb) < 0) {
        dsv4_h5_close(fapl, H5Pclose);
        return dsv4_fail(st, DSV4_ERUNTIME, "cannot set up HDF5 file access (%s)", dsv4_h5_err(eb));
    }
    hid_t f = H5Fcreate(name, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    H5Pclose(fapl);
    if (f < 0)
        return dsv4_fail(st, DSV4_ERUNTIME, "cannot create an HDF5 file in memory (%s)", dsv4_h5_err(eb));
    int rc = fill(f, arg, st);
    if (H5Fclose(f) < 0 && !rc)
        rc = dsv4_fail(st, DSV4_ERUNTIME, "cannot close the in-memory HDF5 file (%s)", dsv4_h5_err(eb));
    for (int k = 0; k < m.n_extra; k++)
        free(m.extra[k]);
    m.n_extra = 0;
    if (!rc && (!m.kept || !(*len = image_length(&m))))
        rc = dsv4_fail(st, DSV4_ERUNTIME, "the in-memory HDF5 file is not a version-2 superblock file");
    if (rc) {
        free(m.p);
        *len = 0;
    } else {
        *image = m.p;
    }
    return rc;
}

/* ---- the temporary file, and signals ------------------------------------ */

/* The temporary file being written, for the signal handler (set only while
 * armed is 0, so the handler never sees it half-written). */
static char armed_path[4096];
static volatile sig_atomic_t armed;

static void arm_temp(const char *tmp)
{
    if (strlen(tmp) >= sizeof armed_path)
        return; /* too long to remember: an interrupt leaves it, the next gen removes it */
    memcpy(armed_path, tmp, strlen(tmp) + 1);
    atomic_signal_fence(memory_order_seq_cst);
    armed = 1;
}

static void disarm_temp(void)
{
    armed = 0;
    atomic_signal_fence(memory_order_seq_cst);
}

static void on_fatal_signal(int sig)
{
    if (armed)
        unlink(armed_path);
    raise(sig); /* SA_RESETHAND: the default action, once this returns */
}

void dsv4_golden_catch_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_fatal_signal;
    sa.sa_flags = SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t k = 0; k < sizeof sigs / sizeof sigs[0]; k++)
        sigaction(sigs[k], &sa, NULL);
    /* Over a file-size limit write() then fails with EFBIG, which we
     * report, instead of the process being killed. */
    signal(SIGXFSZ, SIG_IGN);
}

/* "<dir>/.<base>.tmp.<pid>" in the target's own directory so that rename()
 * stays within one file system. */
static char *temp_path(const char *path)
{
    const char *slash = strrchr(path, '/');
    size_t dirlen = slash ? (size_t)(slash - path) + 1 : 0;
    size_t len = strlen(path) + 40;
    char *tmp = malloc(len);
    if (tmp)
        snprintf(tmp, len, "%.*s.%s.tmp.%ld", (int)dirlen, path, path + dirlen, (long)getpid());
    return tmp;
}

/* Writes the image to tmp and syncs it: the data must be on disk before
 * the rename makes it the golden. */
static int write_temp(const char *tmp, const void *image, size_t len, dsv4_status *st)
{
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0)
        return dsv4_fail(st, DSV4_EINPUT, "cannot create %s: %s", tmp, strerror(errno));
    const char *p = image;
    int rc = DSV4_OK;
    while (len > 0 && !rc) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            rc = dsv4_fail(st, DSV4_ERUNTIME, "cannot write %s: %s", tmp, w < 0 ? strerror(errno) : "no progress");
        else
            p += w, len -= (size_t)w;
    }
    if (!rc && fdatasync(fd) < 0)
        rc = dsv4_fail(st, DSV4_ERUNTIME, "cannot sync %s: %s", tmp, strerror(errno));
    if (close(fd) < 0 && !rc)
        rc = dsv4_fail(st, DSV4_ERUNTIME, "cannot close %s: %s", tmp, strerror(errno));
    return rc;
}

/* Without force, link() refuses atomically if someone created the target
 * since the check; where hard links are unsupported, fall back to rename. */
static int publish(const char *tmp, const char *path, int force, dsv4_status *st)
{
    if (!force) {
        if (link(tmp, path) == 0) {
            unlink(tmp);
            return DSV4_OK;
        }
        if (errno == EEXIST)
            return dsv4_fail(st, DSV4_EINPUT, "%s exists (use --force to overwrite)", path);
        struct stat sb;
        if (stat(path, &sb) == 0)
            return dsv4_fail(st, DSV4_EINPUT, "%s exists (use --force to overwrite)", path);
    }
    if (rename(tmp, path) != 0)
        return dsv4_fail(st, DSV4_EINPUT, "cannot rename %s to %s: %s", tmp, path,
                         strerror(errno));
    return DSV4_OK;
}

int dsv4_h5_write_file(const char *path, int force, dsv4_h5_fill_fn fill, const void *arg, dsv4_status *st)
{
    dsv4_h5_quiet();
    struct stat sb;
    if (!force && stat(path, &sb) == 0)
        return dsv4_fail(st, DSV4_EINPUT, "%s exists (use --force to overwrite)", path);
    char *tmp = temp_path(path);
    if (!tmp)
        return dsv4_fail(st, DSV4_ERUNTIME, "%s: out of memory", path);
    dsv4_status loc = {0, ""};
    void *image = NULL;
    size_t len = 0;
    int rc = build_image(path, fill, arg, &image, &len, &loc);
    if (!rc) {
        arm_temp(tmp);
        rc = write_temp(tmp, image, len, &loc);
        if (!rc)
            rc = publish(tmp, path, force, &loc);
        if (rc)
            unlink(tmp);
        disarm_temp();
    }
    free(image);
    if (rc) {
        if (strncmp(loc.msg, path, strlen(path)) == 0)
            dsv4_fail(st, rc, "%s", loc.msg);
        else
            dsv4_fail(st, rc, "%s: %s", path, loc.msg);
    }
    free(tmp);
    return rc;
}

int dsv4_golden_write(const char *path, const dsv4_golden *g, int force, dsv4_status *st)
{
    const golden_contents gc = {g, NULL};
    return dsv4_h5_write_file(path, force, write_contents, &gc, st);
}

int dsv4_golden_write_repro(const char *path, const dsv4_golden *g, const dsv4_tensors *actual,
                            dsv4_status *st)
{
    const golden_contents gc = {g, actual};
    return dsv4_h5_write_file(path, 1, write_contents, &gc, st);
}

/* ".<name>.h5.tmp.<pid>" with a pid of decimal digits: what temp_path
 * makes for a golden. */
static int stale_temp_name(const char *name, long *pid)
{
    static const char mid[] = ".h5.tmp.";
    const char *m = strstr(name, mid);
    if (name[0] != '.' || !m || m == name + 1)
        return 0;
    for (const char *next; (next = strstr(m + 1, mid));)
        m = next;
    const char *digits = m + sizeof mid - 1;
    size_t n = strspn(digits, "0123456789");
    if (n == 0 || n > 9 || digits[n] != '\0')
        return 0;
    *pid = strtol(digits, NULL, 10);
    return *pid > 0;
}

int dsv4_golden_remove_stale_temps(const char *dir, int *removed, dsv4_status *st)
{
    *removed = 0;
    DIR *d = opendir(dir);
    if (!d)
        return errno == ENOENT ? DSV4_OK
                               : dsv4_fail(st, DSV4_EINPUT, "cannot list %s: %s", dir, strerror(errno));
    int rc = DSV4_OK;
    for (struct dirent *e; (e = readdir(d));) {
        long pid;
        if (!stale_temp_name(e->d_name, &pid) || pid == (long)getpid())
            continue;
        /* A live process (or one we may not signal) may be writing it. */
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue;
        char p[4096 + 256];
        struct stat sb;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (lstat(p, &sb) != 0 || !S_ISREG(sb.st_mode))
            continue;
        if (unlink(p) == 0)
            (*removed)++;
        else if (!rc)
            rc = dsv4_fail(st, DSV4_EINPUT, "cannot remove the stale temporary file %s: %s", p, strerror(errno));
    }
    closedir(d);
    return rc;
}

/* The directory holding path ("." for a bare name), stat'ed. */
static int stat_dir_of(const char *path, struct stat *sb)
{
    char dir[4096];
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else
        snprintf(dir, sizeof dir, "%.*s", slash == path ? 1 : (int)(slash - path), path);
    return stat(dir, sb);
}

int dsv4_golden_same_path(const char *a, const char *b)
{
    if (strcmp(a, b) == 0)
        return 1;
    const char *sa = strrchr(a, '/'), *sb = strrchr(b, '/');
    if (strcmp(sa ? sa + 1 : a, sb ? sb + 1 : b) != 0)
        return 0;
    struct stat da, db;
    return stat_dir_of(a, &da) == 0 && stat_dir_of(b, &db) == 0 && da.st_dev == db.st_dev &&
           da.st_ino == db.st_ino;
}

int dsv4_golden_check_repro_dir(const char *dir, const char *const *files, int n, dsv4_status *st)
{
    struct stat d, f;
    if (stat(dir, &d) != 0)
        return DSV4_OK; /* not there yet: it holds nothing */
    for (int k = 0; k < n; k++)
        if (files[k] && files[k][0] && stat_dir_of(files[k], &f) == 0 && f.st_dev == d.st_dev &&
            f.st_ino == d.st_ino)
            return dsv4_fail(st, DSV4_EINPUT, "--repro-dir %s holds %s, a golden of this run: repro files "
                             "are named after cases and could replace it; choose another folder", dir, files[k]);
    return DSV4_OK;
}

void dsv4_golden_describe(dsv4_golden *g, const dsv4_op *op, int variant, const char *case_name,
                          uint64_t seed, const dsv4_params *params, const char *how)
{
    g->schema = DSV4_SCHEMA_VERSION;
    snprintf(g->op, sizeof g->op, "%s", op->name);
    snprintf(g->variant, sizeof g->variant, "%s", dsv4_op_variant_name(op, variant));
    snprintf(g->case_name, sizeof g->case_name, "%s", case_name);
    g->seed = seed;
    snprintf(g->generator, sizeof g->generator, "dsv4check %s (%s)%s", DSV4_VERSION, DSV4_GIT_REV, how);
    time_t now = time(NULL);
    struct tm tmv;
    gmtime_r(&now, &tmv);
    strftime(g->created, sizeof g->created, "%Y-%m-%dT%H:%M:%SZ", &tmv);
    g->params = *params;
}

void dsv4_golden_file_name(const char *case_name, char *out, size_t len)
{
    if (len == 0)
        return;
    size_t k = 0;
    for (; case_name[k] && k + 1 < len; k++) {
        char ch = case_name[k];
        int ok = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
                 ch == '.' || ch == '_' || ch == '-';
        out[k] = ok ? ch : '_';
    }
    out[k] = '\0';
}

void dsv4_golden_free(dsv4_golden *g)
{
    if (!g)
        return;
    dsv4_tensors_free(&g->inputs);
    dsv4_tensors_free(&g->outputs);
}
