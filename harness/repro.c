/* repro.c - a replayable file per failing case (issue 8.2): a schema-1
 * golden (inputs, expected outputs, params, seed) that `dsv4check check`
 * replays, plus the implementation's outputs under /actual for people and
 * h5py (the schema-1 reader ignores groups it does not know). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <hdf5.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "golden.h"
#include "repro.h"

/* The HDF5 storage type of a dtype, as data/README.md lists it. */
static hid_t storage_type(dsv4_dtype dt)
{
    switch (dt) {
    case DSV4_F64: return H5T_NATIVE_DOUBLE;
    case DSV4_F32: return H5T_NATIVE_FLOAT;
    case DSV4_I64: return H5T_NATIVE_INT64;
    case DSV4_I32: return H5T_NATIVE_INT32;
    case DSV4_BF16:
    case DSV4_F16: return H5T_NATIVE_UINT16;
    default: return H5T_NATIVE_UINT8;
    }
}

static int write_string_attr(hid_t obj, const char *name, const char *value)
{
    hid_t t = H5Tcopy(H5T_C_S1), s = H5Screate(H5S_SCALAR);
    H5Tset_size(t, strlen(value) + 1);
    hid_t a = H5Acreate2(obj, name, t, s, H5P_DEFAULT, H5P_DEFAULT);
    int bad = a < 0 || H5Awrite(a, t, value) < 0;
    if (a >= 0)
        H5Aclose(a);
    H5Sclose(s);
    H5Tclose(t);
    return bad;
}

static int write_actual(const char *path, const dsv4_tensors *actual, dsv4_status *st)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    if (f < 0)
        return dsv4_fail(st, DSV4_ERUNTIME, "%s: cannot reopen to add /actual", path);
    hid_t g = H5Gcreate2(f, "actual", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    int bad = g < 0;
    for (int k = 0; !bad && k < actual->n; k++) {
        const dsv4_tensor *t = &actual->t[k];
        hsize_t dims[DSV4_MAX_DIMS];
        for (int d = 0; d < t->ndim; d++)
            dims[d] = (hsize_t)t->shape[d];
        hid_t s = t->ndim ? H5Screate_simple(t->ndim, dims, NULL) : H5Screate(H5S_SCALAR);
        hid_t ds = H5Dcreate2(g, t->name, storage_type(t->dtype), s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        bad = ds < 0 || (t->nbytes && H5Dwrite(ds, storage_type(t->dtype), H5S_ALL, H5S_ALL, H5P_DEFAULT,
                                               t->data) < 0) ||
              write_string_attr(ds, "dtype", dsv4_dtype_name(t->dtype));
        if (ds >= 0)
            H5Dclose(ds);
        H5Sclose(s);
    }
    if (!bad)
        bad = write_string_attr(g, "note", "the implementation's outputs; /outputs holds the expected ones");
    if (g >= 0)
        H5Gclose(g);
    if (H5Fclose(f) < 0)
        bad = 1;
    return bad ? dsv4_fail(st, DSV4_ERUNTIME, "%s: cannot write /actual", path) : DSV4_OK;
}

static void file_name(const char *name, char *out, size_t len)
{
    size_t k = 0;
    for (; name[k] && k + 1 < len; k++) {
        char ch = name[k];
        int ok = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
                 ch == '.' || ch == '_' || ch == '-';
        out[k] = ok ? ch : '_';
    }
    out[k] = '\0';
}

int dsv4_write_repro(const char *dir, const dsv4_op *op, const dsv4_opctx *c,
                     const dsv4_tensors *in, const dsv4_tensors *expected,
                     const dsv4_tensors *actual, dsv4_case_result *r, dsv4_status *st)
{
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return dsv4_fail(st, DSV4_EINPUT, "--repro-dir %s: cannot create: %s", dir, strerror(errno));
    char base[200], path[sizeof r->repro_file];
    file_name(r->name, base, sizeof base);
    snprintf(path, sizeof path, "%s/%s.h5", dir, base);
    /* A shallow view: the golden writer only reads these tensors. */
    static const dsv4_golden zero;
    dsv4_golden g = zero;
    g.schema = DSV4_SCHEMA_VERSION;
    snprintf(g.op, sizeof g.op, "%s", op->name);
    snprintf(g.variant, sizeof g.variant, "%s", dsv4_op_variant_name(op, c->variant));
    snprintf(g.case_name, sizeof g.case_name, "%s", r->name);
    g.seed = c->seed;
    snprintf(g.generator, sizeof g.generator, "dsv4check %s (%s) --repro-dir", DSV4_VERSION, DSV4_GIT_REV);
    time_t now = time(NULL);
    struct tm tmv;
    gmtime_r(&now, &tmv);
    strftime(g.created, sizeof g.created, "%Y-%m-%dT%H:%M:%SZ", &tmv);
    g.params = *c->params;
    g.inputs = *in;
    g.outputs = *expected;
    int rc = dsv4_golden_write(path, &g, 1, st);
    if (!rc)
        rc = write_actual(path, actual, st);
    if (!rc)
        snprintf(r->repro_file, sizeof r->repro_file, "%s", path);
    return rc;
}
