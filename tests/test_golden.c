#define _POSIX_C_SOURCE 200809L
/* test_golden.c - golden HDF5 files: round trips, refusals, bad files,
 * corruption detection, HDF5 id leaks. */
#include <dirent.h>
#include <hdf5.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../harness/golden.h"
#include "testutil.h"

/* libhdf5 1.10.8 itself leaks a little on some corrupt-file error paths
 * (e.g. an object header failing its checksum: H5Fopen + H5Aexists +
 * H5Fclose alone leaks 424 bytes).  Those are not ours; our own HDF5 ids are
 * counted by test_no_id_leaks instead. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) { return "leak:libhdf5_serial.so\n"; }

static char tdir[256];

/* Open ids of the kinds golden.c creates (predefined types and default
 * property lists are counted too, so compare before and after). */
static long open_ids(void)
{
    static const H5I_type_t kinds[] = {H5I_FILE, H5I_GROUP, H5I_DATATYPE, H5I_DATASPACE,
                                       H5I_DATASET, H5I_ATTR, H5I_GENPROP_LST};
    long total = 0;
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        hsize_t n = 0;
        H5Inmembers(kinds[k], &n);
        total += (long)n;
    }
    return total;
}

static void tdir_setup(void)
{
    const char *base = getenv("TMPDIR");
    snprintf(tdir, sizeof tdir, "%s/dsv4golden.XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(tdir))
        abort();
}

static void tdir_teardown(void)
{
    DIR *d = opendir(tdir);
    if (!d)
        return;
    struct dirent *e;
    char p[600];
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(p, sizeof p, "%s/%s", tdir, e->d_name);
        if (rmdir(p) != 0)
            remove(p);
    }
    closedir(d);
    rmdir(tdir);
}

static const char *tpath(char *buf, const char *name)
{
    snprintf(buf, 600, "%s/%s", tdir, name);
    return buf;
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void)
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static dsv4_tensor *add(dsv4_tensors *ts, const char *name, dsv4_dtype dt, int ndim,
                        const int64_t *shape)
{
    dsv4_tensor *t = NULL;
    dsv4_status st = {0, ""};
    ck_assert_msg(dsv4_tensors_add(ts, name, dt, ndim, shape, &t, &st) == DSV4_OK, "%s", st.msg);
    unsigned char *p = t->data;
    for (size_t k = 0; k < t->nbytes; k++)
        p[k] = (unsigned char)rnd();
    return t;
}

static void base_golden(dsv4_golden *g, const char *op)
{
    memset(g, 0, sizeof *g);
    g->schema = DSV4_SCHEMA_VERSION;
    snprintf(g->op, sizeof g->op, "%s", op);
    snprintf(g->variant, sizeof g->variant, "validate_topk=none");
    snprintf(g->case_name, sizeof g->case_name, "unit/%s", op);
    snprintf(g->generator, sizeof g->generator, "dsv4check test");
    snprintf(g->created, sizeof g->created, "2026-12-01T00:00:00Z");
    g->seed = 0xFEDCBA9876543210ull;
}

/* One small golden with an int32 input and output. */
static void small_golden(dsv4_golden *g, int64_t n)
{
    base_golden(g, "combine_topk_swa_indices");
    int64_t s[1] = {n};
    add(&g->inputs, "x", DSV4_I32, 1, s);
    add(&g->outputs, "y", DSV4_I32, 1, s);
    dsv4_params_set_int(&g->params, "topk", 512, NULL);
}

static void write_ok(const char *p, const dsv4_golden *g, int force)
{
    dsv4_status st = {0, ""};
    ck_assert_msg(dsv4_golden_write(p, g, force, &st) == DSV4_OK, "%s", st.msg);
}

static void assert_tensors_equal(const dsv4_tensors *a, const dsv4_tensors *b)
{
    ck_assert_int_eq(a->n, b->n);
    for (int k = 0; k < a->n; k++) {
        const dsv4_tensor *x = &a->t[k];
        const dsv4_tensor *y = dsv4_tensors_get(b, x->name);
        ck_assert_msg(y != NULL, "tensor %s missing", x->name);
        ck_assert_int_eq(x->dtype, y->dtype);
        ck_assert_int_eq(x->output_dtype, y->output_dtype);
        ck_assert_msg(dsv4_tensor_same_shape(x, y), "shape of %s", x->name);
        ck_assert_uint_eq(x->nbytes, y->nbytes);
        ck_assert_msg(x->nbytes == 0 || memcmp(x->data, y->data, x->nbytes) == 0, "data of %s",
                      x->name);
    }
}

static void assert_golden_equal(const dsv4_golden *a, const dsv4_golden *b)
{
    ck_assert_int_eq(b->schema, 1);
    ck_assert_str_eq(a->op, b->op);
    ck_assert_str_eq(a->variant, b->variant);
    ck_assert_str_eq(a->case_name, b->case_name);
    ck_assert_str_eq(a->generator, b->generator);
    ck_assert_str_eq(a->created, b->created);
    ck_assert(a->seed == b->seed);
    ck_assert_int_eq(a->params.n, b->params.n);
    for (int k = 0; k < a->params.n; k++) {
        const dsv4_param *p = &a->params.p[k], *q = dsv4_params_find(&b->params, p->name);
        ck_assert_msg(q != NULL, "param %s missing", p->name);
        ck_assert_int_eq(p->type, q->type);
        if (p->type == DSV4_P_INT)
            ck_assert(p->i == q->i);
        if (p->type == DSV4_P_FLOAT)
            ck_assert(memcmp(&p->f, &q->f, sizeof p->f) == 0);
        if (p->type == DSV4_P_STR)
            ck_assert_str_eq(p->s, q->s);
        if (p->type == DSV4_P_INTLIST) {
            ck_assert_int_eq(p->n, q->n);
            for (int j = 0; j < p->n; j++)
                ck_assert(p->list[j] == q->list[j]);
        }
    }
    assert_tensors_equal(&a->inputs, &b->inputs);
    assert_tensors_equal(&a->outputs, &b->outputs);
}

static void roundtrip(const dsv4_golden *g, const char *name)
{
    char p[600];
    tpath(p, name);
    write_ok(p, g, 1);
    dsv4_golden r;
    dsv4_status st = {0, ""};
    ck_assert_msg(dsv4_golden_read(p, &r, &st) == DSV4_OK, "%s", st.msg);
    assert_golden_equal(g, &r);
    dsv4_golden_free(&r);
}

/* Expect DSV4_EINPUT with every given fragment in the message. */
static void read_fails(const char *p, const char *frag1, const char *frag2)
{
    dsv4_golden r;
    dsv4_status st = {0, ""};
    int rc = dsv4_golden_read(p, &r, &st);
    ck_assert_msg(rc == DSV4_EINPUT, "rc %d for %s: %s", rc, p, st.msg);
    ck_assert_msg(strstr(st.msg, p) != NULL, "path not in '%s'", st.msg);
    ck_assert_msg(!frag1 || strstr(st.msg, frag1), "'%s' not in '%s'", frag1, st.msg);
    ck_assert_msg(!frag2 || strstr(st.msg, frag2), "'%s' not in '%s'", frag2, st.msg);
    ck_assert_int_eq(r.inputs.n + r.outputs.n, 0);
    dsv4_golden_free(&r);
}

START_TEST(test_all_dtypes)
{
    dsv4_golden g;
    base_golden(&g, "all_dtypes");
    static const int64_t shapes[][3] = {{3, 5, 7}, {64, 1, 0}, {2, 300, 5}, {1, 1, 1}};
    for (int dt = 0; dt < DSV4_DTYPE_COUNT; dt++) {
        char name[32];
        snprintf(name, sizeof name, "in_%s", dsv4_dtype_name((dsv4_dtype)dt));
        add(&g.inputs, name, (dsv4_dtype)dt, 1 + dt % 3, shapes[dt % 4]);
    }
    /* bf16 and fp8 special bit patterns survive as raw codes. */
    uint16_t *bf = dsv4_tensors_find(&g.inputs, "in_bfloat16")->data;
    bf[0] = 0x7FC1; /* NaN with payload */
    bf[1] = 0x8000; /* -0 */
    double *d = dsv4_tensors_find(&g.inputs, "in_float64")->data;
    uint64_t nan_bits = 0x7FF0000000000123ull; /* signalling NaN payload */
    memcpy(&d[0], &nan_bits, 8);
    int64_t big[2] = {300, 100}, wide[2] = {2, 100000};
    add(&g.inputs, "multi_chunk_f32", DSV4_F32, 2, big);
    add(&g.inputs, "wide_rows_u8", DSV4_U8, 2, wide);
    int64_t s2[2] = {4, 6};
    dsv4_tensor *o = add(&g.outputs, "out_f32", DSV4_F32, 2, s2);
    o->output_dtype = DSV4_BF16;
    o = add(&g.outputs, "out_f64", DSV4_F64, 2, s2);
    o->output_dtype = DSV4_F32;
    add(&g.outputs, "out_fp4", DSV4_F4E2M1X2, 2, s2);
    add(&g.outputs, "out_i32", DSV4_I32, 1, s2);
    roundtrip(&g, "dtypes.h5");

    /* Storage types as h5py sees them, and the fp4 packing attribute. */
    char p[600];
    hid_t f = H5Fopen(tpath(p, "dtypes.h5"), H5F_ACC_RDONLY, H5P_DEFAULT);
    ck_assert(f >= 0);
    hid_t ds = H5Dopen2(f, "/inputs/in_bfloat16", H5P_DEFAULT), t = H5Dget_type(ds);
    ck_assert(H5Tequal(t, H5T_STD_U16LE) > 0);
    H5Tclose(t);
    H5Dclose(ds);
    ck_assert(H5Aexists_by_name(f, "/outputs/out_fp4", "packing", H5P_DEFAULT) > 0);
    ck_assert(H5Aexists_by_name(f, "/outputs/out_f32", "output_dtype", H5P_DEFAULT) > 0);
    ck_assert(H5Aexists_by_name(f, "/outputs/out_i32", "output_dtype", H5P_DEFAULT) == 0);
    H5Fclose(f);
    dsv4_golden_free(&g);
}
END_TEST

START_TEST(test_params)
{
    dsv4_golden g;
    base_golden(&g, "params");
    dsv4_param p;
    memset(&p, 0, sizeof p);
    dsv4_params_set_int(&g.params, "window_size", 128, NULL);
    dsv4_params_set_int(&g.params, "min", INT64_MIN, NULL);
    dsv4_params_set_int(&g.params, "max", INT64_MAX, NULL);
    snprintf(p.name, sizeof p.name, "eps");
    p.type = DSV4_P_FLOAT;
    p.f = 1e-300;
    dsv4_params_set(&g.params, &p, NULL);
    snprintf(p.name, sizeof p.name, "negzero");
    p.f = -0.0;
    dsv4_params_set(&g.params, &p, NULL);
    p.type = DSV4_P_STR;
    snprintf(p.name, sizeof p.name, "scale_rule");
    snprintf(p.s, sizeof p.s, "ocp \xc3\xa9");
    dsv4_params_set(&g.params, &p, NULL);
    snprintf(p.name, sizeof p.name, "empty_str");
    p.s[0] = '\0';
    dsv4_params_set(&g.params, &p, NULL);
    snprintf(p.name, sizeof p.name, "long_str");
    memset(p.s, 'z', sizeof p.s - 1);
    p.s[sizeof p.s - 1] = '\0';
    dsv4_params_set(&g.params, &p, NULL);
    p.type = DSV4_P_INTLIST;
    snprintf(p.name, sizeof p.name, "empty_list");
    p.n = 0;
    dsv4_params_set(&g.params, &p, NULL);
    snprintf(p.name, sizeof p.name, "one");
    p.n = 1;
    p.list[0] = -7;
    dsv4_params_set(&g.params, &p, NULL);
    snprintf(p.name, sizeof p.name, "query_lens");
    p.n = DSV4_PARAM_LIST_MAX;
    for (int k = 0; k < p.n; k++)
        p.list[k] = (int64_t)rnd();
    dsv4_params_set(&g.params, &p, NULL);
    roundtrip(&g, "params.h5");
    dsv4_golden_free(&g);
}
END_TEST

START_TEST(test_scalar_and_empty)
{
    dsv4_golden g;
    base_golden(&g, "shapes");
    g.seed = UINT64_MAX;
    int64_t none[1] = {0}, z[3] = {4, 0, 3}, one[1] = {0};
    add(&g.inputs, "scalar_f64", DSV4_F64, 0, none);
    add(&g.inputs, "scalar_bf16", DSV4_BF16, 0, none);
    add(&g.inputs, "empty_i32", DSV4_I32, 3, z);
    add(&g.outputs, "empty_1d", DSV4_F32, 1, one);
    roundtrip(&g, "shapes.h5");
    /* The seed's bit pattern is stored as int64. */
    char p[600];
    hid_t f = H5Fopen(tpath(p, "shapes.h5"), H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t a = H5Aopen(f, "seed", H5P_DEFAULT);
    int64_t seed = 0;
    ck_assert(H5Aread(a, H5T_NATIVE_INT64, &seed) >= 0);
    ck_assert(seed == -1);
    H5Aclose(a);
    H5Fclose(f);
    dsv4_golden_free(&g);
}
END_TEST

static int tmp_files_left(void)
{
    DIR *d = opendir(tdir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        n += strstr(e->d_name, ".tmp.") != NULL;
    if (d)
        closedir(d);
    return n;
}

START_TEST(test_overwrite)
{
    char p[600];
    tpath(p, "ow.h5");
    dsv4_golden a, b, r;
    small_golden(&a, 100);
    small_golden(&b, 50);
    write_ok(p, &a, 0);
    dsv4_status st = {0, ""};
    ck_assert_int_eq(dsv4_golden_write(p, &b, 0, &st), DSV4_EINPUT);
    ck_assert_msg(strstr(st.msg, p) && strstr(st.msg, "exists (use --force to overwrite)"), "%s",
                  st.msg);
    ck_assert_int_eq(tmp_files_left(), 0);
    ck_assert(dsv4_golden_read(p, &r, &st) == DSV4_OK);
    assert_golden_equal(&a, &r); /* the old file is intact */
    dsv4_golden_free(&r);
    write_ok(p, &b, 1);
    ck_assert(dsv4_golden_read(p, &r, &st) == DSV4_OK);
    assert_golden_equal(&b, &r);
    dsv4_golden_free(&r);
    ck_assert_int_eq(tmp_files_left(), 0);
    dsv4_golden_free(&a);
    dsv4_golden_free(&b);
}
END_TEST

START_TEST(test_write_errors_leave_nothing)
{
    char p[600], q[600];
    dsv4_golden g;
    small_golden(&g, 10);
    dsv4_status st = {0, ""};
    tpath(p, "nodir/x.h5");
    ck_assert_int_ne(dsv4_golden_write(p, &g, 1, &st), DSV4_OK);
    ck_assert_msg(strstr(st.msg, p), "%s", st.msg);
    /* A bad tensor fails half-way: neither the target nor a temp remains. */
    tpath(q, "half.h5");
    g.outputs.t[0].nbytes--;
    dsv4_status_clear(&st);
    ck_assert_int_eq(dsv4_golden_write(q, &g, 0, &st), DSV4_EINPUT);
    ck_assert_msg(strstr(st.msg, "bytes do not match"), "%s", st.msg);
    g.outputs.t[0].nbytes++;
    struct stat sb;
    ck_assert(stat(q, &sb) != 0);
    ck_assert_int_eq(tmp_files_left(), 0);
    dsv4_golden_free(&g);
}
END_TEST

static void write_bytes(const char *p, const void *buf, size_t n)
{
    FILE *fp = fopen(p, "wb");
    ck_assert(fp != NULL);
    ck_assert(n == 0 || fwrite(buf, 1, n, fp) == n);
    ck_assert(fclose(fp) == 0);
}

static unsigned char *read_bytes(const char *p, size_t *n)
{
    FILE *fp = fopen(p, "rb");
    ck_assert(fp != NULL);
    fseek(fp, 0, SEEK_END);
    long len = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    unsigned char *buf = malloc((size_t)len + 1);
    ck_assert(buf && fread(buf, 1, (size_t)len, fp) == (size_t)len);
    fclose(fp);
    *n = (size_t)len;
    return buf;
}

static void make_small(const char *p)
{
    dsv4_golden g;
    small_golden(&g, 4096);
    write_ok(p, &g, 1);
    dsv4_golden_free(&g);
}

START_TEST(test_bad_files)
{
    char p[600], good[600];
    read_fails(tpath(p, "missing.h5"), "cannot open", NULL);
    read_fails(tdir, "directory", NULL);
    write_bytes(tpath(p, "empty.h5"), "", 0);
    read_fails(p, "empty file", NULL);
    unsigned char junk[5000];
    for (size_t k = 0; k < sizeof junk; k++)
        junk[k] = (unsigned char)rnd();
    write_bytes(tpath(p, "random.h5"), junk, sizeof junk);
    read_fails(p, "not an HDF5 file", NULL);
    make_small(tpath(good, "good.h5"));
    size_t n;
    unsigned char *buf = read_bytes(good, &n);
    write_bytes(tpath(p, "trunc.h5"), buf, n / 2);
    read_fails(p, NULL, NULL);
    write_bytes(tpath(p, "sig_only.h5"), buf, 8);
    read_fails(p, NULL, NULL);
    free(buf);
}
END_TEST

/* Copies good.h5 to name and opens the copy for raw edits. */
static hid_t edit_copy(const char *name, char *p)
{
    char good[600];
    make_small(tpath(good, "good.h5"));
    size_t n;
    unsigned char *buf = read_bytes(good, &n);
    write_bytes(tpath(p, name), buf, n);
    free(buf);
    hid_t f = H5Fopen(p, H5F_ACC_RDWR, H5P_DEFAULT);
    ck_assert(f >= 0);
    return f;
}

static void set_str_attr(hid_t loc, const char *obj, const char *name, const char *v)
{
    if (H5Aexists_by_name(loc, obj, name, H5P_DEFAULT) > 0)
        ck_assert(H5Adelete_by_name(loc, obj, name, H5P_DEFAULT) >= 0);
    hid_t t = H5Tcopy(H5T_C_S1), s = H5Screate(H5S_SCALAR);
    H5Tset_size(t, strlen(v) + 1);
    hid_t a = H5Acreate_by_name(loc, obj, name, t, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    ck_assert(a >= 0 && H5Awrite(a, t, v) >= 0);
    H5Aclose(a);
    H5Sclose(s);
    H5Tclose(t);
}

START_TEST(test_schema_and_structure)
{
    char p[600];
    hid_t f = edit_copy("schema2.h5", p);
    hid_t a = H5Aopen(f, "dsv4check_schema", H5P_DEFAULT);
    int64_t two = 2;
    ck_assert(H5Awrite(a, H5T_NATIVE_INT64, &two) >= 0);
    H5Aclose(a);
    H5Fclose(f);
    read_fails(p, "schema version 2, this dsv4check reads 1", NULL);

    f = edit_copy("noschema.h5", p);
    H5Adelete(f, "dsv4check_schema");
    H5Fclose(f);
    read_fails(p, "dsv4check_schema", NULL);

    f = edit_copy("noop.h5", p);
    H5Adelete(f, "op");
    H5Fclose(f);
    read_fails(p, "'op'", NULL);

    f = edit_copy("wrongdtype.h5", p);
    set_str_attr(f, "/outputs/y", "dtype", "float32");
    H5Fclose(f);
    read_fails(p, ":/outputs/y", "32-bit signed integer");

    f = edit_copy("bf16dtype.h5", p);
    set_str_attr(f, "/outputs/y", "dtype", "bfloat16");
    H5Fclose(f);
    read_fails(p, ":/outputs/y", "16-bit unsigned");

    f = edit_copy("unknowndtype.h5", p);
    set_str_attr(f, "/inputs/x", "dtype", "float7");
    H5Fclose(f);
    read_fails(p, ":/inputs/x", "unknown dtype");

    f = edit_copy("nodtype.h5", p);
    ck_assert(H5Adelete_by_name(f, "/inputs/x", "dtype", H5P_DEFAULT) >= 0);
    H5Fclose(f);
    read_fails(p, ":/inputs/x", "dtype");

    f = edit_copy("nooutputs.h5", p);
    ck_assert(H5Ldelete(f, "/outputs", H5P_DEFAULT) >= 0);
    H5Fclose(f);
    read_fails(p, "/outputs", NULL);

    f = edit_copy("noparams.h5", p);
    ck_assert(H5Ldelete(f, "/params", H5P_DEFAULT) >= 0);
    H5Fclose(f);
    read_fails(p, "/params", NULL);

    f = edit_copy("boolparam.h5", p);
    hid_t s = H5Screate(H5S_SCALAR);
    hid_t en = H5Tenum_create(H5T_NATIVE_INT8); /* h5py's bool */
    int8_t no = 0, yes = 1;
    H5Tenum_insert(en, "FALSE", &no);
    H5Tenum_insert(en, "TRUE", &yes);
    a = H5Acreate_by_name(f, "/params", "flag", en, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, en, &yes);
    H5Aclose(a);
    H5Tclose(en);
    H5Sclose(s);
    H5Fclose(f);
    read_fails(p, "/params/flag", NULL);

    /* An unchecked (contiguous, unfiltered) array is refused. */
    f = edit_copy("contig.h5", p);
    hsize_t dim = 8;
    s = H5Screate_simple(1, &dim, NULL);
    hid_t d = H5Dcreate2(f, "/inputs/plain", H5T_STD_I32LE, s, H5P_DEFAULT, H5P_DEFAULT,
                         H5P_DEFAULT);
    int32_t v[8] = {0};
    H5Dwrite(d, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, v);
    H5Dclose(d);
    H5Sclose(s);
    set_str_attr(f, "/inputs/plain", "dtype", "int32");
    H5Fclose(f);
    read_fails(p, ":/inputs/plain", "fletcher32=True");
    ck_assert_int_eq((int)H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL), 0);
}
END_TEST

/* h5py writes variable-length UTF-8 strings and lets users pick int32. */
static void vlen_str_attr(hid_t loc, const char *obj, const char *name, const char *v)
{
    hid_t t = H5Tcopy(H5T_C_S1), s = H5Screate(H5S_SCALAR);
    H5Tset_size(t, H5T_VARIABLE);
    H5Tset_cset(t, H5T_CSET_UTF8);
    hid_t a = H5Acreate_by_name(loc, obj, name, t, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    ck_assert(a >= 0 && H5Awrite(a, t, &v) >= 0);
    H5Aclose(a);
    H5Sclose(s);
    H5Tclose(t);
}

START_TEST(test_vlen_strings)
{
    char p[600];
    hid_t f = H5Fcreate(tpath(p, "vlen.h5"), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t s = H5Screate(H5S_SCALAR);
    int32_t one = 1;
    hid_t a = H5Acreate2(f, "dsv4check_schema", H5T_STD_I32LE, s, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, H5T_NATIVE_INT32, &one);
    H5Aclose(a);
    vlen_str_attr(f, ".", "op", "combine_topk_swa_indices");
    vlen_str_attr(f, ".", "variant", "default");
    vlen_str_attr(f, ".", "case", "h5py/\xe2\x9c\x93");
    hid_t g = H5Gcreate2(f, "params", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    a = H5Acreate2(g, "topk", H5T_STD_I32LE, s, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, H5T_NATIVE_INT32, &one);
    H5Aclose(a);
    hsize_t three = 3;
    hid_t s3 = H5Screate_simple(1, &three, NULL);
    int32_t lens[3] = {5, 6, 7};
    a = H5Acreate2(g, "query_lens", H5T_STD_I32LE, s3, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, H5T_NATIVE_INT32, lens);
    H5Aclose(a);
    vlen_str_attr(g, ".", "scale_rule", "ocp");
    H5Gclose(g);
    H5Gclose(H5Gcreate2(f, "inputs", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    g = H5Gcreate2(f, "outputs", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    hsize_t chunk = 2;
    H5Pset_chunk(dcpl, 1, &chunk);
    H5Pset_fletcher32(dcpl);
    hid_t d = H5Dcreate2(g, "lens", H5T_STD_I32LE, s3, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    H5Dwrite(d, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, lens);
    H5Dclose(d);
    vlen_str_attr(g, "lens", "dtype", "int32");
    H5Pclose(dcpl);
    H5Gclose(g);
    H5Sclose(s3);
    H5Sclose(s);
    H5Fclose(f);

    dsv4_golden r;
    dsv4_status st = {0, ""};
    ck_assert_msg(dsv4_golden_read(p, &r, &st) == DSV4_OK, "%s", st.msg);
    ck_assert_str_eq(r.op, "combine_topk_swa_indices");
    ck_assert_str_eq(r.case_name, "h5py/\xe2\x9c\x93");
    ck_assert_str_eq(r.generator, "");
    ck_assert_int_eq(dsv4_params_find(&r.params, "topk")->type, DSV4_P_INT);
    ck_assert_int_eq(dsv4_params_int(&r.params, "topk"), 1);
    const int64_t *ql;
    ck_assert_int_eq(dsv4_params_list(&r.params, "query_lens", &ql), 3);
    ck_assert(ql[2] == 7);
    ck_assert_str_eq(dsv4_params_str(&r.params, "scale_rule"), "ocp");
    const dsv4_tensor *t = dsv4_tensors_get(&r.outputs, "lens");
    ck_assert(t && t->dtype == DSV4_I32 && ((int32_t *)t->data)[1] == 6);
    dsv4_golden_free(&r);
}
END_TEST

/* Flip one byte at a time across a whole golden: each flip must be reported
 * as DSV4_EINPUT or read back exactly the original contents. */
START_TEST(test_corruption_flips)
{
    char good[600], p[600];
    dsv4_golden g;
    small_golden(&g, 4096);
    write_ok(tpath(good, "flip_src.h5"), &g, 1);
    size_t n;
    unsigned char *orig = read_bytes(good, &n);
    unsigned char *buf = malloc(n);
    ck_assert(buf != NULL);

    /* Where the raw chunks lie: every metadata byte is flipped, and every
     * 7th chunk byte (Fletcher32 catches any of them; this keeps ASan fast). */
    hid_t f = H5Fopen(good, H5F_ACC_RDONLY, H5P_DEFAULT);
    hsize_t off0 = 0, csize = 0, ysize = 0;
    haddr_t caddr = 0, yaddr = 0;
    unsigned mask;
    hid_t d = H5Dopen2(f, "/inputs/x", H5P_DEFAULT);
    ck_assert(H5Dget_chunk_info_by_coord(d, &off0, &mask, &caddr, &csize) >= 0);
    H5Dclose(d);
    d = H5Dopen2(f, "/outputs/y", H5P_DEFAULT);
    ck_assert(H5Dget_chunk_info_by_coord(d, &off0, &mask, &yaddr, &ysize) >= 0);
    H5Dclose(d);
    H5Fclose(f);
    ck_assert(caddr + csize <= n && yaddr + ysize <= n);

    tpath(p, "flipped.h5");
    int caught = 0, same = 0;
    long ids_before = open_ids();
    size_t flips = 0;
    for (size_t off = 0; off < n; off++) {
        int in_data = (off >= caddr && off < caddr + csize) ||
                      (off >= yaddr && off < yaddr + ysize);
        if (in_data && off % 7 != 0)
            continue;
        flips++;
        memcpy(buf, orig, n);
        buf[off] ^= (unsigned char)(off % 3 == 0 ? 0xFF : 1u << (off % 8));
        write_bytes(p, buf, n);
        dsv4_golden r;
        dsv4_status st = {0, ""};
        int rc = dsv4_golden_read(p, &r, &st);
        if (rc == DSV4_OK) {
            assert_golden_equal(&g, &r);
            ck_assert_msg(off < caddr || off >= caddr + csize, "flip at %zu in data not caught",
                          off);
            same++;
        } else {
            ck_assert_msg(rc == DSV4_EINPUT && strstr(st.msg, p), "offset %zu: rc %d %s", off,
                          rc, st.msg);
            caught++;
        }
        dsv4_golden_free(&r);
    }
    ck_assert_int_eq((int)H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL), 0);
    ck_assert_int_eq(open_ids(), ids_before);
    ck_assert_int_gt(caught, (int)(csize / 7));
    fprintf(stderr, "corruption: %zu of %zu bytes flipped, %d caught, %d harmless\n", flips, n,
            caught, same);
    free(buf);
    free(orig);
    dsv4_golden_free(&g);
}
END_TEST

START_TEST(test_no_id_leaks)
{
    char p[600];
    dsv4_golden r;
    dsv4_status st;
    const char *bad[] = {"missing.h5", "schema2.h5", "nodtype.h5", "nooutputs.h5", "trunc.h5",
                         "wrongdtype.h5"};
    hid_t f = edit_copy("schema2.h5", p);
    hid_t a = H5Aopen(f, "dsv4check_schema", H5P_DEFAULT);
    int64_t two = 2;
    H5Awrite(a, H5T_NATIVE_INT64, &two);
    H5Aclose(a);
    H5Fclose(f);
    f = edit_copy("nodtype.h5", p);
    H5Adelete_by_name(f, "/outputs/y", "dtype", H5P_DEFAULT);
    H5Fclose(f);
    f = edit_copy("nooutputs.h5", p);
    H5Ldelete(f, "/outputs", H5P_DEFAULT);
    H5Fclose(f);
    f = edit_copy("wrongdtype.h5", p);
    set_str_attr(f, "/inputs/x", "dtype", "uint8");
    H5Fclose(f);
    size_t n;
    unsigned char *buf = read_bytes(tpath(p, "good.h5"), &n);
    write_bytes(tpath(p, "trunc.h5"), buf, n - 100);
    free(buf);
    long before = open_ids();
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        dsv4_status_clear(&st);
        ck_assert_int_eq(dsv4_golden_read(tpath(p, bad[k]), &r, &st), DSV4_EINPUT);
        dsv4_golden_free(&r);
    }
    ck_assert_int_eq(dsv4_golden_read(tpath(p, "good.h5"), &r, &st), DSV4_OK);
    dsv4_golden_free(&r);
    dsv4_golden g;
    small_golden(&g, 10);
    write_ok(tpath(p, "again.h5"), &g, 1);
    dsv4_golden_free(&g);
    ck_assert_int_eq((int)H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL), 0);
    ck_assert_int_eq(open_ids(), before);
}
END_TEST

/* The h5py example of data/README.md, when python3-h5py is installed. */
START_TEST(test_h5py_script)
{
    const char *script = "tests/h5py_write_golden.py";
    if (access(script, R_OK) != 0 ||
        system("/usr/bin/python3 -c 'import h5py, numpy' >/dev/null 2>&1") != 0) {
        fprintf(stderr, "test_h5py_script: skipped (no h5py or not run from the repo root)\n");
        return;
    }
    char p[600], cmd[1400];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s %s", script, tpath(p, "h5py.h5"));
    ck_assert_int_eq(system(cmd), 0);
    dsv4_golden r;
    dsv4_status st = {0, ""};
    ck_assert_msg(dsv4_golden_read(p, &r, &st) == DSV4_OK, "%s", st.msg);
    ck_assert_str_eq(r.op, "combine_topk_swa_indices");
    ck_assert_int_eq(dsv4_params_int(&r.params, "window_size"), 4);
    const dsv4_tensor *ci = dsv4_tensors_get(&r.outputs, "combined_indices");
    ck_assert(ci && ci->dtype == DSV4_I32 && ci->ndim == 2 && ci->shape[1] == 128);
    ck_assert(dsv4_tensors_get(&r.inputs, "topk_indices") != NULL);
    int32_t first = ((int32_t *)ci->data)[ci->shape[1]];
    dsv4_golden_free(&r);

    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s %s --corrupt", script,
             tpath(p, "h5py_bad.h5"));
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_msg(dsv4_golden_read(p, &r, &st) == DSV4_OK, "%s", st.msg);
    ci = dsv4_tensors_get(&r.outputs, "combined_indices");
    ck_assert_int_eq(((int32_t *)ci->data)[ci->shape[1]], first + 1);
    dsv4_golden_free(&r);
}
END_TEST

int main(void)
{
    dsv4_h5_quiet();
    Suite *s = suite_create("golden");
    TCase *tc = tcase_create("golden");
    tcase_add_unchecked_fixture(tc, tdir_setup, tdir_teardown);
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_all_dtypes);
    tcase_add_test(tc, test_params);
    tcase_add_test(tc, test_scalar_and_empty);
    tcase_add_test(tc, test_overwrite);
    tcase_add_test(tc, test_write_errors_leave_nothing);
    tcase_add_test(tc, test_bad_files);
    tcase_add_test(tc, test_schema_and_structure);
    tcase_add_test(tc, test_vlen_strings);
    tcase_add_test(tc, test_corruption_flips);
    tcase_add_test(tc, test_no_id_leaks);
    tcase_add_test(tc, test_h5py_script);
    suite_add_tcase(s, tc);
    return dsv4_test_run(s);
}
