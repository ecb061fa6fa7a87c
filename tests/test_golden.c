#define _POSIX_C_SOURCE 200809L
/* test_golden.c - golden HDF5 files: round trips, refusals, bad files,
 * corruption detection, HDF5 id leaks.  Format tests read with
 * dsv4_golden_read_schema (their ops are made up); the checks against an op
 * are tested on real goldens at the end. */
#include <dirent.h>
#include <glob.h>
#include <hdf5.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "../harness/golden.h"
#include "../harness/runner.h"
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
    ck_assert_msg(dsv4_golden_read_schema(p, &r, &st) == DSV4_OK, "%s", st.msg);
    assert_golden_equal(g, &r);
    dsv4_golden_free(&r);
}

/* Expect DSV4_EINPUT from reader with every given fragment in the message. */
static void read_fails_with(int (*reader)(const char *, dsv4_golden *, dsv4_status *), const char *p,
                            const char *frag1, const char *frag2)
{
    dsv4_golden r;
    dsv4_status st = {0, ""};
    int rc = reader(p, &r, &st);
    ck_assert_msg(rc == DSV4_EINPUT, "rc %d for %s: %s", rc, p, st.msg);
    ck_assert_msg(strstr(st.msg, p) != NULL, "path not in '%s'", st.msg);
    ck_assert_msg(!frag1 || strstr(st.msg, frag1), "'%s' not in '%s'", frag1, st.msg);
    ck_assert_msg(!frag2 || strstr(st.msg, frag2), "'%s' not in '%s'", frag2, st.msg);
    ck_assert_int_eq(r.inputs.n + r.outputs.n, 0);
    dsv4_golden_free(&r);
}

/* The file format alone (made-up ops). */
static void read_fails(const char *p, const char *frag1, const char *frag2)
{
    read_fails_with(dsv4_golden_read_schema, p, frag1, frag2);
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
    ck_assert(dsv4_golden_read_schema(p, &r, &st) == DSV4_OK);
    assert_golden_equal(&a, &r); /* the old file is intact */
    dsv4_golden_free(&r);
    write_ok(p, &b, 1);
    ck_assert(dsv4_golden_read_schema(p, &r, &st) == DSV4_OK);
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
    ck_assert_msg(dsv4_golden_read_schema(p, &r, &st) == DSV4_OK, "%s", st.msg);
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
        int rc = dsv4_golden_read_schema(p, &r, &st);
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
        ck_assert_int_eq(dsv4_golden_read_schema(tpath(p, bad[k]), &r, &st), DSV4_EINPUT);
        dsv4_golden_free(&r);
    }
    ck_assert_int_eq(dsv4_golden_read_schema(tpath(p, "good.h5"), &r, &st), DSV4_OK);
    dsv4_golden_free(&r);
    dsv4_golden g;
    small_golden(&g, 10);
    write_ok(tpath(p, "again.h5"), &g, 1);
    dsv4_golden_free(&g);
    ck_assert_int_eq((int)H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL), 0);
    ck_assert_int_eq(open_ids(), before);
}
END_TEST

/* ---- chunk decoding: sizes bounded before inflating ---------------------- */

/* A zlib stream of n_units * unit zero bytes, built without deflating them
 * all: after a full flush, deflate's output for another run of zeros repeats
 * byte for byte, so the middle is that output copied, and the trailer is the
 * Adler-32 of N zeros, (N mod 65521) << 16 | 1. */
static unsigned char *zero_stream(size_t unit, size_t n_units, size_t *len)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    ck_assert_int_eq(deflateInit(&z, 9), Z_OK);
    unsigned char *zeros = calloc(1, unit), *part[4];
    size_t plen[4], cap = deflateBound(&z, unit) + 64;
    for (int k = 0; k < 4; k++) {
        part[k] = malloc(cap);
        ck_assert(zeros && part[k]);
        z.next_in = zeros;
        z.avail_in = k < 3 ? (uInt)unit : 0;
        z.next_out = part[k];
        z.avail_out = (uInt)cap;
        ck_assert_int_ne(deflate(&z, k < 3 ? Z_FULL_FLUSH : Z_FINISH), Z_STREAM_ERROR);
        ck_assert_int_eq(z.avail_in, 0);
        plen[k] = cap - z.avail_out;
    }
    deflateEnd(&z);
    ck_assert_msg(plen[1] == plen[2] && memcmp(part[1], part[2], plen[1]) == 0,
                  "deflate's output for a run of zeros does not repeat");
    *len = plen[0] + (n_units - 1) * plen[1] + plen[3];
    unsigned char *s = malloc(*len), *p = s;
    ck_assert_ptr_nonnull(s);
    memcpy(p, part[0], plen[0]), p += plen[0];
    for (size_t k = 1; k < n_units; k++)
        memcpy(p, part[1], plen[1]), p += plen[1];
    memcpy(p, part[3], plen[3] - 4), p += plen[3] - 4;
    uint32_t adler = (uint32_t)(((uint64_t)unit * n_units) % 65521u) << 16 | 1u;
    for (int k = 3; k >= 0; k--)
        *p++ = (unsigned char)(adler >> (8 * k));
    for (int k = 0; k < 4; k++)
        free(part[k]);
    free(zeros);
    return s;
}

/* zlib's own count of what s inflates to (streamed, nothing kept). */
static uint64_t inflated_size(const unsigned char *s, size_t len)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    ck_assert_int_eq(inflateInit(&z), Z_OK);
    static unsigned char sink[1 << 16];
    z.next_in = (Bytef *)s;
    z.avail_in = (uInt)len;
    int ret;
    do {
        z.next_out = sink;
        z.avail_out = sizeof sink;
        ret = inflate(&z, Z_NO_FLUSH);
    } while (ret == Z_OK);
    ck_assert_int_eq(ret, Z_STREAM_END);
    uint64_t n = z.total_out;
    inflateEnd(&z);
    return n;
}

/* The stored bytes of s behind a Fletcher32 filter, as libhdf5 computes it:
 * written through a 1-D uint8 dataset of one chunk (scratch file), read back
 * raw. */
static unsigned char *with_fletcher32(const unsigned char *s, size_t len, size_t *out_len)
{
    char p[600];
    hid_t f = H5Fcreate(tpath(p, "scratch.h5"), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hsize_t n = len;
    hid_t sp = H5Screate_simple(1, &n, NULL), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    ck_assert(H5Pset_chunk(dcpl, 1, &n) >= 0 && H5Pset_fletcher32(dcpl) >= 0);
    hid_t d = H5Dcreate2(f, "s", H5T_STD_U8LE, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    ck_assert(d >= 0 && H5Dwrite(d, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, s) >= 0);
    hsize_t zero = 0, size = 0;
    ck_assert(H5Dget_chunk_storage_size(d, &zero, &size) >= 0 && size == len + 4);
    unsigned char *raw = malloc(size);
    uint32_t mask = 0;
    ck_assert(raw && H5Dread_chunk(d, H5P_DEFAULT, &zero, &mask, raw) >= 0);
    H5Dclose(d);
    H5Pclose(dcpl);
    H5Sclose(sp);
    H5Fclose(f);
    unlink(p);
    *out_len = size;
    return raw;
}

/* A copy of a committed golden whose /inputs/topk_indices is one chunk (the
 * writer's filters: shuffle, deflate, fletcher32) holding `stream` as its
 * deflate stream, with a valid checksum; rows x cols int32 (0: as it was). */
static void golden_with_stream(const char *dst, const unsigned char *stream, size_t len, hsize_t rows,
                               hsize_t cols)
{
    size_t n;
    unsigned char *b = read_bytes("data/ci/combine_decode_only_c4.h5", &n);
    write_bytes(dst, b, n);
    free(b);
    size_t raw_len;
    unsigned char *raw = with_fletcher32(stream, len, &raw_len);
    hid_t f = H5Fopen(dst, H5F_ACC_RDWR, H5P_DEFAULT);
    ck_assert(f >= 0);
    hid_t d = H5Dopen2(f, "/inputs/topk_indices", H5P_DEFAULT), sp = H5Dget_space(d);
    hsize_t dims[2], zero[2] = {0, 0};
    ck_assert_int_eq(H5Sget_simple_extent_dims(sp, dims, NULL), 2);
    H5Dclose(d);
    if (rows) {
        dims[0] = rows, dims[1] = cols;
        H5Sclose(sp);
        sp = H5Screate_simple(2, dims, NULL);
    }
    ck_assert(H5Ldelete(f, "/inputs/topk_indices", H5P_DEFAULT) >= 0);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    ck_assert(H5Pset_chunk(dcpl, 2, dims) >= 0 && H5Pset_shuffle(dcpl) >= 0 && H5Pset_deflate(dcpl, 4) >= 0 &&
              H5Pset_fletcher32(dcpl) >= 0);
    d = H5Dcreate2(f, "/inputs/topk_indices", H5T_STD_I32LE, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    ck_assert(d >= 0 && H5Dwrite_chunk(d, H5P_DEFAULT, 0, zero, raw_len, raw) >= 0);
    H5Dclose(d);
    set_str_attr(f, "/inputs/topk_indices", "dtype", "int32");
    H5Pclose(dcpl);
    H5Sclose(sp);
    H5Fclose(f);
    free(raw);
}

/* The largest resident size of the children waited for so far, in KiB. */
static long children_max_rss_kib(void)
{
    struct rusage ru;
    ck_assert_int_eq(getrusage(RUSAGE_CHILDREN, &ru), 0);
    return ru.ru_maxrss;
}

/* `check FILE --mem-limit 64M` on a golden whose topk_indices chunk holds
 * a 3 GiB bomb: exit 2 with why, the process never large. */
static void check_bomb(const char *name, hsize_t rows, hsize_t cols, const char *why)
{
    size_t len;
    unsigned char *bomb = zero_stream((size_t)1 << 20, 3072, &len);
    char p[600], out[8192];
    golden_with_stream(tpath(p, name), bomb, len, rows, cols);
    free(bomb);
    struct stat sb;
    ck_assert(stat(p, &sb) == 0 && sb.st_size > (2 << 20) && sb.st_size < (8 << 20));
    int rc = dsv4_test_cli(out, sizeof out, "check %s --mem-limit 64M", p);
    ck_assert_msg(rc == 2, "exit %d:\n%s", rc, out);
    ck_assert_msg(strstr(out, p) && strstr(out, "/inputs/topk_indices: chunk 0 ") && strstr(out, why), "%s", out);
    long rss = children_max_rss_kib();
    ck_assert_msg(rss < 512 * 1024, "the reader grew to %ld KiB on a 3 GiB chunk", rss);
    fprintf(stderr, "inflate bomb %s: %lld-byte file, refused at %ld KiB resident\n", name, (long long)sb.st_size,
            rss);
}

START_TEST(test_inflate_bomb_refused)
{
    /* The construction is sound: 4 units inflate to 4 MiB, per zlib. */
    size_t len;
    unsigned char *small = zero_stream((size_t)1 << 20, 4, &len);
    ck_assert_uint_eq(inflated_size(small, len), (uint64_t)4 << 20);
    free(small);
    /* A chunk declaring 4 MiB: inflate stops at 4 MiB + 1 byte. */
    check_bomb("bomb_4mib.h5", 1024, 1024, "inflates to more than the 4194304 bytes its shape declares");
    /* The golden's own few KiB: 3 MB cannot be a deflate stream of that. */
    check_bomb("bomb_small.h5", 0, 0, "is stored in");
}
END_TEST

START_TEST(test_short_chunk_refused)
{
    /* A valid stream of half the chunk's declared bytes. */
    hid_t f = H5Fopen("data/ci/combine_decode_only_c4.h5", H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t d = H5Dopen2(f, "/inputs/topk_indices", H5P_DEFAULT), sp = H5Dget_space(d);
    size_t declared = (size_t)H5Sget_simple_extent_npoints(sp) * 4;
    H5Sclose(sp);
    H5Dclose(d);
    H5Fclose(f);
    unsigned char *zeros = calloc(1, declared / 2), *s = malloc(compressBound(declared));
    uLongf slen = compressBound(declared);
    ck_assert(zeros && s && compress2(s, &slen, zeros, declared / 2, 4) == Z_OK);
    char p[600], want[160];
    golden_with_stream(tpath(p, "short.h5"), s, slen, 0, 0);
    free(zeros);
    free(s);
    snprintf(want, sizeof want, "chunk 0 inflates to %zu bytes, but its shape declares %zu", declared / 2,
             declared);
    read_fails(p, "/inputs/topk_indices", want);
}
END_TEST

/* The filters of schema 1 in any order (h5py puts fletcher32 first), and
 * nothing else. */
static void replace_x(const char *name, char *p, void (*set)(hid_t dcpl))
{
    hid_t f = edit_copy(name, p);
    hid_t d = H5Dopen2(f, "/inputs/x", H5P_DEFAULT), sp = H5Dget_space(d);
    int32_t *v = malloc(4096 * sizeof *v);
    ck_assert(v && H5Dread(d, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0);
    H5Dclose(d);
    ck_assert(H5Ldelete(f, "/inputs/x", H5P_DEFAULT) >= 0);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    hsize_t chunk = 1000; /* 4096 = 4 chunks and a partial one */
    ck_assert(H5Pset_chunk(dcpl, 1, &chunk) >= 0);
    set(dcpl);
    d = H5Dcreate2(f, "/inputs/x", H5T_STD_I32LE, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    ck_assert(d >= 0 && H5Dwrite(d, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0);
    H5Dclose(d);
    set_str_attr(f, "/inputs/x", "dtype", "int32");
    H5Pclose(dcpl);
    H5Sclose(sp);
    H5Fclose(f);
    free(v);
}
static void f_h5py_order(hid_t p) { H5Pset_fletcher32(p), H5Pset_shuffle(p), H5Pset_deflate(p, 9); }
static void f_deflate_only(hid_t p) { H5Pset_deflate(p, 1), H5Pset_fletcher32(p); }
static void f_checksum_only(hid_t p) { H5Pset_fletcher32(p); }
static void f_shuffle_last(hid_t p) { H5Pset_fletcher32(p), H5Pset_deflate(p, 6), H5Pset_shuffle(p); }
static void f_scaleoffset(hid_t p) { H5Pset_scaleoffset(p, H5Z_SO_INT, 0), H5Pset_fletcher32(p); }
static void f_unfiltered_edges(hid_t p)
{
    H5Pset_deflate(p, 4), H5Pset_fletcher32(p), H5Pset_chunk_opts(p, H5D_CHUNK_DONT_FILTER_PARTIAL_CHUNKS);
}

START_TEST(test_filter_pipelines)
{
    char p[600], good[600];
    dsv4_golden g, r;
    void (*ok[])(hid_t) = {f_h5py_order, f_deflate_only, f_checksum_only, f_shuffle_last};
    for (size_t k = 0; k < sizeof ok / sizeof ok[0]; k++) {
        replace_x("pipeline.h5", p, ok[k]); /* a copy of a fresh good.h5 */
        dsv4_status st = {0, ""};
        ck_assert_int_eq(dsv4_golden_read_schema(tpath(good, "good.h5"), &g, &st), DSV4_OK);
        ck_assert_msg(dsv4_golden_read_schema(p, &r, &st) == DSV4_OK, "pipeline %zu: %s", k, st.msg);
        assert_golden_equal(&g, &r);
        dsv4_golden_free(&r);
        dsv4_golden_free(&g);
    }
    replace_x("scaleoffset.h5", p, f_scaleoffset);
    read_fails(p, "/inputs/x", "is not one schema 1 allows");
    replace_x("edges.h5", p, f_unfiltered_edges);
    read_fails(p, "/inputs/x", "edge chunks stored without filters");
}
END_TEST

/* ---- strings: stored bytes, UTF-8, no NUL ------------------------------- */

/* Root attribute name of fixed size n holding bytes v (no conversion). */
static void raw_str_attr(const char *p, const char *name, const char *v, size_t n, int vlen)
{
    hid_t f = H5Fopen(p, H5F_ACC_RDWR, H5P_DEFAULT);
    ck_assert(f >= 0 && H5Adelete(f, name) >= 0);
    hid_t t = H5Tcopy(H5T_C_S1), s = H5Screate(H5S_SCALAR), a;
    if (vlen) {
        hid_t mt = H5Tvlen_create(H5T_NATIVE_UCHAR);
        hvl_t hv = {n, (void *)v};
        H5Tset_size(t, H5T_VARIABLE);
        a = H5Acreate2(f, name, t, s, H5P_DEFAULT, H5P_DEFAULT);
        ck_assert(a >= 0 && H5Awrite(a, mt, &hv) >= 0);
        H5Tclose(mt);
    } else {
        H5Tset_size(t, n);
        H5Tset_strpad(t, H5T_STR_NULLPAD);
        a = H5Acreate2(f, name, t, s, H5P_DEFAULT, H5P_DEFAULT);
        ck_assert(a >= 0 && H5Awrite(a, t, v) >= 0);
    }
    H5Aclose(a);
    H5Sclose(s);
    H5Tclose(t);
    H5Fclose(f);
}

START_TEST(test_strings_are_checked)
{
    char p[600];
    static const char nul_op[] = "combine_topk_swa_indices\0evil";
    H5Fclose(edit_copy("nul_fixed.h5", p));
    raw_str_attr(p, "op", nul_op, sizeof nul_op, 0);
    read_fails(p, "attribute 'op'", "contains a NUL byte");
    H5Fclose(edit_copy("nul_vlen.h5", p));
    raw_str_attr(p, "op", nul_op, sizeof nul_op - 1, 1);
    read_fails(p, "attribute 'op'", "contains a NUL byte");
    H5Fclose(edit_copy("latin1.h5", p));
    raw_str_attr(p, "case", "caf\xe9", 4, 0);
    read_fails(p, "attribute 'case'", "not valid UTF-8");
    H5Fclose(edit_copy("overlong.h5", p));
    raw_str_attr(p, "variant", "\xc0\xaf", 2, 1); /* an overlong '/' */
    read_fails(p, "attribute 'variant'", "not valid UTF-8");
    /* Valid multi-byte UTF-8 and NUL padding after the text are fine. */
    H5Fclose(edit_copy("utf8.h5", p));
    raw_str_attr(p, "case", "\xe2\x9c\x93 ok\0\0\0", 9, 0);
    dsv4_golden r;
    dsv4_status st = {0, ""};
    ck_assert_msg(dsv4_golden_read_schema(p, &r, &st) == DSV4_OK, "%s", st.msg);
    ck_assert_str_eq(r.case_name, "\xe2\x9c\x93 ok");
    dsv4_golden_free(&r);
    /* The writer refuses what the reader would. */
    dsv4_golden g;
    small_golden(&g, 4);
    snprintf(g.case_name, sizeof g.case_name, "caf\xe9");
    ck_assert_int_eq(dsv4_golden_write(tpath(p, "w.h5"), &g, 1, &st), DSV4_EINPUT);
    ck_assert_msg(strstr(st.msg, "'case' is not UTF-8"), "%s", st.msg);
    dsv4_golden_free(&g);
}
END_TEST

/* ---- the checks against the op ------------------------------------------ */

/* A format-valid golden whose tensors are not the op's is refused by
 * dsv4_golden_read (dsv4_golden_read_schema takes it). */
START_TEST(test_read_checks_the_op)
{
    char p[600];
    make_small(tpath(p, "small.h5"));
    read_fails_with(dsv4_golden_read, p, "/inputs/x", "has no input 'x' (an extra tensor)");
    dsv4_golden r;
    dsv4_status st = {0, ""};
    ck_assert_int_eq(dsv4_golden_read_schema(p, &r, &st), DSV4_OK);
    dsv4_golden_free(&r);
}
END_TEST

/* Inputs the generator makes from params (validated as gen would). */
static int generate_from(const dsv4_op *op, int variant, const dsv4_params *given, uint64_t seed,
                         dsv4_tensors *in)
{
    dsv4_params *ps = malloc(sizeof *ps);
    ck_assert_ptr_nonnull(ps);
    *ps = *given;
    dsv4_status st = {0, ""};
    int rc = dsv4_golden_params(op, ps, "t", &st);
    if (!rc && op->resolve)
        rc = op->resolve(ps, &st);
    dsv4_opctx c = dsv4_opctx_make(op, ps, variant, seed);
    if (!rc)
        rc = op->generate(&c, in, &st);
    free(ps);
    return rc;
}

static int same_shapes(const dsv4_tensors *a, const dsv4_tensors *b)
{
    if (a->n != b->n)
        return 0;
    for (int k = 0; k < a->n; k++) {
        const dsv4_tensor *y = dsv4_tensors_get(b, a->t[k].name);
        if (!y || y->dtype != a->t[k].dtype || !dsv4_tensor_same_shape(&a->t[k], y))
            return 0;
    }
    return 1;
}

/* Whether the generator, run on params in a child process (some generators
 * crash on parameters outside their range), makes inputs of base's shapes:
 * 1 yes, 0 other shapes or a refusal, -1 it crashed. */
static int generates_shapes_of(const dsv4_op *op, int variant, const dsv4_params *params, uint64_t seed,
                               const dsv4_tensors *base)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        dsv4_tensors in = {0};
        int same = generate_from(op, variant, params, seed, &in) == 0 && same_shapes(&in, base);
        _exit(same ? 41 : 40); /* not 1: a sanitizer's exit status */
    }
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    if (!WIFEXITED(status) || (WEXITSTATUS(status) != 40 && WEXITSTATUS(status) != 41))
        return -1;
    return WEXITSTATUS(status) == 41;
}

/* One edit of an integer parameter k of ps: +1 or doubled; for an int
 * list, its first value +1, or its last value repeated (in every int list
 * of the same length, e.g. query_lens with prefix_lens).  0: no edit. */
static int edit_param(dsv4_params *ps, int k, int how)
{
    dsv4_param *p = &ps->p[k];
    if (p->type == DSV4_P_INT) {
        int64_t was = p->i;
        p->i = how == 0 ? was + 1 : was * 2;
        return p->i != was;
    }
    if (p->type != DSV4_P_INTLIST || p->n == 0)
        return 0;
    if (how == 0) {
        p->list[0]++;
        return 1;
    }
    int n = p->n;
    for (int j = 0; j < ps->n; j++) {
        dsv4_param *q = &ps->p[j];
        if (q->type == DSV4_P_INTLIST && q->n == n && n < DSV4_PARAM_LIST_MAX) {
            q->list[n] = q->list[n - 1];
            q->n++;
        }
    }
    return p->n != n;
}

/* For every op: a committed golden with one parameter changed so that it
 * no longer describes the shapes of the tensors (the generator would make
 * other shapes), tensors untouched: dsv4_golden_read refuses it. */
START_TEST(test_params_against_shapes_every_op)
{
    int refused[64] = {0}, tried_op[64] = {0}, crashed = 0;
    glob_t gl;
    ck_assert_int_eq(glob("data/ci/*.h5", 0, NULL, &gl), 0);
    char p[600];
    tpath(p, "edited.h5");
    for (size_t f = 0; f < gl.gl_pathc; f++) {
        dsv4_golden g;
        dsv4_status st = {0, ""};
        ck_assert_msg(dsv4_golden_read(gl.gl_pathv[f], &g, &st) == DSV4_OK, "%s", st.msg);
        const dsv4_op *op = dsv4_op_find(g.op);
        int oi = 0;
        while (dsv4_op_at(oi) != op)
            oi++;
        int variant = dsv4_op_variant(op, g.variant);
        /* A golden without the generator's required options (a chain's
         * step: its inputs come from the chain) is not checked against the
         * op's generator, by the reader either. */
        int generated = 1;
        for (const dsv4_param_spec *ps = dsv4_op_params(op); ps->name; ps++)
            generated &= !(ps->gen && !ps->def && !dsv4_params_find(&g.params, ps->name));
        if (!generated || tried_op[oi]++ >= 2) { /* two goldens per op */
            dsv4_golden_free(&g);
            continue;
        }
        dsv4_tensors base = {0};
        ck_assert_int_eq(generate_from(op, variant, &g.params, g.seed, &base), 0);
        ck_assert_msg(same_shapes(&base, &g.inputs), "%s: the generator's shapes differ", gl.gl_pathv[f]);
        dsv4_golden e = g; /* shallow: the tensors stay g's */
        for (int k = 0; k < g.params.n; k++)
            for (int how = 0; how < 2; how++) {
                e.params = g.params;
                if (!edit_param(&e.params, k, how))
                    continue;
                int same = generates_shapes_of(op, variant, &e.params, g.seed, &base);
                if (same == 1)
                    continue;
                /* Other shapes, a generator refusing the params, or one
                 * crashing on them: the file must be refused. */
                crashed += same < 0;
                ck_assert_int_eq(dsv4_golden_write(p, &e, 1, &st), DSV4_OK);
                dsv4_golden r;
                int rc = dsv4_golden_read(p, &r, &st);
                ck_assert_msg(rc == DSV4_EINPUT && strstr(st.msg, p), "%s with %s edited: rc %d %s", gl.gl_pathv[f],
                              g.params.p[k].name, rc, st.msg);
                refused[oi]++;
            }
        dsv4_tensors_free(&base);
        dsv4_golden_free(&g);
    }
    globfree(&gl);
    fprintf(stderr, "params against shapes: %d edits on which a generator crashed, refused too\n", crashed);
    for (int i = 0; i < dsv4_op_count(); i++)
        ck_assert_msg(refused[i] > 0, "op %s: no golden refused with a parameter that disagrees with its shapes",
                      dsv4_op_at(i)->name);
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
    /* one folder for all the tests: an unchecked fixture */
    TCase *tc = dsv4_test_tcase(s, "golden", 600, NULL, NULL, NULL, 0);
    tcase_add_unchecked_fixture(tc, tdir_setup, tdir_teardown);
    dsv4_test_add(tc, DSV4_TESTS(test_all_dtypes, test_params, test_scalar_and_empty, test_overwrite,
                                 test_write_errors_leave_nothing, test_bad_files, test_schema_and_structure,
                                 test_vlen_strings, test_corruption_flips, test_no_id_leaks, test_h5py_script,
                                 test_inflate_bomb_refused, test_short_chunk_refused, test_filter_pipelines,
                                 test_strings_are_checked, test_read_checks_the_op,
                                 test_params_against_shapes_every_op));
    return dsv4_test_run(s);
}
