#define _POSIX_C_SOURCE 200809L
/* golden_read.c - the golden reader (data/README.md is the spec): a file
 * that anyone may have written, read without trusting anything in it.
 *
 * Before any attribute or dataset is read, a walk over every link in the
 * file (golden_walk.c) refuses soft, external and user-defined links, a
 * second hard link to one object, external raw storage and virtual
 * datasets: nothing the reader does can open another file or read an
 * object twice under two names.
 * Strings are read as stored bytes (no conversion that would stop at an
 * embedded NUL) and must be UTF-8.  Chunked data is decoded by
 * golden_chunk.c; scalars are compact (inside the checksummed object
 * header) or contiguous; the op's own checks follow (golden_op.c). */
#include "golden_h5.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define STR_ATTR_MAX 4096 /* longest string attribute we read */
#define MAX_OBJECTS 1024  /* links in a golden: groups and datasets (golden_walk.c) */

typedef struct reader {
    const char *path;
    hid_t file;
    dsv4_status *st;
} reader;

int dsv4_h5_utf8_ok(const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        unsigned c = s[i], cp, min;
        size_t len;
        if (c == 0)
            return 0;
        if (c < 0x80) {
            i++;
            continue;
        }
        if ((c & 0xE0) == 0xC0)
            len = 2, cp = c & 0x1F, min = 0x80;
        else if ((c & 0xF0) == 0xE0)
            len = 3, cp = c & 0x0F, min = 0x800;
        else if ((c & 0xF8) == 0xF0)
            len = 4, cp = c & 0x07, min = 0x10000;
        else
            return 0;
        if (n - i < len)
            return 0;
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80)
                return 0;
            cp = cp << 6 | (s[i + k] & 0x3Fu);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return 0;
        i += len;
    }
    return 1;
}

/* ---- attributes ---------------------------------------------------------- */

/* Text ending before max bytes, UTF-8, no NUL: into buf. */
static int take_text(const reader *r, const char *where, const unsigned char *b, size_t len, char *buf,
                     size_t max)
{
    if (memchr(b, 0, len))
        return dsv4_fail(r->st, DSV4_EINPUT, "%s:%s: contains a NUL byte", r->path, where);
    if (!dsv4_h5_utf8_ok(b, len))
        return dsv4_fail(r->st, DSV4_EINPUT, "%s:%s: not valid UTF-8", r->path, where);
    if (len >= max)
        return dsv4_fail(r->st, DSV4_EINPUT, "%s:%s: string longer than %zu bytes", r->path, where, max - 1);
    memcpy(buf, b, len);
    buf[len] = '\0';
    return DSV4_OK;
}

/* A fixed-length string's stored bytes (read with its own type: no
 * conversion, which would stop at a NUL); padding after the text must be
 * all NUL (or all spaces for space-padded strings). */
static int read_fixed_str(const reader *r, hid_t a, hid_t ft, const char *where, char *buf, size_t max)
{
    size_t n = H5Tget_size(ft);
    if (n == 0 || n > STR_ATTR_MAX)
        return dsv4_fail(r->st, DSV4_EINPUT, "%s:%s: a string of %zu bytes (at most %d)", r->path, where, n,
                         STR_ATTR_MAX);
    unsigned char *b = malloc(n);
    hid_t mt = H5Tcopy(ft);
    int rc = DSV4_OK;
    if (!b || mt < 0 || H5Aread(a, mt, b) < 0) {
        rc = dsv4_fail(r->st, DSV4_EINPUT, "%s:%s: cannot read string", r->path, where);
    } else {
        size_t len = n;
        if (H5Tget_strpad(ft) == H5T_STR_SPACEPAD) {
            while (len > 0 && b[len - 1] == ' ')
                len--;
        } else {
            len = strnlen((const char *)b, n);
            for (size_t k = len; k < n && !rc; k++)
                if (b[k])
                    rc = dsv4_fail(r->st, DSV4_EINPUT, "%s:%s: contains a NUL byte", r->path, where);
        }
        if (!rc)
            rc = take_text(r, where, b, len, buf, max);
    }
    dsv4_h5_close(mt, H5Tclose);
    free(b);
    return rc;
}

/* A variable-length string (what h5py writes) read as a sequence of bytes,
 * so an embedded NUL is seen. */
static int read_vlen_str(const reader *r, hid_t a, hid_t sp, const char *where, char *buf, size_t max)
{
    hid_t mt = H5Tvlen_create(H5T_NATIVE_UCHAR);
    hvl_t v = {0, NULL};
    int rc;
    if (mt < 0 || H5Aread(a, mt, &v) < 0)
        rc = dsv4_fail(r->st, DSV4_EINPUT, "%s:%s: cannot read string", r->path, where);
    else
        rc = take_text(r, where, v.p ? v.p : (const void *)"", v.p ? v.len : 0, buf, max);
    if (v.p)
        H5Dvlen_reclaim(mt, sp, H5P_DEFAULT, &v);
    dsv4_h5_close(mt, H5Tclose);
    return rc;
}

/* A scalar or 1-element string attribute into buf (max bytes with the NUL),
 * fixed-length (the C writer) or variable-length (h5py). */
static int read_str(const reader *r, hid_t a, const char *where, char *buf, size_t max)
{
    hid_t ft = H5Aget_type(a), sp = H5Aget_space(a);
    int rc;
    htri_t vl = ft < 0 ? -1 : H5Tis_variable_str(ft);
    if (ft < 0 || sp < 0 || H5Tget_class(ft) != H5T_STRING || H5Sget_simple_extent_npoints(sp) != 1 || vl < 0)
        rc = dsv4_fail(r->st, DSV4_EINPUT, "%s:%s: not a string", r->path, where);
    else if (vl)
        rc = read_vlen_str(r, a, sp, where, buf, max);
    else
        rc = read_fixed_str(r, a, ft, where, buf, max);
    dsv4_h5_close(sp, H5Sclose);
    dsv4_h5_close(ft, H5Tclose);
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
    dsv4_h5_close(sp, H5Sclose);
    dsv4_h5_close(ft, H5Tclose);
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
    dsv4_h5_close(sp, H5Sclose);
    dsv4_h5_close(ft, H5Tclose);
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
    if (!dsv4_h5_utf8_ok((const unsigned char *)name, strlen(name))) {
        c->rc = dsv4_fail(c->r->st, DSV4_EINPUT, "%s:/params: an attribute name that is not valid UTF-8",
                          c->r->path);
        return -1;
    }
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

/* Collect names first (the walk has checked the links); datasets are read
 * outside the iteration. */
static herr_t name_cb(hid_t g, const char *name, const H5L_info_t *info, void *data)
{
    (void)g;
    (void)info;
    names *ns = data;
    const reader *r = ns->r;
    if (strlen(name) >= DSV4_NAME_MAX)
        ns->rc = dsv4_fail(r->st, DSV4_EINPUT, "%s:/%s/%s: name longer than %d bytes", r->path,
                           ns->group, name, DSV4_NAME_MAX - 1);
    else if (ns->n >= DSV4_MAX_TENSORS)
        ns->rc = dsv4_fail(r->st, DSV4_EINPUT, "%s:/%s: more than %d datasets", r->path,
                           ns->group, DSV4_MAX_TENSORS);
    else
        snprintf(ns->name[ns->n++], DSV4_NAME_MAX, "%s", name);
    return ns->rc ? -1 : 0;
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

/* The dataset's type must be exactly the storage type of its dtype. */
static int type_matches(hid_t ft, dsv4_dtype dt)
{
    hid_t want = dsv4_h5_file_type(dt);
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
    char where[320]; /* "/inputs/NAME", "/CASE/NAME" in an actuals file */
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
    if (s[0] && (*dt != DSV4_F4E2M1X2 || strcmp(s, DSV4_FP4_PACKING) != 0))
        return dsv4_fail(r->st, DSV4_EINPUT, "%s:%s: packing '%s' (only float4_e2m1fn_x2 with "
                         "%s is known)", r->path, c->where, s, DSV4_FP4_PACKING);
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
    dsv4_h5_close(sp, H5Sclose);
    return rc;
}

/* A scalar's value: in the object header (compact, checksummed) or stored
 * contiguous in this file (h5py's choice); never absent. */
static int read_scalar(const dset_ctx *c, H5D_layout_t layout, dsv4_tensor *t)
{
    const reader *r = c->r;
    if (layout != H5D_COMPACT && layout != H5D_CONTIGUOUS)
        return dsv4_fail(r->st, DSV4_EINPUT, "%s:%s: a scalar must be compact or contiguous", r->path, c->where);
    if (layout == H5D_CONTIGUOUS) {
        haddr_t off = H5Dget_offset(c->d);
        hsize_t fsize = 0;
        if (off == HADDR_UNDEF || H5Dget_storage_size(c->d) != t->nbytes || H5Fget_filesize(r->file, &fsize) < 0 ||
            off > fsize || fsize - off < t->nbytes)
            return dsv4_fail(r->st, DSV4_EINPUT, "%s:%s: the scalar's value is not stored in the file (corrupt "
                             "or partly written)", r->path, c->where);
    }
    if (H5Dread(c->d, dsv4_h5_mem_type(t->dtype), H5S_ALL, H5S_ALL, H5P_DEFAULT, t->data) < 0) {
        char eb[DSV4_H5_ERR_MAX];
        return dsv4_fail(r->st, DSV4_EINPUT, "%s:%s: read error (corrupt data; %s)", r->path, c->where,
                         dsv4_h5_err(eb));
    }
    return DSV4_OK;
}

/* The layout schema 1 wants: scalars as read_scalar says, empty arrays
 * anyhow (nothing is read), other arrays chunked. */
static int read_data(const dset_ctx *c, hid_t dcpl, dsv4_tensor *t)
{
    H5D_layout_t layout = H5Pget_layout(dcpl);
    if (t->ndim == 0)
        return read_scalar(c, layout, t);
    if (t->nbytes == 0)
        return DSV4_OK;
    if (layout != H5D_CHUNKED)
        return dsv4_fail(c->r->st, DSV4_EINPUT, "%s:%s: not chunked (schema 1 wants chunked datasets with "
                         "fletcher32=True)", c->r->path, c->where);
    dsv4_h5_chunked ch = {c->r->path, c->where, c->r->file, c->d, dcpl, t->ndim, t->shape,
                          dsv4_dtype_size(t->dtype), t->data};
    return dsv4_h5_read_chunked(&ch, c->r->st);
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
    /* Refuse a claimed shape over the memory limit before allocating
     * (dsv4_tensors_add checks again, with the running total). */
    size_t esize = dsv4_dtype_size(dt);
    if (numel > dsv4_memory_limit() / (esize ? esize : 1))
        return dsv4_fail(r->st, DSV4_EINPUT, "%s:%s: %" PRIu64 " elements of %s: over the memory "
                         "limit of %" PRIu64 " bytes (--mem-limit)", r->path, c->where, numel,
                         dsv4_dtype_name(dt), dsv4_memory_limit());
    hid_t dcpl = H5Dget_create_plist(c->d);
    if (dcpl < 0)
        return dsv4_fail(r->st, DSV4_EINPUT, "%s:%s: unreadable creation properties", r->path, c->where);
    dsv4_tensor *t = NULL;
    dsv4_status loc = {0, ""};
    if ((rc = dsv4_tensors_add(ts, name, dt, ndim, shape, &t, &loc)))
        rc = dsv4_fail(r->st, rc, "%s:%s: %s", r->path, c->where, loc.msg);
    else
        t->output_dtype = odt;
    if (!rc)
        rc = read_data(c, dcpl, t);
    H5Pclose(dcpl);
    return rc;
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
 * driver holding an image), reads it and, with with_op, checks it against
 * its op. */
static int read_with(const char *path, hid_t fapl, int with_op, dsv4_golden *g, dsv4_status *st)
{
    dsv4_h5_quiet();
    memset(g, 0, sizeof *g);
    dsv4_status loc = {0, ""};
    hid_t f;
    int rc = dsv4_h5_open(path, fapl, MAX_OBJECTS, "golden", &f, &loc);
    if (!rc) {
        reader r = {path, f, &loc};
        rc = read_all(&r, g);
        if (H5Fclose(f) < 0 && !rc)
            rc = dsv4_fail(&loc, DSV4_EINPUT, "%s: error closing (corrupt file)", path);
    }
    if (!rc && with_op)
        rc = dsv4_golden_check_op(path, g, &loc);
    if (rc) {
        dsv4_golden_free(g);
        memset(g, 0, sizeof *g);
        dsv4_fail(st, rc, "%s", loc.msg);
    }
    return rc;
}

int dsv4_golden_read(const char *path, dsv4_golden *g, dsv4_status *st)
{
    return read_with(path, H5P_DEFAULT, 1, g, st);
}

int dsv4_golden_read_schema(const char *path, dsv4_golden *g, dsv4_status *st)
{
    return read_with(path, H5P_DEFAULT, 0, g, st);
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
    hid_t fapl;
    if (dsv4_h5_image_fapl(buf, len, &fapl)) {
        memset(g, 0, sizeof *g);
        return dsv4_fail(st, DSV4_ERUNTIME, "%s: cannot set up an in-memory HDF5 file", name);
    }
    int rc = read_with(name, fapl, 1, g, st);
    H5Pclose(fapl);
    return rc;
}

/* ---- groups of tensors in other files (actual.c) ---- */

int dsv4_h5_read_group(const char *path, hid_t file, const char *group, dsv4_tensors *ts, dsv4_status *st)
{
    reader r = {path, file, st};
    return read_tensors(&r, group, ts);
}

int dsv4_h5_str_attr(const char *path, hid_t loc, const char *name, const char *where, char *buf, size_t max,
                     dsv4_status *st)
{
    reader r = {path, -1, st};
    return str_attr(&r, loc, name, where, 0, buf, max);
}

int dsv4_h5_int_attr(const char *path, hid_t file, const char *name, int64_t *v, dsv4_status *st)
{
    reader r = {path, file, st};
    return int_attr(&r, file, name, 0, v);
}
