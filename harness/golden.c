#define _POSIX_C_SOURCE 200809L
/* golden.c - HDF5 golden files, schema 1 (data/README.md is the spec).
 *
 * Integrity: every non-empty dataset is chunked and carries the Fletcher32
 * filter, so corrupt raw data fails H5Dread.  Files are written with the
 * HDF5 1.8 object formats (libver bounds V18..V18) because those put a
 * checksum on the superblock, every object header (dataspace, datatype,
 * layout, filters, attributes, links) and the attribute/link heaps; with the
 * EARLIEST formats a flipped byte in a dims or byte-order field would change
 * the data silently.  The one structure left without a checksum, the v1
 * B-tree that indexes the chunks, is covered by checking on read that every
 * chunk of the grid is present, with all filters applied. */
#include "golden.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <hdf5.h>

#define CHUNK_TARGET_BYTES ((size_t)64 << 10)
#define STR_ATTR_MAX 4096 /* longest string attribute we read */
#define FP4_PACKING "low_nibble_first"
#define REPRO_NOTE "the implementation's outputs; /outputs holds the expected ones"

#ifndef DSV4_VERSION
#define DSV4_VERSION "0"
#endif
#ifndef DSV4_GIT_REV
#define DSV4_GIT_REV "unknown"
#endif

void dsv4_h5_quiet(void) { H5Eset_auto2(H5E_DEFAULT, NULL, NULL); }

/* ---- shared helpers ---------------------------------------------------- */

static void close_id(hid_t id, herr_t (*fn)(hid_t))
{
    if (id >= 0)
        fn(id);
}

/* The innermost HDF5 error description, for messages ("" when none). */
static herr_t err_walk(unsigned n, const H5E_error2_t *e, void *data)
{
    char *buf = data;
    if (n == 0 && e->desc)
        snprintf(buf, 160, "%s", e->desc);
    return 0;
}

static const char *h5_err(char *buf)
{
    buf[0] = '\0';
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, err_walk, buf);
    return buf;
}

/* File storage type of each logical dtype (little-endian, no custom types). */
static hid_t storage_file_type(dsv4_dtype dt)
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

static hid_t storage_mem_type(dsv4_dtype dt)
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

static const char *storage_desc(dsv4_dtype dt)
{
    switch (dt) {
    case DSV4_F64: return "a 64-bit little-endian IEEE float";
    case DSV4_F32: return "a 32-bit little-endian IEEE float";
    case DSV4_BF16:
    case DSV4_F16: return "a 16-bit unsigned little-endian integer";
    case DSV4_I64: return "a 64-bit signed little-endian integer";
    case DSV4_I32: return "a 32-bit signed little-endian integer";
    default: return "an 8-bit unsigned integer";
    }
}

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

static int write_str_attr(hid_t loc, const char *name, const char *value, size_t max)
{
    size_t len = strnlen(value, max);
    if (len >= max)
        return -1; /* not terminated inside its field */
    hid_t t = str_type(len), s = H5Screate(H5S_SCALAR);
    int rc = (t < 0 || s < 0) ? -1 : write_attr(loc, name, t, t, s, value, 0);
    close_id(s, H5Sclose);
    close_id(t, H5Tclose);
    return rc;
}

static int write_scalar_attr(hid_t loc, const char *name, hid_t ftype, hid_t mtype,
                             const void *v)
{
    hid_t s = H5Screate(H5S_SCALAR);
    int rc = s < 0 ? -1 : write_attr(loc, name, ftype, mtype, s, v, 0);
    close_id(s, H5Sclose);
    return rc;
}

static int write_list_attr(hid_t loc, const char *name, int n, const int64_t *v)
{
    hsize_t dim = (hsize_t)n;
    hid_t s = H5Screate_simple(1, &dim, NULL);
    int rc = s < 0 ? -1 : write_attr(loc, name, H5T_STD_I64LE, H5T_NATIVE_INT64, s, v, n == 0);
    close_id(s, H5Sclose);
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
    if (write_scalar_attr(f, "dsv4check_schema", H5T_STD_I64LE, H5T_NATIVE_INT64, &schema) < 0 ||
        write_scalar_attr(f, "seed", H5T_STD_I64LE, H5T_NATIVE_INT64, &seed) < 0)
        return dsv4_fail(st, DSV4_ERUNTIME, "cannot write the root attributes");
    for (size_t k = 0; k < sizeof s / sizeof s[0]; k++)
        if (write_str_attr(f, s[k].name, s[k].v, s[k].max) < 0)
            return dsv4_fail(st, DSV4_EINPUT, "cannot write root attribute '%s'", s[k].name);
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
    case DSV4_P_STR: rc = write_str_attr(grp, p->name, p->s, sizeof p->s); break;
    case DSV4_P_INTLIST:
        if (p->n < 0 || p->n > DSV4_PARAM_LIST_MAX)
            return dsv4_fail(st, DSV4_EINPUT, "parameter '%s': list length %d", p->name, p->n);
        rc = write_list_attr(grp, p->name, p->n, p->list);
        break;
    }
    return rc < 0 ? dsv4_fail(st, DSV4_ERUNTIME, "cannot write /params/%s", p->name) : DSV4_OK;
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
    if (write_str_attr(d, "dtype", dsv4_dtype_name(t->dtype), 64) < 0)
        return -1;
    if (t->output_dtype != DSV4_DT_NONE &&
        write_str_attr(d, "output_dtype", dsv4_dtype_name(t->output_dtype), 64) < 0)
        return -1;
    if (t->dtype == DSV4_F4E2M1X2 && write_str_attr(d, "packing", FP4_PACKING, 64) < 0)
        return -1;
    return 0;
}

static int write_tensor(hid_t grp, const char *gname, const dsv4_tensor *t, dsv4_status *st)
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
        d = H5Dcreate2(grp, t->name, storage_file_type(t->dtype), space, H5P_DEFAULT, dcpl,
                       H5P_DEFAULT);
    int bad = d < 0;
    if (!bad && numel > 0)
        bad = H5Dwrite(d, storage_mem_type(t->dtype), H5S_ALL, H5S_ALL, H5P_DEFAULT, t->data) < 0;
    if (!bad)
        bad = write_tensor_attrs(d, t) < 0;
    if (d >= 0 && H5Dclose(d) < 0)
        bad = 1;
    close_id(dcpl, H5Pclose);
    close_id(space, H5Sclose);
    if (bad) {
        char eb[160];
        return dsv4_fail(st, DSV4_ERUNTIME, "cannot write /%s/%s (%s)", gname, t->name,
                         h5_err(eb));
    }
    return DSV4_OK;
}

static int write_group(hid_t f, const char *gname, const dsv4_tensors *ts, dsv4_status *st)
{
    hid_t g = H5Gcreate2(f, gname, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (g < 0)
        return dsv4_fail(st, DSV4_ERUNTIME, "cannot create /%s", gname);
    int rc = DSV4_OK;
    for (int k = 0; k < ts->n && !rc; k++)
        rc = write_tensor(g, gname, &ts->t[k], st);
    if (H5Gclose(g) < 0 && !rc)
        rc = dsv4_fail(st, DSV4_ERUNTIME, "cannot close /%s", gname);
    return rc;
}

static int write_params(hid_t f, const dsv4_params *ps, dsv4_status *st)
{
    hid_t g = H5Gcreate2(f, "params", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (g < 0)
        return dsv4_fail(st, DSV4_ERUNTIME, "cannot create /params");
    int rc = DSV4_OK;
    if (ps->n < 0 || ps->n > DSV4_MAX_PARAMS)
        rc = dsv4_fail(st, DSV4_EINPUT, "bad parameter count %d", ps->n);
    for (int k = 0; k < ps->n && !rc; k++)
        rc = write_param(g, &ps->p[k], st);
    if (H5Gclose(g) < 0 && !rc)
        rc = dsv4_fail(st, DSV4_ERUNTIME, "cannot close /params");
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
    int bad = g < 0 || write_str_attr(g, "note", REPRO_NOTE, sizeof REPRO_NOTE) < 0;
    if (g >= 0 && H5Gclose(g) < 0)
        bad = 1;
    return bad ? dsv4_fail(st, DSV4_ERUNTIME, "cannot write the note of /actual") : DSV4_OK;
}

static int write_file(const char *tmp, const dsv4_golden *g, const dsv4_tensors *actual,
                      dsv4_status *st)
{
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl < 0 || H5Pset_libver_bounds(fapl, H5F_LIBVER_V18, H5F_LIBVER_V18) < 0) {
        close_id(fapl, H5Pclose);
        return dsv4_fail(st, DSV4_ERUNTIME, "cannot set up HDF5 file access");
    }
    hid_t f = H5Fcreate(tmp, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    H5Pclose(fapl);
    if (f < 0) {
        char eb[160];
        return dsv4_fail(st, DSV4_EINPUT, "cannot create %s (%s)", tmp, h5_err(eb));
    }
    int rc = write_root_attrs(f, g, st);
    if (!rc)
        rc = write_params(f, &g->params, st);
    if (!rc)
        rc = write_group(f, "inputs", &g->inputs, st);
    if (!rc)
        rc = write_group(f, "outputs", &g->outputs, st);
    if (!rc && actual)
        rc = write_actual(f, actual, st);
    if (H5Fclose(f) < 0 && !rc)
        rc = dsv4_fail(st, DSV4_ERUNTIME, "cannot close %s", tmp);
    return rc;
}

/* The data must be on disk before the rename makes it the golden. */
static int sync_file(const char *p)
{
    int fd = open(p, O_RDONLY);
    if (fd < 0)
        return -1;
    int e = fdatasync(fd);
    return (close(fd) < 0 || e < 0) ? -1 : 0;
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

static int write_golden(const char *path, const dsv4_golden *g, const dsv4_tensors *actual,
                        int force, dsv4_status *st)
{
    dsv4_h5_quiet();
    struct stat sb;
    if (!force && stat(path, &sb) == 0)
        return dsv4_fail(st, DSV4_EINPUT, "%s exists (use --force to overwrite)", path);
    char *tmp = temp_path(path);
    if (!tmp)
        return dsv4_fail(st, DSV4_ERUNTIME, "%s: out of memory", path);
    dsv4_status loc = {0, ""};
    int rc = write_file(tmp, g, actual, &loc);
    if (!rc && sync_file(tmp) < 0)
        rc = dsv4_fail(&loc, DSV4_ERUNTIME, "cannot sync %s: %s", tmp, strerror(errno));
    if (!rc)
        rc = publish(tmp, path, force, &loc);
    if (rc) {
        remove(tmp);
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
    return write_golden(path, g, NULL, force, st);
}

int dsv4_golden_write_repro(const char *path, const dsv4_golden *g, const dsv4_tensors *actual,
                            dsv4_status *st)
{
    return write_golden(path, g, actual, 1, st);
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

/* ---- reading ----------------------------------------------------------- */

typedef struct reader {
    const char *path;
    hid_t file;
    dsv4_status *st;
} reader;

/* Reads a scalar or 1-D string attribute into buf (max bytes with the NUL),
 * fixed-length (C writer) or variable-length (h5py). */
static int read_str(const reader *r, hid_t a, const char *where, char *buf, size_t max)
{
    hid_t ft = H5Aget_type(a), sp = H5Aget_space(a), mt = -1;
    int rc = DSV4_OK;
    htri_t vl = -1;
    char *tmp = NULL;
    if (ft < 0 || sp < 0 || H5Tget_class(ft) != H5T_STRING ||
        H5Sget_simple_extent_npoints(sp) != 1) {
        rc = dsv4_fail(r->st, DSV4_EINPUT, "%s:%s: not a string", r->path, where);
        goto out;
    }
    vl = H5Tis_variable_str(ft);
    mt = H5Tcopy(H5T_C_S1);
    if (vl < 0 || mt < 0 || H5Tset_cset(mt, H5Tget_cset(ft)) < 0) {
        rc = dsv4_fail(r->st, DSV4_EINPUT, "%s:%s: unreadable string type", r->path, where);
        goto out;
    }
    if (vl) {
        if (H5Tset_size(mt, H5T_VARIABLE) < 0 || H5Aread(a, mt, &tmp) < 0 || !tmp) {
            rc = dsv4_fail(r->st, DSV4_EINPUT, "%s:%s: cannot read string", r->path, where);
            goto out;
        }
    } else {
        size_t n = H5Tget_size(ft);
        if (n == 0 || n > STR_ATTR_MAX || !(tmp = calloc(1, n + 1)) ||
            H5Tset_size(mt, n) < 0 || H5Tset_strpad(mt, H5T_STR_NULLPAD) < 0 ||
            H5Aread(a, mt, tmp) < 0) {
            rc = dsv4_fail(r->st, DSV4_EINPUT, "%s:%s: cannot read string", r->path, where);
            goto out;
        }
    }
    if (strlen(tmp) >= max)
        rc = dsv4_fail(r->st, DSV4_EINPUT, "%s:%s: string longer than %zu bytes", r->path,
                       where, max - 1);
    else
        memcpy(buf, tmp, strlen(tmp) + 1);
out:
    if (tmp && vl > 0)
        H5free_memory(tmp);
    else
        free(tmp);
    close_id(mt, H5Tclose);
    close_id(sp, H5Sclose);
    close_id(ft, H5Tclose);
    return rc;
}

static int open_attr(const reader *r, hid_t loc, const char *name, const char *where,
                     int required, hid_t *out)
{
    *out = -1;
    htri_t ex = H5Aexists(loc, name);
    if (ex < 0)
        return dsv4_fail(r->st, DSV4_EINPUT, "%s:%s: unreadable attributes (corrupt file)",
                         r->path, where);
    if (!ex)
        return required ? dsv4_fail(r->st, DSV4_EINPUT, "%s:%s: no '%s' attribute", r->path,
                                    where, name)
                        : DSV4_OK;
    *out = H5Aopen(loc, name, H5P_DEFAULT);
    if (*out < 0)
        return dsv4_fail(r->st, DSV4_EINPUT, "%s:%s: cannot open attribute '%s'", r->path,
                         where, name);
    return DSV4_OK;
}

/* Optional string attribute: buf untouched when absent. */
static int str_attr(const reader *r, hid_t loc, const char *name, const char *where,
                    int required, char *buf, size_t max)
{
    hid_t a;
    int rc = open_attr(r, loc, name, where, required, &a);
    if (rc || a < 0)
        return rc;
    char w[256];
    snprintf(w, sizeof w, "%s attribute '%s'", where, name);
    rc = read_str(r, a, w, buf, max);
    H5Aclose(a);
    return rc;
}

/* n integers of any integer type into int64, refusing uint64 values above
 * INT64_MAX (HDF5 would clamp them silently). */
static int read_ints(hid_t a, hid_t ft, size_t n, int64_t *out)
{
    if (n == 0)
        return 0;
    if (H5Tget_sign(ft) == H5T_SGN_NONE && H5Tget_size(ft) >= 8) {
        uint64_t *u = malloc(n * sizeof *u);
        int bad = !u || H5Aread(a, H5T_NATIVE_UINT64, u) < 0;
        for (size_t k = 0; !bad && k < n; k++) {
            bad = u[k] > (uint64_t)INT64_MAX;
            out[k] = (int64_t)u[k];
        }
        free(u);
        return bad ? -1 : 0;
    }
    return H5Aread(a, H5T_NATIVE_INT64, out) < 0 ? -1 : 0;
}

static int int_attr(const reader *r, hid_t loc, const char *name, int required, int64_t *v)
{
    hid_t a;
    int rc = open_attr(r, loc, name, "/", required, &a);
    if (rc || a < 0)
        return rc;
    hid_t ft = H5Aget_type(a), sp = H5Aget_space(a);
    if (ft < 0 || sp < 0 || H5Tget_class(ft) != H5T_INTEGER ||
        H5Sget_simple_extent_type(sp) != H5S_SCALAR || read_ints(a, ft, 1, v) < 0)
        rc = dsv4_fail(r->st, DSV4_EINPUT, "%s: attribute '%s' is not an integer scalar",
                       r->path, name);
    close_id(sp, H5Sclose);
    close_id(ft, H5Tclose);
    H5Aclose(a);
    return rc;
}

static int read_root(const reader *r, dsv4_golden *g)
{
    int64_t schema = 0, seed = 0;
    htri_t ex = H5Aexists(r->file, "dsv4check_schema");
    if (ex < 0)
        return dsv4_fail(r->st, DSV4_EINPUT, "%s: unreadable root group (corrupt file)",
                         r->path);
    if (ex == 0)
        return dsv4_fail(r->st, DSV4_EINPUT,
                         "%s: no dsv4check_schema attribute (not a dsv4check golden file)",
                         r->path);
    int rc = int_attr(r, r->file, "dsv4check_schema", 1, &schema);
    if (rc)
        return rc;
    if (schema != DSV4_SCHEMA_VERSION)
        return dsv4_fail(r->st, DSV4_EINPUT, "%s: schema version %" PRId64
                         ", this dsv4check reads %d", r->path, schema, DSV4_SCHEMA_VERSION);
    g->schema = (int)schema;
    if ((rc = int_attr(r, r->file, "seed", 0, &seed)))
        return rc;
    memcpy(&g->seed, &seed, sizeof seed);
    if ((rc = str_attr(r, r->file, "op", "/", 1, g->op, sizeof g->op)) ||
        (rc = str_attr(r, r->file, "variant", "/", 1, g->variant, sizeof g->variant)) ||
        (rc = str_attr(r, r->file, "case", "/", 1, g->case_name, sizeof g->case_name)) ||
        (rc = str_attr(r, r->file, "generator", "/", 0, g->generator, sizeof g->generator)) ||
        (rc = str_attr(r, r->file, "created", "/", 0, g->created, sizeof g->created)))
        return rc;
    return DSV4_OK;
}

/* One /params attribute, typed by its HDF5 class and rank. */
static int read_param(const reader *r, hid_t a, const char *name, dsv4_param *p)
{
    char where[96];
    snprintf(where, sizeof where, "/params/%s", name);
    memset(p, 0, sizeof *p);
    if (strlen(name) >= sizeof p->name)
        return dsv4_fail(r->st, DSV4_EINPUT, "%s:%s: name too long", r->path, where);
    snprintf(p->name, sizeof p->name, "%s", name);
    hid_t ft = H5Aget_type(a), sp = H5Aget_space(a);
    H5T_class_t cls = ft < 0 ? H5T_NO_CLASS : H5Tget_class(ft);
    H5S_class_t scls = sp < 0 ? H5S_NO_CLASS : H5Sget_simple_extent_type(sp);
    int rank = sp < 0 ? -1 : H5Sget_simple_extent_ndims(sp);
    hssize_t n = sp < 0 ? -1 : H5Sget_simple_extent_npoints(sp);
    int rc = DSV4_OK;
    if (cls == H5T_INTEGER && scls == H5S_SCALAR) {
        p->type = DSV4_P_INT;
        if (read_ints(a, ft, 1, &p->i) < 0)
            rc = dsv4_fail(r->st, DSV4_EINPUT, "%s:%s: unreadable integer", r->path, where);
    } else if (cls == H5T_FLOAT && scls == H5S_SCALAR) {
        p->type = DSV4_P_FLOAT;
        if (H5Aread(a, H5T_NATIVE_DOUBLE, &p->f) < 0)
            rc = dsv4_fail(r->st, DSV4_EINPUT, "%s:%s: unreadable float", r->path, where);
    } else if (cls == H5T_STRING) {
        p->type = DSV4_P_STR;
        rc = read_str(r, a, where, p->s, sizeof p->s);
    } else if (cls == H5T_INTEGER && (scls == H5S_NULL || (scls == H5S_SIMPLE && rank == 1))) {
        p->type = DSV4_P_INTLIST;
        if (n < 0 || n > DSV4_PARAM_LIST_MAX)
            rc = dsv4_fail(r->st, DSV4_EINPUT, "%s:%s: int list longer than %d", r->path,
                           where, DSV4_PARAM_LIST_MAX);
        else if (scls == H5S_SIMPLE && read_ints(a, ft, (size_t)n, p->list) < 0)
            rc = dsv4_fail(r->st, DSV4_EINPUT, "%s:%s: unreadable int list", r->path, where);
        else
            p->n = scls == H5S_SIMPLE ? (int)n : 0;
    } else {
        rc = dsv4_fail(r->st, DSV4_EINPUT,
                       "%s:%s: unsupported attribute type (want an integer, float or string "
                       "scalar or a 1-D integer array)", r->path, where);
    }
    close_id(sp, H5Sclose);
    close_id(ft, H5Tclose);
    return rc;
}

typedef struct param_ctx {
    const reader *r;
    dsv4_params *ps;
    int rc;
} param_ctx;

static herr_t param_cb(hid_t loc, const char *name, const H5A_info_t *info, void *data)
{
    (void)info;
    param_ctx *c = data;
    hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
    if (a < 0) {
        c->rc = dsv4_fail(c->r->st, DSV4_EINPUT, "%s:/params/%s: cannot open", c->r->path, name);
        return -1;
    }
    dsv4_param p;
    c->rc = read_param(c->r, a, name, &p);
    H5Aclose(a);
    if (!c->rc && c->ps->n >= DSV4_MAX_PARAMS && !dsv4_params_find(c->ps, name))
        c->rc = dsv4_fail(c->r->st, DSV4_EINPUT, "%s:/params: more than %d parameters",
                          c->r->path, DSV4_MAX_PARAMS);
    if (!c->rc)
        c->rc = dsv4_params_set(c->ps, &p, c->r->st);
    return c->rc ? -1 : 0;
}

static hid_t open_group(const reader *r, const char *name)
{
    htri_t ex = H5Lexists(r->file, name, H5P_DEFAULT);
    if (ex <= 0) {
        dsv4_fail(r->st, DSV4_EINPUT, "%s: no /%s group", r->path, name);
        return -1;
    }
    H5O_info_t oi;
    hid_t g = -1;
    if (H5Oget_info_by_name2(r->file, name, &oi, H5O_INFO_BASIC, H5P_DEFAULT) < 0 ||
        oi.type != H5O_TYPE_GROUP || (g = H5Gopen2(r->file, name, H5P_DEFAULT)) < 0)
        dsv4_fail(r->st, DSV4_EINPUT, "%s:/%s: not a readable group", r->path, name);
    return g;
}

static int read_params(const reader *r, dsv4_params *ps)
{
    hid_t g = open_group(r, "params");
    if (g < 0)
        return r->st->code;
    param_ctx c = {r, ps, DSV4_OK};
    hsize_t idx = 0;
    herr_t e = H5Aiterate2(g, H5_INDEX_NAME, H5_ITER_INC, &idx, param_cb, &c);
    H5Gclose(g);
    if (!c.rc && e < 0)
        c.rc = dsv4_fail(r->st, DSV4_EINPUT, "%s:/params: cannot list attributes (corrupt file)",
                         r->path);
    return c.rc;
}

typedef struct names {
    int n;
    char name[DSV4_MAX_TENSORS][DSV4_NAME_MAX];
    const reader *r;
    const char *group;
    int rc;
} names;

/* Collect names first; datasets are read outside the iteration. */
static herr_t name_cb(hid_t g, const char *name, const H5L_info_t *info, void *data)
{
    (void)g;
    names *ns = data;
    const reader *r = ns->r;
    if (info->type != H5L_TYPE_HARD)
        ns->rc = dsv4_fail(r->st, DSV4_EINPUT, "%s:/%s/%s: a soft or external link, not a "
                           "dataset", r->path, ns->group, name);
    else if (strlen(name) >= DSV4_NAME_MAX)
        ns->rc = dsv4_fail(r->st, DSV4_EINPUT, "%s:/%s/%s: name longer than %d bytes", r->path,
                           ns->group, name, DSV4_NAME_MAX - 1);
    else if (ns->n >= DSV4_MAX_TENSORS)
        ns->rc = dsv4_fail(r->st, DSV4_EINPUT, "%s:/%s: more than %d datasets", r->path,
                           ns->group, DSV4_MAX_TENSORS);
    else
        snprintf(ns->name[ns->n++], DSV4_NAME_MAX, "%s", name);
    return ns->rc ? -1 : 0;
}

/* The dataset's type must be exactly the storage type of its dtype. */
static int type_matches(hid_t ft, dsv4_dtype dt)
{
    hid_t want = storage_file_type(dt);
    if (H5Tget_size(want) > 1)
        return H5Tequal(ft, want) > 0;
    /* One byte has no byte order worth checking. */
    return H5Tget_class(ft) == H5T_INTEGER && H5Tget_size(ft) == 1 &&
           H5Tget_sign(ft) == H5T_SGN_NONE && H5Tget_precision(ft) == 8 &&
           H5Tget_offset(ft) == 0;
}

static const char *type_desc(hid_t ft, char *buf, size_t len)
{
    H5T_class_t c = H5Tget_class(ft);
    size_t bits = 8 * H5Tget_size(ft);
    if (c == H5T_INTEGER)
        snprintf(buf, len, "%zu-bit %s integer", bits,
                 H5Tget_sign(ft) == H5T_SGN_NONE ? "unsigned" : "signed");
    else if (c == H5T_FLOAT)
        snprintf(buf, len, "%zu-bit float", bits);
    else if (c == H5T_STRING)
        snprintf(buf, len, "string");
    else
        snprintf(buf, len, "HDF5 type class %d", (int)c);
    if ((c == H5T_INTEGER || c == H5T_FLOAT) && bits > 8 && H5Tget_order(ft) != H5T_ORDER_LE)
        snprintf(buf + strlen(buf), len - strlen(buf), " (not little-endian)");
    return buf;
}

typedef struct dset_ctx {
    const reader *r;
    char where[128]; /* "/inputs/NAME" */
    hid_t d;
} dset_ctx;

static int read_dtype_attrs(const dset_ctx *c, dsv4_dtype *dt, dsv4_dtype *odt)
{
    const reader *r = c->r;
    char s[64] = "";
    int rc = str_attr(r, c->d, "dtype", c->where, 1, s, sizeof s);
    if (rc)
        return rc;
    if (dsv4_dtype_parse(s, dt) != DSV4_OK)
        return dsv4_fail(r->st, DSV4_EINPUT, "%s:%s: unknown dtype '%s'", r->path, c->where, s);
    s[0] = '\0';
    *odt = DSV4_DT_NONE;
    if ((rc = str_attr(r, c->d, "output_dtype", c->where, 0, s, sizeof s)))
        return rc;
    if (s[0] && dsv4_dtype_parse(s, odt) != DSV4_OK)
        return dsv4_fail(r->st, DSV4_EINPUT, "%s:%s: unknown output_dtype '%s'", r->path,
                         c->where, s);
    s[0] = '\0';
    if ((rc = str_attr(r, c->d, "packing", c->where, 0, s, sizeof s)))
        return rc;
    if (s[0] && (*dt != DSV4_F4E2M1X2 || strcmp(s, FP4_PACKING) != 0))
        return dsv4_fail(r->st, DSV4_EINPUT, "%s:%s: packing '%s' (only float4_e2m1fn_x2 with "
                         "%s is known)", r->path, c->where, s, FP4_PACKING);
    return DSV4_OK;
}

static int read_shape(const dset_ctx *c, int *ndim, int64_t *shape)
{
    const reader *r = c->r;
    hid_t sp = H5Dget_space(c->d);
    H5S_class_t cls = sp < 0 ? H5S_NO_CLASS : H5Sget_simple_extent_type(sp);
    int rank = cls == H5S_SIMPLE ? H5Sget_simple_extent_ndims(sp) : 0;
    hsize_t dims[H5S_MAX_RANK];
    int rc = DSV4_OK;
    if (cls != H5S_SCALAR && cls != H5S_SIMPLE)
        rc = dsv4_fail(r->st, DSV4_EINPUT, "%s:%s: null or unreadable dataspace", r->path,
                       c->where);
    else if (rank < 0 || rank > DSV4_MAX_DIMS)
        rc = dsv4_fail(r->st, DSV4_EINPUT, "%s:%s: rank %d (at most %d)", r->path, c->where,
                       rank, DSV4_MAX_DIMS);
    else if (rank > 0 && H5Sget_simple_extent_dims(sp, dims, NULL) != rank)
        rc = dsv4_fail(r->st, DSV4_EINPUT, "%s:%s: unreadable dims", r->path, c->where);
    for (int k = 0; !rc && k < rank; k++) {
        if (dims[k] > (hsize_t)INT64_MAX)
            rc = dsv4_fail(r->st, DSV4_EINPUT, "%s:%s: dim %d too large", r->path, c->where, k);
        shape[k] = (int64_t)dims[k];
    }
    *ndim = rank;
    close_id(sp, H5Sclose);
    return rc;
}

/* Schema 1 wants Fletcher32 on every non-empty array, and filters we have. */
static int check_filters(const dset_ctx *c, hid_t dcpl)
{
    const reader *r = c->r;
    int nf = H5Pget_nfilters(dcpl), fletcher = 0;
    for (int k = 0; k < nf; k++) {
        unsigned flags, cd[8];
        size_t ncd = 8;
        char fname[64];
        H5Z_filter_t id = H5Pget_filter2(dcpl, (unsigned)k, &flags, &ncd, cd, sizeof fname,
                                         fname, NULL);
        if (id < 0)
            return dsv4_fail(r->st, DSV4_EINPUT, "%s:%s: unreadable filter pipeline", r->path,
                             c->where);
        if (id == H5Z_FILTER_FLETCHER32)
            fletcher = 1;
        if (H5Zfilter_avail(id) <= 0)
            return dsv4_fail(r->st, DSV4_EINPUT, "%s:%s: filter %d (%s) is not available; "
                             "use gzip", r->path, c->where, (int)id, fname);
    }
    if (nf < 0 || !fletcher)
        return dsv4_fail(r->st, DSV4_EINPUT, "%s:%s: no Fletcher32 checksum filter (schema 1 "
                         "wants chunked datasets with fletcher32=True)", r->path, c->where);
    return DSV4_OK;
}

/* Every chunk of the grid present with all filters applied, and no more:
 * the chunk index has no checksum of its own, and a lost chunk would read
 * back as fill values. */
static int check_chunks(const dset_ctx *c, hid_t dcpl, int ndim, const int64_t *shape)
{
    const reader *r = c->r;
    hsize_t chunk[H5S_MAX_RANK], grid[DSV4_MAX_DIMS], idx[DSV4_MAX_DIMS] = {0}, off[DSV4_MAX_DIMS];
    hsize_t expect = 1, have = 0;
    if (H5Pget_chunk(dcpl, H5S_MAX_RANK, chunk) != ndim)
        return dsv4_fail(r->st, DSV4_EINPUT, "%s:%s: bad chunk shape", r->path, c->where);
    /* HDF5 allocates a whole chunk per read: a chunk wider than its (fixed)
     * dataset, which HDF5 never writes, would be a corrupt size. */
    for (int k = 0; k < ndim; k++) {
        if (chunk[k] == 0 || chunk[k] > (hsize_t)(shape[k] > 0 ? shape[k] : 1))
            return dsv4_fail(r->st, DSV4_EINPUT, "%s:%s: bad chunk shape", r->path, c->where);
        grid[k] = ((hsize_t)shape[k] + chunk[k] - 1) / chunk[k];
        expect *= grid[k];
    }
    /* 1.10 mishandles H5S_ALL here; its docs say pass the dataset's space. */
    hid_t sp = H5Dget_space(c->d);
    herr_t e = sp < 0 ? -1 : H5Dget_num_chunks(c->d, sp, &have);
    close_id(sp, H5Sclose);
    if (e < 0 || have != expect)
        return dsv4_fail(r->st, DSV4_EINPUT, "%s:%s: %llu chunks stored, %llu expected (corrupt "
                         "or partly written)", r->path, c->where, (unsigned long long)have,
                         (unsigned long long)expect);
    hsize_t fsize = 0;
    if (H5Fget_filesize(r->file, &fsize) < 0)
        return dsv4_fail(r->st, DSV4_EINPUT, "%s: unreadable file size", r->path);
    for (hsize_t n = 0; n < expect; n++) {
        for (int k = 0; k < ndim; k++)
            off[k] = idx[k] * chunk[k];
        unsigned mask = ~0u;
        haddr_t addr = HADDR_UNDEF;
        hsize_t size = 0;
        if (H5Dget_chunk_info_by_coord(c->d, off, &mask, &addr, &size) < 0 ||
            addr == HADDR_UNDEF || mask != 0)
            return dsv4_fail(r->st, DSV4_EINPUT, "%s:%s: chunk %llu missing or not filtered "
                             "(corrupt data)", r->path, c->where, (unsigned long long)n);
        /* HDF5 mallocs the stored size before reading: a corrupt size (fuzz:
         * 2.8 GB for a 19-byte chunk) must not reach H5Dread. */
        /* libhdf5 1.10.8's Fletcher32 filter computes nbytes - 4 unsigned:
         * a chunk stored in fewer than 4 bytes makes it read gigabytes past
         * the buffer (fuzz: a 1-byte chunk, SEGV in H5_checksum_fletcher32). */
        if (size < 4)
            return dsv4_fail(r->st, DSV4_EINPUT, "%s:%s: chunk %llu stored in %llu bytes, too "
                             "few for its Fletcher32 checksum (corrupt data)", r->path, c->where,
                             (unsigned long long)n, (unsigned long long)size);
        if (size > fsize || addr > fsize - size)
            return dsv4_fail(r->st, DSV4_EINPUT, "%s:%s: chunk %llu of %llu bytes at %llu lies "
                             "past the end of the file (corrupt or truncated)", r->path, c->where,
                             (unsigned long long)n, (unsigned long long)size,
                             (unsigned long long)addr);
        for (int k = ndim - 1; k >= 0 && ++idx[k] == grid[k]; k--)
            idx[k] = 0;
    }
    return DSV4_OK;
}

static int check_layout(const dset_ctx *c, int ndim, const int64_t *shape, int64_t numel)
{
    if (ndim == 0 || numel == 0)
        return DSV4_OK; /* scalars and empty arrays cannot be chunked */
    hid_t dcpl = H5Dget_create_plist(c->d);
    if (dcpl < 0)
        return dsv4_fail(c->r->st, DSV4_EINPUT, "%s:%s: unreadable creation properties",
                         c->r->path, c->where);
    int rc = H5Pget_layout(dcpl) == H5D_CHUNKED ? check_filters(c, dcpl) :
             dsv4_fail(c->r->st, DSV4_EINPUT, "%s:%s: not chunked (schema 1 wants chunked "
                       "datasets with fletcher32=True)", c->r->path, c->where);
    if (!rc)
        rc = check_chunks(c, dcpl, ndim, shape);
    H5Pclose(dcpl);
    return rc;
}

static int read_dataset_body(dset_ctx *c, const char *name, dsv4_tensors *ts)
{
    const reader *r = c->r;
    dsv4_dtype dt, odt;
    int ndim = 0;
    int64_t shape[DSV4_MAX_DIMS] = {0};
    int rc = read_dtype_attrs(c, &dt, &odt);
    if (rc)
        return rc;
    hid_t ft = H5Dget_type(c->d);
    if (ft < 0)
        return dsv4_fail(r->st, DSV4_EINPUT, "%s:%s: unreadable datatype", r->path, c->where);
    if (!type_matches(ft, dt)) {
        char got[96];
        rc = dsv4_fail(r->st, DSV4_EINPUT, "%s:%s: dtype attribute says %s, which must be "
                       "stored as %s, but the data is a %s", r->path, c->where,
                       dsv4_dtype_name(dt), storage_desc(dt), type_desc(ft, got, sizeof got));
    }
    H5Tclose(ft);
    if (rc || (rc = read_shape(c, &ndim, shape)))
        return rc;
    uint64_t numel = 1;
    for (int k = 0; k < ndim; k++)
        numel = shape[k] && numel > UINT64_MAX / (uint64_t)shape[k] ? UINT64_MAX
                                                                     : numel * (uint64_t)shape[k];
    /* Refuse a claimed shape over the memory limit before walking its chunk
     * grid or allocating (dsv4_tensors_add checks again, with the running total). */
    size_t esize = dsv4_dtype_size(dt);
    if (numel > dsv4_memory_limit() / (esize ? esize : 1))
        return dsv4_fail(r->st, DSV4_EINPUT, "%s:%s: %" PRIu64 " elements of %s: over the memory "
                         "limit of %" PRIu64 " bytes (--mem-limit)", r->path, c->where, numel,
                         dsv4_dtype_name(dt), dsv4_memory_limit());
    if ((rc = check_layout(c, ndim, shape, numel > INT64_MAX ? INT64_MAX : (int64_t)numel)))
        return rc;
    dsv4_tensor *t = NULL;
    dsv4_status loc = {0, ""};
    if ((rc = dsv4_tensors_add(ts, name, dt, ndim, shape, &t, &loc)))
        return dsv4_fail(r->st, rc, "%s:%s: %s", r->path, c->where, loc.msg);
    t->output_dtype = odt;
    if (t->nbytes && H5Dread(c->d, storage_mem_type(dt), H5S_ALL, H5S_ALL, H5P_DEFAULT,
                             t->data) < 0) {
        char eb[160];
        return dsv4_fail(r->st, DSV4_EINPUT, "%s:%s: checksum or read error (corrupt data; %s)",
                         r->path, c->where, h5_err(eb));
    }
    return DSV4_OK;
}

static int read_dataset(const reader *r, hid_t g, const char *gname, const char *name,
                        dsv4_tensors *ts)
{
    dset_ctx c = {r, "", -1};
    snprintf(c.where, sizeof c.where, "/%s/%s", gname, name);
    H5O_info_t oi;
    if (H5Oget_info_by_name2(g, name, &oi, H5O_INFO_BASIC, H5P_DEFAULT) < 0 ||
        oi.type != H5O_TYPE_DATASET || (c.d = H5Dopen2(g, name, H5P_DEFAULT)) < 0)
        return dsv4_fail(r->st, DSV4_EINPUT, "%s:%s: not a readable dataset", r->path,
                         c.where);
    int rc = read_dataset_body(&c, name, ts);
    H5Dclose(c.d);
    return rc;
}

static int read_tensors(const reader *r, const char *gname, dsv4_tensors *ts)
{
    hid_t g = open_group(r, gname);
    if (g < 0)
        return r->st->code;
    names *ns = calloc(1, sizeof *ns);
    if (!ns) {
        H5Gclose(g);
        return dsv4_fail(r->st, DSV4_ERUNTIME, "%s: out of memory", r->path);
    }
    ns->r = r;
    ns->group = gname;
    hsize_t idx = 0;
    herr_t e = H5Literate(g, H5_INDEX_NAME, H5_ITER_INC, &idx, name_cb, ns);
    int rc = ns->rc;
    if (!rc && e < 0)
        rc = dsv4_fail(r->st, DSV4_EINPUT, "%s:/%s: cannot list datasets (corrupt file)",
                       r->path, gname);
    for (int k = 0; k < ns->n && !rc; k++)
        rc = read_dataset(r, g, gname, ns->name[k], ts);
    free(ns);
    H5Gclose(g);
    return rc;
}

/* Plain-file checks first, so the common mistakes get plain messages. */
static int precheck(const char *path, dsv4_status *st)
{
    struct stat sb;
    if (stat(path, &sb) != 0)
        return dsv4_fail(st, DSV4_EINPUT, "%s: cannot open: %s", path, strerror(errno));
    if (S_ISDIR(sb.st_mode))
        return dsv4_fail(st, DSV4_EINPUT, "%s: is a directory, not an HDF5 file", path);
    if (!S_ISREG(sb.st_mode))
        return dsv4_fail(st, DSV4_EINPUT, "%s: not a regular file", path);
    if (sb.st_size == 0)
        return dsv4_fail(st, DSV4_EINPUT, "%s: empty file, not an HDF5 file", path);
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return dsv4_fail(st, DSV4_EINPUT, "%s: cannot open: %s", path, strerror(errno));
    fclose(fp);
    htri_t is = H5Fis_hdf5(path);
    if (is <= 0)
        return dsv4_fail(st, DSV4_EINPUT, "%s: not an HDF5 file", path);
    return DSV4_OK;
}

static int read_all(const reader *r, dsv4_golden *g)
{
    int rc = read_root(r, g);
    if (!rc)
        rc = read_params(r, &g->params);
    if (!rc)
        rc = read_tensors(r, "inputs", &g->inputs);
    if (!rc)
        rc = read_tensors(r, "outputs", &g->outputs);
    return rc;
}

/* Opens path with fapl (H5P_DEFAULT: a plain file, prechecked; or the core
 * driver holding an image) and reads it. */
static int read_with(const char *path, hid_t fapl, dsv4_golden *g, dsv4_status *st)
{
    dsv4_h5_quiet();
    memset(g, 0, sizeof *g);
    dsv4_status loc = {0, ""};
    int rc = fapl == H5P_DEFAULT ? precheck(path, &loc) : DSV4_OK;
    if (!rc) {
        hid_t f = H5Fopen(path, H5F_ACC_RDONLY, fapl);
        if (f < 0) {
            char eb[160];
            rc = dsv4_fail(&loc, DSV4_EINPUT, "%s: cannot open as HDF5, truncated or corrupt "
                           "file (%s)", path, h5_err(eb));
        } else {
            reader r = {path, f, &loc};
            rc = read_all(&r, g);
            if (H5Fclose(f) < 0 && !rc)
                rc = dsv4_fail(&loc, DSV4_EINPUT, "%s: error closing (corrupt file)", path);
        }
    }
    if (rc) {
        dsv4_golden_free(g);
        memset(g, 0, sizeof *g);
        dsv4_fail(st, rc, "%s", loc.msg);
    }
    return rc;
}

int dsv4_golden_read(const char *path, dsv4_golden *g, dsv4_status *st)
{
    return read_with(path, H5P_DEFAULT, g, st);
}

/* The fuzzer's entry: the same reader on an in-memory file image (the core
 * driver, no backing store), so no temporary file is written per input. */
int dsv4_golden_read_image(const char *name, const void *buf, size_t len, dsv4_golden *g,
                           dsv4_status *st)
{
    dsv4_h5_quiet();
    if (len == 0) {
        memset(g, 0, sizeof *g);
        return dsv4_fail(st, DSV4_EINPUT, "%s: empty file, not an HDF5 file", name);
    }
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl < 0 || H5Pset_fapl_core(fapl, 1 << 16, 0) < 0 ||
        H5Pset_file_image(fapl, (void *)buf, len) < 0) {
        close_id(fapl, H5Pclose);
        memset(g, 0, sizeof *g);
        return dsv4_fail(st, DSV4_ERUNTIME, "%s: cannot set up an in-memory HDF5 file", name);
    }
    int rc = read_with(name, fapl, g, st);
    H5Pclose(fapl);
    return rc;
}

void dsv4_golden_free(dsv4_golden *g)
{
    if (!g)
        return;
    dsv4_tensors_free(&g->inputs);
    dsv4_tensors_free(&g->outputs);
}
