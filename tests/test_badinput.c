/* test_badinput.c - the bad-input matrix (README.md "Reliability"): one row per
 * class of bad input, run end to end through build/dsv4check (or
 * $DSV4CHECK).  Every row asserts the documented exit code (2 = bad input,
 * 3 = an implementation that crashed, hung, exited or broke its contract:
 * the hostile plug-ins of tests/plugins/), a message naming the file and
 * the place, a normal exit (no crash; under the ASan build, a leak makes
 * LeakSanitizer change the exit code, so "no leak" is asserted by the same
 * check), and that no committed golden changed (checksums of data/ci/
 * before and after).
 *
 * The rows are one table of {name, setup, args, exit, fragments}: setup
 * writes the bad file into the temporary folder, args is the command line
 * with "@" standing for that folder and "#" for build/tests (the plug-ins).
 * A new class or a new op adds a row.  Most rows use
 * combine_topk_swa_indices; it has integer inputs only, so "NaN where
 * forbidden" is exercised on the float parameters and tolerances that
 * forbid it.
 *
 * libhdf5 1.10.8 leaks on some corrupt-file error paths; the ASan run of the
 * CLI gets tests/lsan-hdf5.supp (libhdf5 only, never our code). */
#define _POSIX_C_SOURCE 200809L
#include <glob.h>
#include <hdf5.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "golden_eq.h"
#include "testutil.h"

static char tmpdir[256];
static char out[1 << 16];
static const char *golden_path = "data/ci/combine_mixed_prefill_c4.h5";

/* text with "@" as tmpdir and "#" as the folder of the test plug-ins
 * (build/tests, beside this program), into buf. */
static void expand(const char *text, char *buf, size_t len)
{
    char exe[400];
    snprintf(exe, sizeof exe, "%s", dsv4_test_exe());
    const char *slash = strrchr(exe, '/');
    buf[0] = '\0';
    for (const char *p = text; *p; p++) {
        size_t n = strlen(buf);
        if (*p == '@')
            snprintf(buf + n, len - n, "%s", tmpdir);
        else if (*p == '#')
            snprintf(buf + n, len - n, "%.*s/tests", slash ? (int)(slash - exe) : 1, slash ? exe : ".");
        else if (n + 1 < len)
            buf[n] = *p, buf[n + 1] = '\0';
    }
}

/* Runs `dsv4check ARGS` (expanded) with stdout and stderr into out[];
 * returns the exit code, failing on a signal (a crash). */
static int run_args(const char *args)
{
    char exp[2048];
    expand(args, exp, sizeof exp);
    return dsv4_test_cli(out, sizeof out, "%s", exp);
}

static void tmp_path(char *buf, size_t len, const char *name)
{
    snprintf(buf, len, "%s/%s", tmpdir, name);
}

static void write_text(const char *name, const char *text) { dsv4_test_write_in(tmpdir, name, text); }

static void write_bytes(const char *path, const unsigned char *b, size_t n)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fwrite(b, 1, n, f), n);
    fclose(f);
}

/* ---- golden checksums ---------------------------------------------- */

#define MAX_GOLDENS 1024
static int n_goldens;
static char golden_names[MAX_GOLDENS][256];
static uint64_t golden_sums[MAX_GOLDENS];

static uint64_t fnv1a(const unsigned char *b, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

static uint64_t file_sum(const char *path)
{
    size_t n;
    unsigned char *b = (unsigned char *)dsv4_test_slurp_len(path, &n);
    uint64_t h = fnv1a(b, n) ^ n;
    free(b);
    return h;
}

static void record_goldens(void)
{
    glob_t g;
    ck_assert_int_eq(glob("data/ci/*.h5", 0, NULL, &g), 0);
    ck_assert_int_le(g.gl_pathc, MAX_GOLDENS);
    n_goldens = (int)g.gl_pathc;
    for (int i = 0; i < n_goldens; i++) {
        snprintf(golden_names[i], sizeof golden_names[i], "%s", g.gl_pathv[i]);
        golden_sums[i] = file_sum(g.gl_pathv[i]);
    }
    globfree(&g);
}

static void assert_goldens_unchanged(const char *row)
{
    glob_t g;
    ck_assert_int_eq(glob("data/ci/*.h5", 0, NULL, &g), 0);
    ck_assert_msg((int)g.gl_pathc == n_goldens, "%s: the set of goldens changed", row);
    globfree(&g);
    for (int i = 0; i < n_goldens; i++)
        ck_assert_msg(file_sum(golden_names[i]) == golden_sums[i], "%s: %s changed", row,
                      golden_names[i]);
}

/* ---- setups: each writes its bad input under tmpdir ------------------ */

static const char *case_head = "suite: bad\ncases:\n  - name: a\n";

static void yaml_case(const char *body)
{
    char text[2048];
    snprintf(text, sizeof text, "%s%s", case_head, body);
    write_text("bad.yaml", text);
}

static void s_malformed(void) { yaml_case("    op: [unclosed\n"); }
static void s_unknown_key(void) { yaml_case("    op: combine_topk_swa_indices\n    colour: red\n"); }
static void s_wrong_type(void)
{
    yaml_case("    op: combine_topk_swa_indices\n    params: {topk: [512], query_lens: [1]}\n");
}
static void s_wrong_type_seed(void) { yaml_case("    op: combine_topk_swa_indices\n    seed: {a: 1}\n"); }
static void s_missing_op(void) { yaml_case("    params: {query_lens: [1]}\n"); }
static void s_missing_name(void)
{
    write_text("bad.yaml", "suite: bad\ncases:\n  - op: combine_topk_swa_indices\n");
}
static void s_missing_param(void) { yaml_case("    op: combine_topk_swa_indices\n"); }
/* T x topk elements overflow int64: 2^29 - 1 tokens of topk 2^40. */
static void s_dims_overflow(void)
{
    yaml_case("    op: combine_topk_swa_indices\n"
              "    params: {topk: 1099511627776, query_lens: [536870911]}\n");
}
static void s_huge_tokens(void)
{
    yaml_case("    op: combine_topk_swa_indices\n    params: {query_lens: [1000000000000]}\n");
}
/* 2^29 - 1 tokens x 512 x 4 bytes = 1 TiB: refused by the memory limit. */
static void s_over_mem_limit(void)
{
    yaml_case("    op: combine_topk_swa_indices\n    params: {query_lens: [536870911]}\n");
}
static void s_big_scratch(void)
{
    yaml_case("    op: combine_topk_swa_indices\n"
              "    params: {compress_ratio: 1, topk: 1, window_size: 1, query_lens: [1],"
              " prefix_lens: [536870911]}\n");
}
static void s_negative_len(void)
{
    yaml_case("    op: combine_topk_swa_indices\n    params: {query_lens: [4, -3]}\n");
}
static void s_negative_topk(void)
{
    yaml_case("    op: combine_topk_swa_indices\n    params: {topk: -5, query_lens: [4]}\n");
}
static void s_negative_ratio(void)
{
    yaml_case("    op: combine_topk_swa_indices\n    params: {compress_ratio: 0, query_lens: [4]}\n");
}
/* Over the documented limits (README.md "Limits"). */
static void s_long_name(void)
{
    char text[1024];
    snprintf(text, sizeof text, "suite: bad\ncases:\n  - name: %0200d\n    op: combine_topk_swa_indices\n"
             "    params: {query_lens: [1]}\n", 7);
    write_text("bad.yaml", text);
}
static void s_long_list(void)
{
    char text[4096];
    int n = snprintf(text, sizeof text, "%s    op: combine_topk_swa_indices\n    params: {query_lens: [",
                     case_head);
    for (int i = 0; i < 257; i++)
        n += snprintf(text + n, sizeof text - (size_t)n, "%s1", i ? ", " : "");
    snprintf(text + n, sizeof text - (size_t)n, "]}\n");
    write_text("bad.yaml", text);
}
static void s_many_tags(void)
{
    yaml_case("    op: combine_topk_swa_indices\n    params: {query_lens: [1]}\n"
              "    tags: [a, b, c, d, e, f, g, h, i]\n");
}
static void s_unknown_op(void) { yaml_case("    op: frobnicate\n"); }
static void s_unknown_variant(void)
{
    yaml_case("    op: combine_topk_swa_indices\n    variant: nope\n    params: {query_lens: [1]}\n");
}
static void s_unknown_param(void)
{
    yaml_case("    op: combine_topk_swa_indices\n    params: {query_lens: [1], colour: 3}\n");
}
static void s_nan_param(void)
{
    yaml_case("    op: combine_topk_swa_indices\n    params: {query_lens: [4], invalid_frac: .nan}\n");
}
static void s_inf_param(void)
{
    yaml_case("    op: combine_topk_swa_indices\n    params: {query_lens: [4], oob_frac: -.inf}\n");
}
static void s_frac_range(void)
{
    yaml_case("    op: combine_topk_swa_indices\n    params: {query_lens: [4], invalid_frac: 1.5}\n");
}
static void s_nan_tolerance(void)
{
    yaml_case("    op: combine_topk_swa_indices\n    params: {query_lens: [4]}\n"
              "    tolerance: {atol: .nan}\n");
}
static void s_yaml_dir(void)
{
    char path[400];
    tmp_path(path, sizeof path, "dir.yaml");
    ck_assert_int_eq(mkdir(path, 0755), 0);
}
static void s_long_path(void) {}

static void s_h5_empty(void) { write_text("bad.h5", ""); }
static void s_h5_not_hdf5(void) { write_text("bad.h5", "this is not an HDF5 file\n"); }
static void s_h5_truncated(void)
{
    size_t n;
    unsigned char *b = (unsigned char *)dsv4_test_slurp_len(golden_path, &n);
    char path[400];
    tmp_path(path, sizeof path, "bad.h5");
    write_bytes(path, b, n / 2);
    free(b);
}
/* The superblock's root-group address overwritten with garbage. */
static void s_h5_corrupt(void)
{
    size_t n;
    unsigned char *b = (unsigned char *)dsv4_test_slurp_len(golden_path, &n);
    for (size_t i = 24; i < 96 && i < n; i++)
        b[i] ^= 0x5a;
    char path[400];
    tmp_path(path, sizeof path, "bad.h5");
    write_bytes(path, b, n);
    free(b);
}
static void s_h5_dir(void)
{
    char path[400];
    tmp_path(path, sizeof path, "dir.h5");
    ck_assert_int_eq(mkdir(path, 0755), 0);
}

/* Reads the committed golden src, lets edit change it, writes bad.h5. */
static void edit_golden_from(const char *src, void (*edit)(dsv4_golden *g))
{
    dsv4_golden g;
    dsv4_status st = {0, ""};
    ck_assert_msg(dsv4_golden_read(src, &g, &st) == 0, "%s", st.msg);
    edit(&g);
    char path[400];
    tmp_path(path, sizeof path, "bad.h5");
    ck_assert_msg(dsv4_golden_write(path, &g, 1, &st) == 0, "%s", st.msg);
    dsv4_golden_free(&g);
}

/* The same from the committed golden of golden_path. */
static void edit_golden(void (*edit)(dsv4_golden *g)) { edit_golden_from(golden_path, edit); }

static void set_schema(const char *path, long long v)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    ck_assert_int_ge(f, 0);
    hid_t a = H5Aopen(f, "dsv4check_schema", H5P_DEFAULT);
    ck_assert_int_ge(a, 0);
    ck_assert_int_ge(H5Awrite(a, H5T_NATIVE_LLONG, &v), 0);
    H5Aclose(a);
    H5Fclose(f);
}

static void e_none(dsv4_golden *g) { (void)g; }
static void s_h5_schema(void)
{
    edit_golden(e_none);
    char path[400];
    tmp_path(path, sizeof path, "bad.h5");
    set_schema(path, 2);
}

/* topk_indices stored as int64 instead of int32. */
static void e_dtype(dsv4_golden *g)
{
    dsv4_tensor *t = dsv4_tensors_find(&g->inputs, "topk_indices");
    ck_assert_ptr_nonnull(t);
    dsv4_tensor w;
    dsv4_status st = {0, ""};
    ck_assert_int_eq(dsv4_tensor_alloc(&w, t->name, DSV4_I64, t->ndim, t->shape, &st), 0);
    for (int64_t i = 0; i < dsv4_tensor_numel(t); i++)
        ((int64_t *)w.data)[i] = ((int32_t *)t->data)[i];
    dsv4_tensor_free(t);
    *t = w;
}
static void s_h5_dtype(void) { edit_golden(e_dtype); }

/* seq_lens with one entry too many: [R+1] instead of [R]. */
static void e_shape(dsv4_golden *g)
{
    dsv4_tensor *t = dsv4_tensors_find(&g->inputs, "seq_lens");
    ck_assert_ptr_nonnull(t);
    dsv4_tensor w;
    dsv4_status st = {0, ""};
    int64_t n = t->shape[0] + 1;
    ck_assert_int_eq(dsv4_tensor_alloc(&w, t->name, DSV4_I32, 1, &n, &st), 0);
    memcpy(w.data, t->data, t->nbytes);
    dsv4_tensor_free(t);
    *t = w;
}
static void s_h5_shape(void) { edit_golden(e_shape); }

/* query_start_loc decreasing: an index input out of range. */
static void e_index_range(dsv4_golden *g)
{
    dsv4_tensor *t = dsv4_tensors_find(&g->inputs, "query_start_loc");
    ck_assert_ptr_nonnull(t);
    ((int32_t *)t->data)[2] = -7;
}
static void s_h5_index_range(void) { edit_golden(e_index_range); }

/* A missing input tensor. */
static void e_missing_input(dsv4_golden *g)
{
    dsv4_tensor *t = dsv4_tensors_find(&g->inputs, "gather_lens");
    ck_assert_ptr_nonnull(t);
    int k = (int)(t - g->inputs.t);
    dsv4_tensor_free(t);
    memmove(&g->inputs.t[k], &g->inputs.t[k + 1], (size_t)(g->inputs.n - k - 1) * sizeof *t);
    g->inputs.n--;
}
static void s_h5_missing_input(void) { edit_golden(e_missing_input); }

/* An unknown op name in the golden's root attributes. */
static void e_unknown_op(dsv4_golden *g) { snprintf(g->op, sizeof g->op, "frobnicate"); }
static void s_h5_unknown_op(void) { edit_golden(e_unknown_op); }
static void e_unknown_variant(dsv4_golden *g) { snprintf(g->variant, sizeof g->variant, "nope"); }
static void s_h5_unknown_variant(void) { edit_golden(e_unknown_variant); }

/* bad.h5, a copy of the committed golden, opened for raw HDF5 edits. */
static hid_t open_bad_copy(void)
{
    edit_golden(e_none);
    char path[400];
    tmp_path(path, sizeof path, "bad.h5");
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    ck_assert_int_ge(f, 0);
    return f;
}

/* A string attribute name on loc's object obj: n raw bytes, padded by pad. */
static void write_str_attr(hid_t loc, const char *obj, const char *name, const char *bytes, size_t n, H5T_str_t pad)
{
    hid_t t = H5Tcopy(H5T_C_S1), s = H5Screate(H5S_SCALAR);
    H5Tset_size(t, n);
    H5Tset_strpad(t, pad);
    hid_t a = H5Acreate_by_name(loc, obj, name, t, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    ck_assert_int_ge(a, 0);
    ck_assert_int_ge(H5Awrite(a, t, bytes), 0);
    H5Aclose(a);
    H5Sclose(s);
    H5Tclose(t);
}

/* An int32 dataset path in f over space, laid out by dcpl (external or
 * virtual storage), labelled int32; closes dcpl, space and f. */
static void put_int32_dataset(hid_t f, const char *path, hid_t space, hid_t dcpl)
{
    hid_t d = H5Dcreate2(f, path, H5T_STD_I32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    ck_assert_int_ge(d, 0);
    H5Dclose(d);
    write_str_attr(f, path, "dtype", "int32", sizeof "int32", H5T_STR_NULLTERM);
    H5Pclose(dcpl);
    H5Sclose(space);
    H5Fclose(f);
}

/* A file claiming a huge shape: [2^40] int32 topk rows written by HDF5
 * directly (chunked, Fletcher32, nothing stored: the chunks are unwritten). */
static void s_h5_huge_shape(void)
{
    hid_t f = open_bad_copy();
    ck_assert_int_ge(H5Ldelete(f, "/inputs/seq_lens", H5P_DEFAULT), 0);
    hsize_t dims[1] = {(hsize_t)1 << 40}, chunk[1] = {1 << 16};
    hid_t sp = H5Screate_simple(1, dims, NULL), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 1, chunk);
    H5Pset_fletcher32(dcpl);
    H5Pset_deflate(dcpl, 4);
    H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER);
    put_int32_dataset(f, "/inputs/seq_lens", sp, dcpl);
}

/* Output paths that cannot be written. */
static void s_out_file(void) { write_text("afile", "x"); }

/* Report paths that are the run's own inputs. */
static void copy_to_tmp(const char *src, const char *name)
{
    size_t n;
    unsigned char *b = (unsigned char *)dsv4_test_slurp_len(src, &n);
    char path[400];
    tmp_path(path, sizeof path, name);
    write_bytes(path, b, n);
    free(b);
}
static void s_suite(void)
{
    write_text("s.yaml", "suite: s\ncases:\n  - name: a\n    op: combine_topk_swa_indices\n"
                         "    params: {query_lens: [1]}\n");
}
static void s_golden_links(void)
{
    char g[400], sym[400], hard[400];
    copy_to_tmp(golden_path, "g.h5");
    tmp_path(g, sizeof g, "g.h5");
    tmp_path(sym, sizeof sym, "sym.xml");
    tmp_path(hard, sizeof hard, "hard.html");
    ck_assert_int_eq(symlink("g.h5", sym), 0);
    ck_assert_int_eq(link(g, hard), 0);
}
static void s_repro_golden(void) { copy_to_tmp(golden_path, "combine_mixed_prefill_c4.h5"); }
/* ---- gate integrity: suite files and --baseline as bounded inputs ---- */

static void make_fifo(const char *name)
{
    char path[400];
    tmp_path(path, sizeof path, name);
    ck_assert_int_eq(mkfifo(path, 0600), 0);
}
static void s_yaml_fifo(void) { make_fifo("fifo.yaml"); }
/* A generator parameter that would index past the table it sizes. */
static void s_gather_narrow_table(void)
{
    write_text("bad.yaml", "suite: bad\ncases:\n  - name: g\n    op: dequantize_and_gather_k_cache\n"
                           "    params: {table_width: 0, req_seq_lens: [100]}\n");
}
static void s_include_fifo(void)
{
    make_fifo("fifo.yaml");
    write_text("bad.yaml", "suite: bad\ninclude: [fifo.yaml]\n");
}
static void s_include_device(void) { write_text("bad.yaml", "suite: bad\ninclude: [/dev/zero]\n"); }
/* 100k nested '[' (libyaml alone needs tens of seconds for them). */
static void s_deep_nesting(void)
{
    char *text = malloc(100000 + 32);
    ck_assert_ptr_nonnull(text);
    int n = snprintf(text, 32, "suite: bad\ncases: ");
    memset(text + n, '[', 100000);
    text[n + 100000] = '\0';
    write_text("bad.yaml", text);
    free(text);
}
/* L0 .. L7 include the next level 40 times each: 40^8 loads unbounded. */
static void s_include_dag(void)
{
    dsv4_test_write_include_dag(tmpdir);
}
/* Sparse files: over the size limit without writing the bytes. */
static void sparse_file(const char *name, off_t size)
{
    char path[400];
    tmp_path(path, sizeof path, name);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(ftruncate(fileno(f), size), 0);
    fclose(f);
}
static void s_yaml_too_big(void) { sparse_file("bad.yaml", (off_t)5 << 20); }
static void s_baseline_fifo(void) { make_fifo("fifo.json"); }
static void s_baseline_too_big(void) { sparse_file("big.json", (off_t)65 << 20); }
static void s_baseline_nul(void)
{
    char path[400];
    tmp_path(path, sizeof path, "nul.json");
    write_bytes(path, (const unsigned char *)"{\"cases\": []}\0junk", 19);
}

/* ---- golden integrity (the golden reader and gen): setups ------------- */

/* A 0-d int32 input whose raw data is 4 bytes of an outside file. */
static void external_scalar(const char *outside)
{
    hid_t f = open_bad_copy(), s = H5Screate(H5S_SCALAR), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    ck_assert_int_ge(H5Pset_external(dcpl, outside, 0, 4), 0);
    put_int32_dataset(f, "/inputs/n_tokens", s, dcpl);
}
static void s_h5_external_passwd(void) { external_scalar("/etc/passwd"); }
/* A FIFO nobody writes: opening it for reading would block forever. */
static void s_h5_external_fifo(void)
{
    char fifo[400];
    tmp_path(fifo, sizeof fifo, "fifo");
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    external_scalar(fifo);
}
/* An output whose 1-D data lies in another file. */
static void s_h5_external_array(void)
{
    hid_t f = open_bad_copy();
    ck_assert_int_ge(H5Ldelete(f, "/outputs/combined_lens", H5P_DEFAULT), 0);
    hsize_t n = 4;
    hid_t s = H5Screate_simple(1, &n, NULL), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    ck_assert_int_ge(H5Pset_external(dcpl, "/etc/passwd", 0, 16), 0);
    put_int32_dataset(f, "/outputs/combined_lens", s, dcpl);
}
typedef enum { LINK_EXTERNAL, LINK_SOFT, LINK_HARD } link_kind;

/* bad.h5 with a link name to target of kind (an external one into another
 * golden); replace: name exists and is deleted first. */
static void put_link(const char *name, int replace, link_kind kind, const char *target)
{
    hid_t f = open_bad_copy();
    if (replace)
        ck_assert_int_ge(H5Ldelete(f, name, H5P_DEFAULT), 0);
    herr_t rc = kind == LINK_EXTERNAL ? H5Lcreate_external("data/ci/combine_decode_only_c4.h5", target, f, name,
                                                           H5P_DEFAULT, H5P_DEFAULT)
                : kind == LINK_SOFT   ? H5Lcreate_soft(target, f, name, H5P_DEFAULT, H5P_DEFAULT)
                                      : H5Lcreate_hard(f, target, f, name, H5P_DEFAULT, H5P_DEFAULT);
    ck_assert_int_ge(rc, 0);
    H5Fclose(f);
}
/* /inputs/seq_lens an external link into another golden. */
static void s_h5_external_link(void) { put_link("/inputs/seq_lens", 1, LINK_EXTERNAL, "/inputs/seq_lens"); }
/* The /params group itself an external link. */
static void s_h5_external_group(void) { put_link("/params", 1, LINK_EXTERNAL, "/params"); }
static void s_h5_soft_link(void) { put_link("/inputs/gather_lens", 1, LINK_SOFT, "/inputs/seq_lens"); }
/* A dangling soft link beside the groups, pointing nowhere in the file. */
static void s_h5_soft_link_root(void) { put_link("/elsewhere", 0, LINK_SOFT, "/../../etc/passwd"); }
/* /inputs/seq_lens a virtual dataset mapped onto another file. */
static void s_h5_virtual(void)
{
    hid_t f = open_bad_copy();
    hid_t d = H5Dopen2(f, "/inputs/seq_lens", H5P_DEFAULT), sp = H5Dget_space(d);
    H5Dclose(d);
    ck_assert_int_ge(H5Ldelete(f, "/inputs/seq_lens", H5P_DEFAULT), 0);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    ck_assert_int_ge(H5Pset_virtual(dcpl, sp, "data/ci/combine_decode_only_c4.h5", "/inputs/seq_lens", sp), 0);
    put_int32_dataset(f, "/inputs/seq_lens", sp, dcpl);
}
/* gather_lens replaced by a second hard link to seq_lens (same shape). */
static void s_h5_hard_dup(void) { put_link("/inputs/gather_lens", 1, LINK_HARD, "/inputs/seq_lens"); }
/* A second name for the whole /inputs group. */
static void s_h5_hard_dup_group(void) { put_link("/also_inputs", 0, LINK_HARD, "/inputs"); }
/* GEMM K doubled in /params, tensors untouched: validate() reads the
 * shapes, not K; the generator's shapes disagree. */
static void e_gemm_k(dsv4_golden *g)
{
    int64_t k = dsv4_params_int(&g->params, "K");
    ck_assert_int_eq(dsv4_params_set_int(&g->params, "K", 2 * k, NULL), 0);
}
static void s_h5_gemm_k(void) { edit_golden_from("data/ci/gemm_zero_and_big_rows.h5", e_gemm_k); }
static void e_nan_param(dsv4_golden *g)
{
    dsv4_param p;
    memset(&p, 0, sizeof p);
    snprintf(p.name, sizeof p.name, "invalid_frac");
    p.type = DSV4_P_FLOAT;
    p.f = NAN;
    ck_assert_int_eq(dsv4_params_set(&g->params, &p, NULL), 0);
}
static void s_h5_nan_param(void) { edit_golden(e_nan_param); }
static void e_drop_num_rows(dsv4_golden *g)
{
    int k = 0;
    while (k < g->params.n && strcmp(g->params.p[k].name, "num_rows") != 0)
        k++;
    ck_assert_int_lt(k, g->params.n);
    g->params.p[k] = g->params.p[--g->params.n];
}
static void s_h5_missing_param(void) { edit_golden_from("data/ci/gcopy_default.h5", e_drop_num_rows); }
static void e_extra_input(dsv4_golden *g)
{
    int64_t n = 3;
    dsv4_tensor *t;
    ck_assert_int_eq(dsv4_tensors_add(&g->inputs, "bonus", DSV4_I32, 1, &n, &t, NULL), 0);
}
static void s_h5_extra_input(void) { edit_golden(e_extra_input); }
static void e_extra_output(dsv4_golden *g)
{
    int64_t n = 3;
    dsv4_tensor *t;
    ck_assert_int_eq(dsv4_tensors_add(&g->outputs, "bonus", DSV4_I32, 1, &n, &t, NULL), 0);
}
static void s_h5_extra_output(void) { edit_golden(e_extra_output); }
/* An exact int32 output claiming to be measured in float32 ULPs. */
static void e_output_dtype(dsv4_golden *g) { dsv4_tensors_find(&g->outputs, "combined_indices")->output_dtype = DSV4_F32; }
static void s_h5_output_dtype(void) { edit_golden(e_output_dtype); }
/* Attention's float32 ideal measured in float16 instead of bfloat16 ULPs. */
static void e_output_dtype_attn(dsv4_golden *g) { dsv4_tensors_find(&g->outputs, "output")->output_dtype = DSV4_F16; }
static void s_h5_output_dtype_attn(void) { edit_golden_from("data/ci/attn_prefill_c4.h5", e_output_dtype_attn); }
/* combined_lens stored (correctly labelled) as int64: not the op's dtype. */
static void e_output_int64(dsv4_golden *g)
{
    dsv4_tensor *t = dsv4_tensors_find(&g->outputs, "combined_lens"), w;
    ck_assert_int_eq(dsv4_tensor_alloc(&w, t->name, DSV4_I64, t->ndim, t->shape, NULL), 0);
    for (int64_t i = 0; i < dsv4_tensor_numel(t); i++)
        ((int64_t *)w.data)[i] = ((int32_t *)t->data)[i];
    dsv4_tensor_free(t);
    *t = w;
}
static void s_h5_output_int64(void) { edit_golden(e_output_int64); }
/* A root string attribute rewritten as n raw bytes (no conversion). */
static void raw_root_str(const char *name, const char *bytes, size_t n)
{
    hid_t f = open_bad_copy();
    ck_assert_int_ge(H5Adelete(f, name), 0);
    write_str_attr(f, ".", name, bytes, n, H5T_STR_NULLPAD);
    H5Fclose(f);
}
static void s_h5_op_nul(void)
{
    static const char op[] = "combine_topk_swa_indices\0frobnicate";
    raw_root_str("op", op, sizeof op);
}
static void s_h5_case_latin1(void) { raw_root_str("case", "combine_caf\xe9", 12); }
/* Two cases whose golden file names are one ("a b" and "a_b"). */
static void s_name_clash(void)
{
    write_text("clash.yaml", "suite: clash\ngolden_dir: g\ncases:\n"
                             "  - name: a b\n    op: combine_topk_swa_indices\n    params: {query_lens: [1]}\n"
                             "  - name: a_b\n    op: combine_topk_swa_indices\n    params: {query_lens: [2]}\n");
}
/* Two suites with a case of one name, written by one gen -o. */
static void s_gen_clash(void)
{
    write_text("one.yaml", "suite: one\ncases:\n  - name: same\n    op: combine_topk_swa_indices\n"
                           "    params: {query_lens: [1]}\n");
    write_text("two.yaml", "suite: two\ncases:\n  - name: same\n    op: combine_topk_swa_indices\n"
                           "    params: {query_lens: [3]}\n");
}
/* A golden to check, in the folder that is also --repro-dir. */
static void s_repro_beside(void) { edit_golden(e_none); }

typedef struct row {
    const char *name;
    void (*setup)(void);
    const char *args;   /* "@" = the temporary folder */
    int exit;           /* expected exit code */
    const char *frag[3]; /* each must appear in the output ("@" = tmpdir) */
} row;

#define RUN_BAD "run @/bad.yaml --impl ref"
#define IMPL_ONE "run cases/ci.yaml --filter '^combine_decode_only_c4$' --impl #/plugins/libhostile_"
#define RUN_ONE "run cases/ci.yaml --filter '^combine_decode_only_c4$'"
static const row rows[] = {
    /* YAML suites */
    {"malformed_yaml", s_malformed, RUN_BAD, 2, {"@/bad.yaml:", "YAML syntax error", NULL}},
    {"unknown_key", s_unknown_key, RUN_BAD, 2, {"@/bad.yaml:5:5: unknown key 'colour'", NULL, NULL}},
    {"wrong_type_param", s_wrong_type, RUN_BAD, 2, {"@/bad.yaml:5:", "topk", NULL}},
    {"wrong_type_seed", s_wrong_type_seed, RUN_BAD, 2, {"@/bad.yaml:5:", "seed", NULL}},
    {"missing_op", s_missing_op, RUN_BAD, 2, {"@/bad.yaml:3:5:", "no 'op'", NULL}},
    {"missing_name", s_missing_name, RUN_BAD, 2, {"@/bad.yaml:3:", "'name'", NULL}},
    {"missing_param", s_missing_param, RUN_BAD, 2, {"@/bad.yaml:3:", "query_lens", NULL}},
    {"dims_overflow", s_dims_overflow, RUN_BAD, 2, {"@/bad.yaml:3:", "topk_indices", NULL}},
    {"huge_tokens", s_huge_tokens, RUN_BAD, 2, {"@/bad.yaml:3:", "query_lens", NULL}},
    {"over_mem_limit", s_over_mem_limit, RUN_BAD " --mem-limit 64M", 2,
     {"@/bad.yaml:3:", "memory limit", NULL}},
    {"over_mem_limit_gen", s_over_mem_limit, "gen @/bad.yaml -o @/out --mem-limit 64M", 2,
     {"@/bad.yaml:3:", "memory limit", NULL}},
    {"big_scratch_over_limit", s_big_scratch, RUN_BAD " --mem-limit 64M", 2,
     {"@/bad.yaml:3:", "memory limit", NULL}},
    {"negative_len", s_negative_len, RUN_BAD, 2, {"@/bad.yaml:3:", "-3", NULL}},
    {"negative_topk", s_negative_topk, RUN_BAD, 2, {"@/bad.yaml:3:", "topk", NULL}},
    {"zero_ratio", s_negative_ratio, RUN_BAD, 2, {"@/bad.yaml:3:", "compress_ratio", NULL}},
    {"unknown_op", s_unknown_op, RUN_BAD, 2, {"@/bad.yaml:4:", "unknown op 'frobnicate'", NULL}},
    {"unknown_variant", s_unknown_variant, RUN_BAD, 2, {"@/bad.yaml:5:", "nope", NULL}},
    {"unknown_param", s_unknown_param, RUN_BAD, 2, {"@/bad.yaml:5:", "colour", NULL}},
    {"nan_param", s_nan_param, RUN_BAD, 2, {"@/bad.yaml:3:5", "'invalid_frac'", "is nan: must be finite"}},
    {"inf_param", s_inf_param, RUN_BAD, 2, {"@/bad.yaml:3:5", "'oob_frac'", "is -inf: must be finite"}},
    {"frac_out_of_range", s_frac_range, RUN_BAD, 2, {"@/bad.yaml:3:5", "invalid_frac = 1.5", NULL}},
    {"nan_tolerance", s_nan_tolerance, RUN_BAD, 2, {"@/bad.yaml:6:", "atol", NULL}},
    {"name_too_long", s_long_name, RUN_BAD, 2, {"@/bad.yaml:3:", "longer than 191", NULL}},
    {"list_too_long", s_long_list, RUN_BAD, 2, {"@/bad.yaml:5:", "at most 256", NULL}},
    {"too_many_tags", s_many_tags, RUN_BAD, 2, {"@/bad.yaml:6:", "more than 8 tags", NULL}},
    {"missing_yaml", NULL, "run @/none.yaml", 2, {"@/none.yaml: cannot open", NULL, NULL}},
    {"yaml_is_directory", s_yaml_dir, "run @/dir.yaml", 2, {"@/dir.yaml", "directory", NULL}},
    {"path_too_long", s_long_path,
     "run @/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.yaml",
     2, {"@/aaaa", "path longer than 511", NULL}},
    /* HDF5 goldens */
    {"missing_h5", NULL, "check @/none.h5", 2, {"@/none.h5: cannot open", NULL, NULL}},
    {"empty_h5", s_h5_empty, "check @/bad.h5", 2, {"@/bad.h5: empty file", NULL, NULL}},
    {"not_hdf5", s_h5_not_hdf5, "check @/bad.h5", 2, {"@/bad.h5: not an HDF5 file", NULL, NULL}},
    {"truncated_h5", s_h5_truncated, "check @/bad.h5", 2, {"@/bad.h5", NULL, NULL}},
    {"corrupt_h5", s_h5_corrupt, "check @/bad.h5", 2, {"@/bad.h5", NULL, NULL}},
    {"h5_is_directory", s_h5_dir, "check @/dir.h5", 2, {"@/dir.h5: is a directory", NULL, NULL}},
    {"wrong_schema", s_h5_schema, "check @/bad.h5", 2, {"@/bad.h5", "schema version 2", NULL}},
    {"wrong_dtype", s_h5_dtype, "check @/bad.h5", 2, {"@/bad.h5", "topk_indices", "int64"}},
    {"wrong_shape", s_h5_shape, "check @/bad.h5", 2, {"@/bad.h5", "seq_lens", NULL}},
    {"index_out_of_range", s_h5_index_range, "check @/bad.h5", 2,
     {"@/bad.h5", "query_start_loc[2] = -7", NULL}},
    {"missing_input", s_h5_missing_input, "check @/bad.h5", 2, {"@/bad.h5", "gather_lens", NULL}},
    {"h5_unknown_op", s_h5_unknown_op, "check @/bad.h5", 2, {"@/bad.h5", "unknown op 'frobnicate'", NULL}},
    {"h5_unknown_variant", s_h5_unknown_variant, "check @/bad.h5", 2, {"@/bad.h5", "nope", NULL}},
    {"h5_huge_shape", s_h5_huge_shape, "check @/bad.h5 --mem-limit 64M", 2,
     {"@/bad.h5:/inputs/seq_lens", "over the memory limit", NULL}},
    /* unwritable outputs */
    {"gen_out_under_file", s_out_file, "gen cases/ci.yaml --filter '^combine_decode_only_c4$' -o @/afile/sub",
     2, {"@/afile/sub", NULL, NULL}},
    {"junit_unwritable", NULL,
     "run cases/ci.yaml --filter '^combine_decode_only_c4$' --junit @/no/such/dir/r.xml", 2,
     {"@/no/such/dir/r.xml", NULL, NULL}},
    {"json_into_directory", NULL,
     "run cases/ci.yaml --filter '^combine_decode_only_c4$' --json @", 2, {"@", NULL, NULL}},
    /* reports over the run's inputs (also through links): exit 2 naming both */
    {"json_over_suite", s_suite, "run @/s.yaml --json @/s.yaml", 2,
     {"--json @/s.yaml is the same file as the input @/s.yaml", NULL, NULL}},
    {"junit_symlink_to_golden", s_golden_links, "check @/g.h5 --junit @/sym.xml", 2,
     {"--junit @/sym.xml is the same file as the input @/g.h5", NULL, NULL}},
    {"html_hardlink_to_golden", s_golden_links, "check @/g.h5 --html @/hard.html", 2,
     {"--html @/hard.html is the same file as the input @/g.h5", NULL, NULL}},
    {"repro_file_over_golden", s_repro_golden,
     "check @/combine_mixed_prefill_c4.h5 --impl #/libexample_wrong.so --repro-dir @", 2,
     {"--repro-dir @ holds @/combine_mixed_prefill_c4.h5, a golden of this run", NULL, NULL}},
    /* implementations that misbehave (tests/plugins/hostile.c): an ERROR of
     * the case, exit 3, never a crash of dsv4check */
    {"gather_table_too_narrow", s_gather_narrow_table, "run @/bad.yaml", 2,
     {"table_width = 0: the longest request needs 2 block-table columns", NULL, NULL}},
    {"impl_exit", NULL, IMPL_ONE "exit.so", 3,
     {"ERROR     combine_decode_only_c4", "hostile-exit: the implementation's process exited with status 0 while "
      "running combine_topk_swa_indices [default]", NULL}},
    {"impl__exit", NULL, IMPL_ONE "_exit.so", 3,
     {"ERROR     combine_decode_only_c4", "process exited with status 0 while running", NULL}},
    {"impl_abort", NULL, IMPL_ONE "abort.so", 3,
     {"ERROR     combine_decode_only_c4", "process was killed by signal 6 (Aborted) while running", NULL}},
    {"impl_segv", NULL, IMPL_ONE "segv.so", 3,
     {"ERROR     combine_decode_only_c4", "process was killed by signal 11 (Segmentation fault)", NULL}},
    {"impl_hang", NULL, IMPL_ONE "hang.so --timeout 1", 3,
     {"ERROR     combine_decode_only_c4", "process timed out after 1 s (--timeout) and was killed", NULL}},
    {"impl_constructor_exits", NULL, IMPL_ONE "ctor_exit.so", 3,
     {"ERROR     combine_decode_only_c4", "libhostile_ctor_exit.so: the implementation's process exited with "
      "status 0 while loading", NULL}},
    {"impl_modifies_input", NULL,
     "run cases/ci.yaml --filter '^gemm_wq_b_v41_k1280$' --impl #/plugins/libhostile_gemm.so", 3,
     {"ERROR     gemm_wq_b_v41_k1280", "input 'x_scale' was modified by the implementation (inputs are read-only)",
      "first changed element [0, 0]"}},
    {"impl_writes_past_output", NULL, IMPL_ONE "overrun.so", 3,
     {"ERROR     combine_decode_only_c4", "output 'combined_indices': guard bytes after the buffer overwritten",
      NULL}},
    {"impl_unterminated_err", NULL, IMPL_ONE "errstr.so", 3,
     {"ERROR     combine_decode_only_c4", "hostile-errstr: EEEEEEEE", NULL}},
    /* gate integrity: suite files and --baseline read only as bounded regular files */
    {"yaml_is_fifo", s_yaml_fifo, "run @/fifo.yaml", 2, {"@/fifo.yaml: is a FIFO", NULL, NULL}},
    {"include_fifo", s_include_fifo, RUN_BAD, 2,
     {"@/bad.yaml:2:11: include 'fifo.yaml': @/fifo.yaml: is a FIFO", NULL, NULL}},
    {"include_device", s_include_device, RUN_BAD, 2,
     {"@/bad.yaml:2:11: include '/dev/zero'", "is a character device", NULL}},
    {"yaml_deep_nesting", s_deep_nesting, RUN_BAD, 2, {"@/bad.yaml:2:71: ", "nested deeper than 64", NULL}},
    {"include_dag", s_include_dag, "run @/L0.yaml", 2, {"@/L", "more than 256 suite files", NULL}},
    {"yaml_too_big", s_yaml_too_big, RUN_BAD, 2, {"@/bad.yaml: 5242880 bytes, more than 4194304", NULL, NULL}},
    {"baseline_fifo", s_baseline_fifo, RUN_ONE " --baseline @/fifo.json", 2,
     {"--baseline: @/fifo.json: is a FIFO", NULL, NULL}},
    {"baseline_dev_zero", NULL, RUN_ONE " --baseline /dev/zero", 2,
     {"--baseline: /dev/zero: is a character device", NULL, NULL}},
    {"baseline_too_big", s_baseline_too_big, RUN_ONE " --baseline @/big.json", 2,
     {"--baseline: @/big.json: 68157440 bytes, more than 67108864", NULL, NULL}},
    {"baseline_nul_byte", s_baseline_nul, RUN_ONE " --baseline @/nul.json", 2,
     {"--baseline @/nul.json:", "NUL byte at byte 13", NULL}},
    /* golden integrity: the reader refuses what could fool it (golden helper) */
    {"h5_external_scalar", s_h5_external_passwd, "check @/bad.h5", 2,
     {"@/bad.h5:/inputs/n_tokens", "external raw storage", NULL}},
    {"h5_external_fifo", s_h5_external_fifo, "check @/bad.h5", 2,
     {"@/bad.h5:/inputs/n_tokens", "external raw storage", NULL}},
    {"h5_external_array", s_h5_external_array, "check @/bad.h5", 2,
     {"@/bad.h5:/outputs/combined_lens", "external raw storage", NULL}},
    {"h5_external_link", s_h5_external_link, "check @/bad.h5", 2, {"@/bad.h5:/inputs/seq_lens", "external link", NULL}},
    {"h5_external_link_group", s_h5_external_group, "check @/bad.h5", 2, {"@/bad.h5:/params", "external link", NULL}},
    {"h5_soft_link", s_h5_soft_link, "check @/bad.h5", 2, {"@/bad.h5:/inputs/gather_lens", "soft link", NULL}},
    {"h5_soft_link_out", s_h5_soft_link_root, "check @/bad.h5", 2, {"@/bad.h5:/elsewhere", "soft link", NULL}},
    {"h5_virtual_dataset", s_h5_virtual, "check @/bad.h5", 2, {"@/bad.h5:/inputs/seq_lens", "virtual dataset", NULL}},
    {"h5_hard_link_duplicate", s_h5_hard_dup, "check @/bad.h5", 2,
     {"@/bad.h5:/inputs/", "a second hard link to /inputs/", NULL}},
    {"h5_hard_link_group", s_h5_hard_dup_group, "check @/bad.h5", 2, {"@/bad.h5:/", "second hard link to /", NULL}},
    {"h5_gemm_k_disagrees", s_h5_gemm_k, "check @/bad.h5", 2,
     {"@/bad.h5:/inputs/XQ", "/params give", "a parameter disagrees with the tensors"}},
    {"h5_nan_param", s_h5_nan_param, "check @/bad.h5", 2, {"@/bad.h5:/params/invalid_frac is nan", "finite", NULL}},
    {"h5_missing_param", s_h5_missing_param, "check @/bad.h5", 2, {"@/bad.h5", "/params/num_rows is missing", NULL}},
    {"h5_extra_input", s_h5_extra_input, "check @/bad.h5", 2, {"@/bad.h5:/inputs/bonus", "extra tensor", NULL}},
    {"h5_extra_output", s_h5_extra_output, "check @/bad.h5", 2, {"@/bad.h5:/outputs/bonus", "extra tensor", NULL}},
    {"h5_output_dtype_edited", s_h5_output_dtype, "check @/bad.h5", 2,
     {"@/bad.h5:/outputs/combined_indices", "output_dtype float32", NULL}},
    {"h5_output_dtype_edited_float", s_h5_output_dtype_attn, "check @/bad.h5", 2,
     {"@/bad.h5:/outputs/output", "output_dtype float16", "produces bfloat16"}},
    {"h5_output_dtype_disagrees_with_op", s_h5_output_int64, "check @/bad.h5", 2,
     {"@/bad.h5:/outputs/combined_lens", "dtype int64", "stores int32"}},
    {"h5_op_embedded_nul", s_h5_op_nul, "check @/bad.h5", 2, {"@/bad.h5:/ attribute 'op'", "NUL byte", NULL}},
    {"h5_case_not_utf8", s_h5_case_latin1, "check @/bad.h5", 2, {"@/bad.h5:/ attribute 'case'", "not valid UTF-8", NULL}},
    /* goldens never damaged (golden helper) */
    {"repro_dir_holds_goldens", NULL,
     "run cases/ci.yaml --filter '^combine_decode_only_c4$' --impl ref --repro-dir data/ci", 2,
     {"--repro-dir data/ci holds cases/ci/../../data/ci/", "choose another folder", NULL}},
    {"repro_dir_holds_checked_file", s_repro_beside, "check @/bad.h5 --repro-dir @", 2,
     {"--repro-dir @ holds @/bad.h5", NULL, NULL}},
    {"golden_names_clash_at_load", s_name_clash, "list @/clash.yaml", 2,
     {"@/clash.yaml:7:", "cases 'a b' (@/clash.yaml:4) and 'a_b' both use the golden file", NULL}},
    {"golden_names_clash_at_gen", s_gen_clash, "gen @/one.yaml @/two.yaml -o @/out", 2,
     {"cases 'same' (@/one.yaml:3) and 'same' (@/two.yaml:3) both write @/out/same.h5", NULL, NULL}},
    /* errors say why (golden helper) */
    {"gen_out_not_a_directory", s_out_file,
     "gen cases/ci.yaml --filter '^combine_decode_only_c4$' -o @/afile/sub", 2, {"@/afile/sub", "Not a directory", NULL}},
};
#define N_ROWS ((int)(sizeof rows / sizeof rows[0]))

static void setup(void)
{
    dsv4_test_mkdtemp(tmpdir, sizeof tmpdir, "dsv4bad");
    /* libhdf5's own leaks on corrupt files, for the ASan build of the CLI. */
    setenv("LSAN_OPTIONS", "suppressions=tests/lsan-hdf5.supp:print_suppressions=0", 1);
    dsv4_h5_quiet();
    record_goldens();
}

static void teardown(void)
{
    dsv4_test_rm_rf(tmpdir);
}

START_TEST(bad_input_row)
{
    const row *r = &rows[_i];
    if (r->setup)
        r->setup();
    int rc = run_args(r->args);
    ck_assert_msg(rc == r->exit, "%s: exit %d, expected %d:\n%s", r->name, rc, r->exit, out);
    for (int k = 0; k < 3 && r->frag[k]; k++) {
        char want[700];
        expand(r->frag[k], want, sizeof want);
        ck_assert_msg(strstr(out, want) != NULL, "%s: message lacks '%s':\n%s", r->name, want, out);
    }
    ck_assert_msg(strstr(out, "AddressSanitizer") == NULL && strstr(out, "runtime error") == NULL,
                  "%s: sanitizer report:\n%s", r->name, out);
    assert_goldens_unchanged(r->name);
}
END_TEST

/* A corrupt golden at the CLI: a copy of a golden with one byte flipped, at many
 * offsets across the file.  `check` must exit 2 naming the file, or 1 (a
 * changed parameter makes the reference disagree: a loud failure), or 0 only
 * when the flipped copy still reads back with the same tensors, params and
 * attributes (the byte was unused space).  Never a crash. */
START_TEST(flipped_bytes_never_pass_silently)
{
    const char *src = "data/ci/combine_decode_only_c4.h5";
    size_t n;
    unsigned char *orig = (unsigned char *)dsv4_test_slurp_len(src, &n);
    dsv4_golden ref;
    dsv4_status st = {0, ""};
    ck_assert_int_eq(dsv4_golden_read(src, &ref, &st), 0);
    char path[400];
    tmp_path(path, sizeof path, "flip.h5");
    int counts[4] = {0}; /* exit 0, 1, 2, other */
    const size_t step = n / 97 + 1;
    for (size_t off = 3; off < n; off += step) {
        unsigned char *b = malloc(n);
        ck_assert_ptr_nonnull(b);
        memcpy(b, orig, n);
        b[off] ^= 0x10;
        write_bytes(path, b, n);
        free(b);
        int rc = run_args("check @/flip.h5 --impl ref");
        counts[rc <= 2 ? rc : 3]++;
        ck_assert_msg(rc <= 2, "offset %zu: exit %d:\n%s", off, rc, out);
        if (rc == 2)
            ck_assert_msg(strstr(out, path) != NULL, "offset %zu: file not named:\n%s", off, out);
        if (rc == 0) {
            dsv4_golden g;
            ck_assert_msg(dsv4_golden_read(path, &g, &st) == 0, "offset %zu", off);
            char why[256] = "";
            ck_assert_msg(dsv4_golden_same(&ref, &g, why, sizeof why),
                          "offset %zu: exit 0 with different contents: %s", off, why);
            dsv4_golden_free(&g);
        }
    }
    fprintf(stderr, "flipped bytes in %zu-byte %s: %d passed unchanged, %d failed, %d bad input\n",
            n, src, counts[0], counts[1], counts[2]);
    ck_assert_int_gt(counts[2], 0);
    dsv4_golden_free(&ref);
    free(orig);
    assert_goldens_unchanged("flipped_bytes");
}
END_TEST

/* Every byte of one dataset's stored chunk flipped in turn: always exit 2
 * naming the file and the dataset (Fletcher32). */
START_TEST(flipped_data_bytes_name_the_dataset)
{
    const char *src = "data/ci/combine_decode_only_c4.h5";
    hid_t f = H5Fopen(src, H5F_ACC_RDONLY, H5P_DEFAULT);
    ck_assert_int_ge(f, 0);
    hid_t d = H5Dopen2(f, "/outputs/combined_indices", H5P_DEFAULT);
    ck_assert_int_ge(d, 0);
    haddr_t addr;
    hsize_t size, zero[2] = {0, 0};
    ck_assert_int_ge(H5Dget_chunk_info_by_coord(d, zero, NULL, &addr, &size), 0);
    H5Dclose(d);
    H5Fclose(f);
    size_t n;
    unsigned char *orig = (unsigned char *)dsv4_test_slurp_len(src, &n);
    ck_assert_uint_le(addr + size, n);
    char path[400];
    tmp_path(path, sizeof path, "flip.h5");
    const hsize_t step = size / 23 + 1;
    for (hsize_t i = 0; i < size; i += step) {
        orig[addr + i] ^= 0x01;
        write_bytes(path, orig, n);
        orig[addr + i] ^= 0x01;
        int rc = run_args("check @/flip.h5");
        ck_assert_msg(rc == 2, "chunk byte %" PRIu64 ": exit %d:\n%s", (uint64_t)i, rc, out);
        ck_assert_msg(strstr(out, path) != NULL && strstr(out, "/outputs/combined_indices") != NULL,
                      "chunk byte %" PRIu64 ": file or dataset not named:\n%s", (uint64_t)i, out);
    }
    free(orig);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("badinput");
    TCase *tc = dsv4_test_tcase(s, "matrix", 120, setup, teardown, NULL, 0);
    tcase_add_loop_test(tc, bad_input_row, 0, N_ROWS);
    dsv4_test_add(tc, DSV4_TESTS(flipped_bytes_never_pass_silently, flipped_data_bytes_name_the_dataset));
    return dsv4_test_run(s);
}
