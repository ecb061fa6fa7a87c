/* test_cases.c - the YAML suite loader: a valid suite with defaults, sweep,
 * goldens and overrides; one check per error class with its file:line:col
 * (computed by hand from the YAML text, 1-based); includes, and the bounds on
 * what a suite may make the loader read and do (FIFOs, devices, bytes, file
 * loads, nesting, nodes, anchors, duplicate keys), each refused quickly. */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../harness/cases.h"
#include "../harness/yaml_doc.h"
#include "testutil.h"

static char tmpdir[64];
static char yaml_path[128];

static void setup(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/dsv4cases.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
    snprintf(yaml_path, sizeof yaml_path, "%s/s.yaml", tmpdir);
}

static void teardown(void) { dsv4_test_rm_rf(tmpdir); }

static void write_yaml(const char *text)
{
    FILE *f = fopen(yaml_path, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fputs(text, f) >= 0, 1);
    ck_assert_int_eq(fclose(f), 0);
}

static int load(const char *text, dsv4_suite *s, dsv4_status *st)
{
    write_yaml(text);
    memset(st, 0, sizeof *st);
    return dsv4_suite_load(yaml_path, s, st);
}

/* Loading text fails with DSV4_EINPUT, "<path>:line:col:" and needle. */
static void expect_error(const char *text, int line, int col, const char *needle)
{
    dsv4_suite s;
    dsv4_status st;
    int rc = load(text, &s, &st);
    ck_assert_msg(rc == DSV4_EINPUT, "rc %d, msg: %s", rc, st.msg);
    ck_assert_int_eq(st.code, DSV4_EINPUT);
    char where[192];
    snprintf(where, sizeof where, "%s:%d:%d: ", yaml_path, line, col);
    ck_assert_msg(strstr(st.msg, where), "expected '%s' in: %s", where, st.msg);
    ck_assert_msg(strstr(st.msg, needle), "expected '%s' in: %s", needle, st.msg);
    ck_assert_int_eq(s.n, 0);
    ck_assert_ptr_null(s.cases);
    dsv4_suite_free(&s);
}

static const dsv4_case *find_case(const dsv4_suite *s, const char *name)
{
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->cases[i].name, name) == 0)
            return &s->cases[i];
    return NULL;
}

static const char *const valid_suite =
    "suite: ci\n"                                                 /* 1 */
    "golden_dir: gold\n"                                          /* 2 */
    "defaults:\n"                                                 /* 3 */
    "  seed: 5\n"                                                 /* 4 */
    "  params: {window_size: 8, compress_ratio: 2}\n"             /* 5 */
    "  tags: [ci, fast]\n"                                        /* 6 */
    "  tolerance: {atol: 0.5}\n"                                  /* 7 */
    "cases:\n"                                                    /* 8 */
    "  - name: plain\n"                                           /* 9 */
    "    op: combine_topk_swa_indices\n"                          /* 10 */
    "    params: {query_lens: [1, 2, 3], compress_ratio: 4}\n"    /* 11 */
    "    tags: [fast, decode]\n"                                  /* 12 */
    "    golden: other/plain.h5\n"                                /* 13 */
    "    tolerance:\n"                                            /* 14 */
    "      combined_indices: {atol: 0, rtol: 0.25}\n"             /* 15 */
    "  - name: sw\n"                                              /* 16 */
    "    op: combine_topk_swa_indices\n"                          /* 17 */
    "    variant: validate_topk=none\n"                           /* 18 */
    "    seed: 0x10\n"                                            /* 19 */
    "    params: {query_lens: [4]}\n"                             /* 20 */
    "    sweep: {topk: [16, 32], prefix_lens: [[0], [7]]}\n";     /* 21 */

START_TEST(test_valid_suite)
{
    dsv4_suite s;
    dsv4_status st;
    int rc = load(valid_suite, &s, &st);
    ck_assert_msg(rc == DSV4_OK, "%s", st.msg);
    ck_assert_str_eq(s.name, "ci");
    ck_assert_str_eq(s.file, yaml_path);
    ck_assert_int_eq(s.n, 5);

    /* plain: defaults merged, case params win, resolve filled N/M. */
    const dsv4_case *c = &s.cases[0];
    ck_assert_str_eq(c->name, "plain");
    ck_assert_str_eq(c->file, yaml_path);
    ck_assert_int_eq(c->line, 9);
    ck_assert_int_eq(c->col, 5);
    ck_assert_str_eq(c->op->name, "combine_topk_swa_indices");
    ck_assert_int_eq(c->variant, 0);
    ck_assert_uint_eq(c->seed, 5);
    ck_assert_int_eq(dsv4_params_int(&c->params, "window_size"), 8);
    ck_assert_int_eq(dsv4_params_int(&c->params, "compress_ratio"), 4);
    ck_assert_int_eq(dsv4_params_int(&c->params, "topk"), 512);
    const int64_t *q;
    ck_assert_int_eq(dsv4_params_list(&c->params, "query_lens", &q), 3);
    ck_assert_int_eq(q[0], 1);
    ck_assert_int_eq(q[2], 3);
    ck_assert_int_eq(dsv4_params_int(&c->params, "max_model_len"), 3);
    ck_assert_int_eq(dsv4_params_int(&c->params, "N"), 1);      /* ceil(3 / 4) */
    ck_assert_int_eq(dsv4_params_int(&c->params, "M"), 1 + 8 + 6); /* N + W + T */
    ck_assert_int_eq(dsv4_params_int(&c->params, "topk_width"), 512);
    ck_assert_int_eq(c->n_tags, 3); /* union, defaults first */
    ck_assert_str_eq(c->tags[0], "ci");
    ck_assert_str_eq(c->tags[1], "fast");
    ck_assert_str_eq(c->tags[2], "decode");
    ck_assert(dsv4_case_has_tag(c, "decode"));
    ck_assert(!dsv4_case_has_tag(c, "slow"));
    char want[256];
    snprintf(want, sizeof want, "%s/other/plain.h5", tmpdir);
    ck_assert_str_eq(c->golden, want);
    ck_assert_int_eq(c->n_overrides, 2);
    ck_assert_str_eq(c->overrides[0].output, "*");
    ck_assert_int_eq(c->overrides[0].line, 7);
    ck_assert_str_eq(c->overrides[1].output, "combined_indices");
    ck_assert_int_eq(c->overrides[1].line, 15);

    /* Overrides: defaults' atol first, the per-output ones after. */
    dsv4_policy pol;
    memset(&pol, 0, sizeof pol);
    pol.atol = 9, pol.rtol = 9, pol.ulp = 3;
    snprintf(pol.rule, sizeof pol.rule, "exact");
    dsv4_case_apply_overrides(c, "combined_indices", &pol);
    ck_assert(pol.atol == 0 && pol.rtol == 0.25 && pol.ulp == 3);
    snprintf(want, sizeof want, "exact; override (%s:7, %s:15)", yaml_path, yaml_path);
    ck_assert_str_eq(pol.rule, want);
    memset(&pol, 0, sizeof pol);
    pol.rtol = 9;
    dsv4_case_apply_overrides(c, "combined_lens", &pol);
    ck_assert(pol.atol == 0.5 && pol.rtol == 9);
    snprintf(want, sizeof want, "override (%s:7)", yaml_path);
    ck_assert_str_eq(pol.rule, want);

    /* sw: first sweep key varies slowest; golden from golden_dir. */
    static const char *const names[4] = {
        "sw[topk=16,prefix_lens=0]", "sw[topk=16,prefix_lens=7]",
        "sw[topk=32,prefix_lens=0]", "sw[topk=32,prefix_lens=7]"};
    for (int i = 0; i < 4; i++)
        ck_assert_str_eq(s.cases[1 + i].name, names[i]);
    c = find_case(&s, "sw[topk=32,prefix_lens=7]");
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(c->line, 16);
    ck_assert_int_eq(c->variant, 1);
    ck_assert_uint_eq(c->seed, 16);
    ck_assert_int_eq(dsv4_params_int(&c->params, "topk"), 32);
    ck_assert_int_eq(dsv4_params_int(&c->params, "compress_ratio"), 2);
    ck_assert_int_eq(dsv4_params_list(&c->params, "prefix_lens", &q), 1);
    ck_assert_int_eq(q[0], 7);
    ck_assert_int_eq(dsv4_params_int(&c->params, "max_model_len"), 11);
    ck_assert_int_eq(dsv4_params_int(&c->params, "N"), 6);          /* ceil(11 / 2) */
    ck_assert_int_eq(dsv4_params_int(&c->params, "M"), 6 + 8 + 4);
    ck_assert_int_eq(dsv4_params_int(&c->params, "topk_width"), 32);
    ck_assert_int_eq(c->n_tags, 2);
    ck_assert_int_eq(c->n_overrides, 1);
    snprintf(want, sizeof want, "%s/gold/sw_topk_32_prefix_lens_7_.h5", tmpdir);
    ck_assert_str_eq(c->golden, want);

    dsv4_suite_free(&s);
    ck_assert_int_eq(s.n, 0);
    ck_assert_ptr_null(s.cases);
    dsv4_suite_free(&s); /* safe twice, and on a zeroed suite */
}
END_TEST

START_TEST(test_no_golden)
{
    dsv4_suite s;
    dsv4_status st;
    int rc = load("suite: t\n"
                  "cases:\n"
                  "  - {name: a, op: combine_topk_swa_indices, params: {query_lens: []}}\n",
                  &s, &st);
    ck_assert_msg(rc == DSV4_OK, "%s", st.msg);
    ck_assert_int_eq(s.n, 1);
    ck_assert_str_eq(s.cases[0].golden, "");
    ck_assert_uint_eq(s.cases[0].seed, 0);
    ck_assert_int_eq(s.cases[0].col, 5); /* the '{' */
    ck_assert_int_eq(s.cases[0].n_tags, 0);
    dsv4_policy pol;
    memset(&pol, 0, sizeof pol);
    snprintf(pol.rule, sizeof pol.rule, "exact");
    dsv4_case_apply_overrides(&s.cases[0], "combined_lens", &pol);
    ck_assert_str_eq(pol.rule, "exact"); /* no override, no provenance */
    dsv4_suite_free(&s);
}
END_TEST

START_TEST(test_seeds)
{
    dsv4_suite s;
    dsv4_status st;
    int rc = load("suite: t\n"
                  "defaults: {params: {query_lens: [1]}}\n"
                  "cases:\n"
                  "  - {name: hex, op: combine_topk_swa_indices, seed: 0xDEADbeef01234567}\n"
                  "  - {name: max, op: combine_topk_swa_indices, seed: 18446744073709551615}\n"
                  "  - {name: zero, op: combine_topk_swa_indices, seed: 0}\n",
                  &s, &st);
    ck_assert_msg(rc == DSV4_OK, "%s", st.msg);
    ck_assert_int_eq(s.n, 3);
    ck_assert_uint_eq(s.cases[0].seed, UINT64_C(0xdeadbeef01234567));
    ck_assert_uint_eq(s.cases[1].seed, UINT64_MAX);
    ck_assert_uint_eq(s.cases[2].seed, 0);
    dsv4_suite_free(&s);
}
END_TEST

START_TEST(test_cannot_open)
{
    dsv4_suite s;
    dsv4_status st = {0};
    char path[192];
    snprintf(path, sizeof path, "%s/missing.yaml", tmpdir);
    ck_assert_int_eq(dsv4_suite_load(path, &s, &st), DSV4_EINPUT);
    char want[256];
    snprintf(want, sizeof want, "%s: cannot open: No such file or directory", path);
    ck_assert_str_eq(st.msg, want);
    ck_assert_ptr_null(s.cases);
}
END_TEST

/* A sweep past the suite limit (1024 cases) fails before expanding. */
START_TEST(test_sweep_limit)
{
    char text[2048], a[512] = "", b[512] = "";
    for (int i = 0; i < 33; i++)
        snprintf(a + strlen(a), sizeof a - strlen(a), "%s%d", i ? ", " : "", i + 1);
    for (int i = 0; i < 32; i++)
        snprintf(b + strlen(b), sizeof b - strlen(b), "%s%d", i ? ", " : "", i + 1);
    snprintf(text, sizeof text,
             "suite: t\n"
             "cases:\n"
             "  - name: a\n"
             "    op: combine_topk_swa_indices\n"
             "    params: {query_lens: [1]}\n"
             "    sweep: {topk: [%s], window_size: [%s]}\n", /* '{' at 6:12 */
             a, b);
    expect_error(text, 6, 12, "more than 1024 cases");
}
END_TEST

/* ------------------------------------------------------------------ */
/* One row per error class: the YAML, where, and a word the message names. */

#define HEAD "suite: t\ncases:\n  - name: a\n    op: combine_topk_swa_indices\n"
/* HEAD is lines 1-4; the case mapping starts at 3:5. */
#define A16 "aaaaaaaaaaaaaaaa"
#define A16x11 A16 A16 A16 A16 A16 A16 A16 A16 A16 A16 A16
#define A16x12 A16x11 A16 /* 192 characters: one too many for a name */

typedef struct error_row {
    const char *yaml;
    int line, col;
    const char *needle;
} error_row;

static const error_row error_rows[] = {
    /* unknown keys: top level, case, defaults, tolerance field */
    {"suite: t\ncolour: red\ncases: []\n", 2, 1, "unknown key 'colour'"},
    {HEAD "    params: {query_lens: [1]}\n    frobnicate: 1\n", 6, 5, "unknown key 'frobnicate'"},
    {"suite: t\ndefaults: {name: x}\ncases: []\n", 2, 12, "unknown key 'name' in 'defaults'"},
    {HEAD "    params: {query_lens: [1]}\n    tolerance: {combined_lens: {tol: 1}}\n", 6, 33,
     "unknown key 'tol'"},
    /* wrong node types */
    {HEAD "    params: {query_lens: [1]}\n    seed: {a: 1}\n", 6, 11, "'seed' must be a scalar"},
    {HEAD "    params: {query_lens: 3}\n", 5, 26, "parameter 'query_lens' (int list) must be a sequence"},
    {HEAD "    params: {query_lens: [1], topk: [2]}\n", 5, 37, "parameter 'topk' (int) must be a scalar"},
    {HEAD "    params: [query_lens]\n", 5, 13, "'params' must be a mapping"},
    {HEAD "    params: {query_lens: [1]}\n    tags: fast\n", 6, 11, "'tags' must be a sequence"},
    {"- suite: t\n", 1, 1, "the top level must be a mapping"},
    {"suite: t\ncases: {a: 1}\n", 2, 8, "'cases' must be a sequence"},
    /* missing required fields */
    {"cases: []\n", 1, 1, "missing required key 'suite'"},
    {"suite: t\n", 1, 1, "missing required key 'cases'"},
    {"suite: t\ncases:\n  - name: a\n    seed: 1\n", 3, 5, "case 'a' has no 'op'"},
    {"suite: t\ncases:\n  - op: combine_topk_swa_indices\n", 3, 5, "case has no 'name'"},
    {"suite: t\ncases: []\n", 2, 8, "'cases' is empty"},
    {HEAD, 3, 5, "needs parameter 'query_lens'"},
    /* unknown op, variant, param, output */
    {"suite: t\ncases:\n  - name: a\n    op: nope\n", 4, 9, "unknown op 'nope'"},
    {HEAD "    params: {query_lens: [1]}\n    variant: fancy\n", 6, 14, "no variant 'fancy'"},
    {"suite: t\ndefaults: {variant: fancy}\ncases:\n  - name: a\n    op: combine_topk_swa_indices\n",
     2, 21, "no variant 'fancy'"},
    {HEAD "    params: {query_lens: [1], bogus: 3}\n", 5, 31, "no parameter 'bogus'"},
    {"suite: t\ndefaults: {params: {bogus: 3}}\n" "cases:\n  - name: a\n    op: combine_topk_swa_indices\n",
     2, 21, "no parameter 'bogus'"},
    {HEAD "    params: {query_lens: [1]}\n    sweep: {bogus: [1]}\n", 6, 13, "no parameter 'bogus'"},
    {HEAD "    params: {query_lens: [1]}\n    tolerance: {scores: {atol: 1}}\n", 6, 17,
     "no output 'scores'"},
    /* values that do not parse */
    {HEAD "    params: {query_lens: [1], topk: abc}\n", 5, 37, "parameter 'topk': 'abc' is not a valid int"},
    {HEAD "    params: {query_lens: [1, x]}\n", 5, 30, "'x' is not a valid int"},
    {HEAD "    params: {query_lens: [1], invalid_frac: zz}\n", 5, 45, "'invalid_frac': 'zz'"},
    {HEAD "    params: {query_lens: [1]}\n    sweep: {topk: [8, 1.5]}\n", 6, 23, "'topk': '1.5'"},
    {HEAD "    params: {query_lens: [1]}\n    sweep: {prefix_lens: [[1], 2]}\n", 6, 32,
     "parameter 'prefix_lens' (int list) must be a sequence"},
    {HEAD "    params: {query_lens: [1]}\n    tolerance: {atol: -1}\n", 6, 23, "tolerance 'atol': '-1'"},
    {HEAD "    params: {query_lens: [1]}\n    tolerance: {budget: 2}\n", 6, 25, "tolerance 'budget'"},
    {HEAD "    params: {query_lens: [1]}\n    seed: -1\n", 6, 11, "seed '-1'"},
    {HEAD "    params: {query_lens: [1]}\n    seed: 18446744073709551616\n", 6, 11,
     "seed '18446744073709551616'"},
    {HEAD "    params: {query_lens: [1]}\n    seed: 0x\n", 6, 11, "seed '0x'"},
    {HEAD "    params: {query_lens: [1]}\n    seed: 12abc\n", 6, 11, "seed '12abc'"},
    /* duplicate names (plain and after sweep expansion) and keys */
    {HEAD "    params: {query_lens: [1]}\n  - name: a\n    op: combine_topk_swa_indices\n", 6, 5,
     "duplicate case name 'a' (first at line 3)"},
    {HEAD "    params: {query_lens: [1]}\n    sweep: {topk: [4, 4]}\n", 3, 5,
     "duplicate case name 'a[topk=4]'"},
    {HEAD "    params: {query_lens: [1]}\n    name: b\n", 6, 5, "duplicate key 'name'"},
    {HEAD "    params: {query_lens: [1], topk: 1, topk: 2}\n", 5, 40, "duplicate key 'topk'"},
    {"suite: t\nsuite: u\ncases: []\n", 2, 1, "duplicate key 'suite'"},
    /* empty file, YAML syntax, a second document */
    {"", 1, 1, "empty file"},
    {"# only a comment\n", 1, 1, "empty file"},
    {"suite: t\n  bad: x\n", 2, 6, "YAML syntax error: mapping values are not allowed"},
    {"suite: t\ncases: [a, b\n", 3, 1, "YAML syntax error"},
    {HEAD "    params: {query_lens: [1]}\n---\nsuite: u\n", 7, 1, "one YAML document"},
    /* limits */
    {HEAD "    params: {query_lens: [1]}\n    tags: [a, a, a, a, a, a, a, a, a]\n", 6, 11,
     "'tags' lists 9 entries: more than 8 tags"},
    {"suite: t\ndefaults: {tags: [a, b, c, d, e]}\ncases:\n  - name: a\n"
     "    op: combine_topk_swa_indices\n    params: {query_lens: [1]}\n"
     "    tags: [a, f, g, h, i]\n", 7, 24, "tag 'i': more than 8 tags"},
    {HEAD "    params: {query_lens: [1]}\n    tags: [abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKL]\n", 6, 12,
     "longer than 47 characters"},
    {"suite: t\ncases:\n  - name: " A16x12 "\n    op: combine_topk_swa_indices\n", 3, 11,
     "longer than 191 characters"},
    {"suite: t\ncases:\n  - name: " A16x11 "aaaaaaaa\n    op: combine_topk_swa_indices\n"
     "    params: {query_lens: [1]}\n    sweep: {topk: [4]}\n", 3, 5,
     "is longer than 191 characters"},
    {HEAD "    params: {query_lens: [1]}\n    sweep: {topk: []}\n", 6, 19, "sweep of 'topk' has no values"},
    {HEAD "    params: {query_lens: [1]}\n    sweep: {}\n", 6, 12, "'sweep' of case 'a' is empty"},
    /* schema rules of sweep and golden */
    {HEAD "    params: {query_lens: [1], topk: 8}\n    sweep: {topk: [4]}\n", 6, 13,
     "sweep parameter 'topk' is also set in 'params'"},
    {HEAD "    params: {query_lens: [1]}\n    sweep: {topk: [4]}\n    golden: x.h5\n", 7, 13,
     "'golden' cannot be combined with 'sweep'"},
    /* op->resolve's error carries the case's position */
    {HEAD "    params: {query_lens: [1], compress_ratio: 0}\n", 3, 5,
     "case 'a': compress_ratio = 0: must be >= 1"},
};

START_TEST(test_error)
{
    const error_row *r = &error_rows[_i];
    expect_error(r->yaml, r->line, r->col, r->needle);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Includes, and the bounds on what a suite can make the loader do      */

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void path_in(char *buf, size_t len, const char *name)
{
    snprintf(buf, len, "%s/%s", tmpdir, name);
}

static void write_in(const char *name, const char *text) { dsv4_test_write_in(tmpdir, name, text); }

/* Loading path fails with DSV4_EINPUT, a message holding each non-NULL
 * needle, within max_s seconds; returns how long it took. */
static double expect_refused(const char *path, double max_s, const char *n1, const char *n2)
{
    dsv4_suite s;
    dsv4_status st = {0};
    double t0 = now_s();
    int rc = dsv4_suite_load(path, &s, &st);
    double dt = now_s() - t0;
    ck_assert_msg(rc == DSV4_EINPUT, "%s: rc %d: %s", path, rc, st.msg);
    ck_assert_msg(strstr(st.msg, n1), "expected '%s' in: %s", n1, st.msg);
    ck_assert_msg(!n2 || strstr(st.msg, n2), "expected '%s' in: %s", n2, st.msg);
    ck_assert_msg(dt < max_s, "%s refused after %.3f s (at most %.1f): %s", path, dt, max_s, st.msg);
    ck_assert_ptr_null(s.cases);
    return dt;
}

/* Writes text as the suite file and expects it refused as expect_refused
 * does, the message holding the suite file's path followed by after. */
static double expect_text_refused(const char *text, double max_s, const char *after, const char *n2)
{
    write_yaml(text);
    char want[300];
    snprintf(want, sizeof want, "%s%s", yaml_path, after);
    return expect_refused(yaml_path, max_s, want, n2);
}

#define ONE_CASE(name) "  - {name: " name ", op: combine_topk_swa_indices, params: {query_lens: [1]}}\n"

/* Own cases first, then each include's, with its own golden_dir. */
START_TEST(test_includes)
{
    char dir[192];
    path_in(dir, sizeof dir, "sub");
    ck_assert_int_eq(mkdir(dir, 0755), 0);
    write_in("a.yaml", "suite: a\ncases:\n" ONE_CASE("ca"));
    write_in("sub/b.yaml", "suite: b\ngolden_dir: g\ninclude: [../e.yaml]\ncases:\n" ONE_CASE("cb"));
    write_in("e.yaml", "suite: e\ninclude: []\n");
    write_yaml("suite: top\ninclude: [a.yaml, sub/b.yaml]\ncases:\n" ONE_CASE("top"));
    dsv4_suite s;
    dsv4_status st = {0};
    ck_assert_msg(dsv4_suite_load(yaml_path, &s, &st) == DSV4_OK, "%s", st.msg);
    ck_assert_int_eq(s.n, 3);
    ck_assert_str_eq(s.cases[0].name, "top");
    ck_assert_str_eq(s.cases[1].name, "ca");
    ck_assert_str_eq(s.cases[2].name, "cb");
    char want[256];
    path_in(want, sizeof want, "a.yaml");
    ck_assert_str_eq(s.cases[1].file, want);
    path_in(want, sizeof want, "sub/g/cb.h5");
    ck_assert_str_eq(s.cases[2].golden, want);
    dsv4_suite_free(&s);
}
END_TEST

/* A FIFO, a device or a directory is refused at once, as an include (the
 * message names the include's line) and as the suite itself. */
START_TEST(test_not_regular_files)
{
    char fifo[192], want[320];
    path_in(fifo, sizeof fifo, "f.yaml");
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    static const struct {
        const char *entry, *kind;
    } incs[] = {{"f.yaml", "is a FIFO"}, {"/dev/zero", "is a character device"},
                {"sub", "is a directory"}};
    path_in(want, sizeof want, "sub");
    ck_assert_int_eq(mkdir(want, 0755), 0);
    for (size_t i = 0; i < sizeof incs / sizeof incs[0]; i++) {
        char text[128];
        snprintf(text, sizeof text, "suite: t\ninclude: [%s]\n", incs[i].entry);
        write_yaml(text);
        snprintf(want, sizeof want, "%s:2:11: include '%s': ", yaml_path, incs[i].entry);
        expect_refused(yaml_path, 1.0, want, incs[i].kind);
    }
    snprintf(want, sizeof want, "%s: is a FIFO (named pipe), not a regular file", fifo);
    expect_refused(fifo, 1.0, want, NULL);
    expect_refused("/dev/zero", 1.0, "/dev/zero: is a character device", NULL);
}
END_TEST

START_TEST(test_include_cycle)
{
    expect_text_refused("suite: t\ninclude: [s.yaml]\n", 1.0, ":2:11: include 's.yaml': nested more than 8 deep", NULL);
}
END_TEST

/* A suite may load 256 files in all, each include counted each time. */
START_TEST(test_file_count_limit)
{
    write_in("e.yaml", "suite: e\ninclude: []\n");
    char text[4096] = "suite: t\ninclude: [";
    for (int i = 0; i < 255; i++)
        strcat(text, "e.yaml, ");
    strcat(text, "]\n");
    write_yaml(text);
    dsv4_suite s;
    dsv4_status st = {0};
    ck_assert_msg(dsv4_suite_load(yaml_path, &s, &st) == DSV4_OK, "%s", st.msg);
    ck_assert_int_eq(s.n, 0);
    dsv4_suite_free(&s);
    /* one more: the 256th entry, at column 11 + 8 * 255 */
    strcpy(text + strlen(text) - 2, "e.yaml]\n");
    expect_text_refused(text, 1.0, ":2:2051: include 'e.yaml': more than 256 suite files", NULL);
}
END_TEST

/* 8 levels of 40 includes each would be 40^8 loads; refused at the file
 * limit, in milliseconds. */
START_TEST(test_include_dag)
{
    dsv4_test_write_include_dag(tmpdir);
    char root[192], want[256];
    path_in(root, sizeof root, "L0.yaml");
    snprintf(want, sizeof want, "%s/L", tmpdir);
    double dt = expect_refused(root, 1.0, want, "more than 256 suite files in all");
    fprintf(stderr, "include DAG 8 x 40: refused in %.4f s\n", dt);
}
END_TEST

/* 4 MiB in all: one file over it is refused before it is read; so is the
 * include that would take a suite over it (naming the include's line). */
START_TEST(test_byte_limit)
{
    size_t big = (size_t)DSV4_YAML_MAX_BYTES + 1;
    char *text = malloc(big + 1);
    ck_assert_ptr_nonnull(text);
    memset(text, '#', big);
    text[big] = '\0';
    expect_text_refused(text, 1.0, ": 4194305 bytes, more than 4194304", NULL);
    dsv4_suite s;
    dsv4_status st = {0};
    ck_assert_int_eq(dsv4_suite_load_buffer("buf.yaml", text, big, &s, &st), DSV4_EINPUT);
    ck_assert_msg(strstr(st.msg, "buf.yaml: 4194305 bytes, more than 4194304"), "%s", st.msg);
    /* two includes of a 3 MiB file: the second one is refused */
    size_t three = (size_t)3 << 20;
    memset(text, '#', three);
    snprintf(text + three, big - three, "\nsuite: b\ninclude: []\n");
    write_in("big.yaml", text);
    free(text);
    write_yaml("suite: t\ninclude: [big.yaml, big.yaml]\n");
    char want[256];
    snprintf(want, sizeof want, "%s:2:21: include 'big.yaml': %s/big.yaml: ", yaml_path, tmpdir);
    expect_refused(yaml_path, 1.0, want, "bytes, more than");
}
END_TEST

/* 100k nested '[': libyaml alone takes tens of seconds; refused at the
 * 64th level (the top-level mapping is the first). */
START_TEST(test_deep_flow_nesting)
{
    const size_t depth = 100000;
    char *text = malloc(depth + 64);
    ck_assert_ptr_nonnull(text);
    int n = snprintf(text, 64, "suite: t\ncases: ");
    memset(text + n, '[', depth);
    text[n + depth] = '\0';
    write_yaml(text);
    free(text);
    char want[256];
    snprintf(want, sizeof want, "%s:2:71: mappings and sequences nested deeper than 64 levels",
             yaml_path);
    double dt = expect_refused(yaml_path, 1.0, want, NULL);
    fprintf(stderr, "100k nested '[': refused in %.4f s\n", dt);
}
END_TEST

/* Block mappings nest by indentation: level d starts at line d, column d-1. */
START_TEST(test_deep_block_nesting)
{
    char *text = malloc(100 * 104 + 64);
    ck_assert_ptr_nonnull(text);
    size_t n = (size_t)sprintf(text, "suite: t\nx:\n");
    for (int i = 1; i <= 100; i++)
        n += (size_t)sprintf(text + n, "%*sk:%s\n", i, "", i == 100 ? " v" : "");
    expect_text_refused(text, 1.0, ":66:65: mappings and sequences nested deeper", NULL);
    free(text);
}
END_TEST

/* A million nodes in all; the next one is refused where it stands. */
START_TEST(test_node_limit)
{
    const size_t items = DSV4_YAML_MAX_NODES;
    char *text = malloc(2 * items + 64);
    ck_assert_ptr_nonnull(text);
    size_t n = (size_t)sprintf(text, "suite: t\ncases: [");
    for (size_t i = 0; i < items; i++)
        memcpy(text + n + 2 * i, "0,", 2);
    strcpy(text + n + 2 * items, "0]\n");
    /* nodes 1..5: the mapping, suite, t, cases, the sequence; node 1000001
     * is scalar 999995 (0-based), at column 9 + 2 * 999995 */
    expect_text_refused(text, 5.0, ":2:1999999: more than 1000000 YAML nodes", NULL);
    free(text);
}
END_TEST

/* Anchors and aliases: libyaml matches each against every earlier anchor. */
START_TEST(test_anchor_limits)
{
    for (int alias = 0; alias < 2; alias++) {
        char *text = malloc(20 * 1100);
        ck_assert_ptr_nonnull(text);
        size_t n = (size_t)sprintf(text, "suite: t\nx: [&a 0");
        for (int i = 1; i <= 1025; i++)
            n += alias ? (size_t)sprintf(text + n, ", *a") : (size_t)sprintf(text + n, ", &a%d 0", i);
        strcpy(text + n, "]\n");
        expect_text_refused(text, 1.0, ":2:", alias ? "more than 1024 aliases" : "more than 1024 anchors");
        free(text);
    }
}
END_TEST

/* 60k keys in one mapping, the last a duplicate of the first: found at its
 * place, in well under a second (a pairwise check makes 1.8e9 compares). */
START_TEST(test_duplicate_keys_linear)
{
    const int keys = 60000;
    char *text = malloc((size_t)keys * 24 + 256);
    ck_assert_ptr_nonnull(text);
    size_t n = (size_t)sprintf(text, HEAD "    params: {query_lens: [1]}\n    tolerance: {");
    size_t line6 = n - strlen("    tolerance: {");
    for (int i = 0; i < keys; i++)
        n += (size_t)sprintf(text + n, "k%d: 1, ", i);
    size_t col = n - line6 + 1;
    strcpy(text + n, "k0: 1}\n");
    write_yaml(text);
    free(text);
    char want[256];
    snprintf(want, sizeof want, "%s:6:%zu: duplicate key 'k0' in 'tolerance'", yaml_path, col);
    double dt = expect_refused(yaml_path, 1.0, want, NULL);
    fprintf(stderr, "duplicate key after 60k keys: found in %.4f s\n", dt);
}
END_TEST

/* A params mapping holds at most the 40 parameters of a case. */
START_TEST(test_params_map_limit)
{
    char text[2048];
    size_t n = (size_t)sprintf(text, HEAD "    params: {");
    for (int i = 0; i < 41; i++)
        n += (size_t)sprintf(text + n, "%sp%d: 1", i ? ", " : "", i);
    strcpy(text + n, "}\n");
    expect_error(text, 5, 13, "'params' has 41 entries, more than the 40 parameters of a case");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cases");
    TCase *tc = dsv4_test_tcase(s, "load", 0, setup, teardown,
        DSV4_TESTS(test_valid_suite, test_no_golden, test_seeds, test_cannot_open, test_sweep_limit));
    tcase_add_loop_test(tc, test_error, 0, (int)(sizeof error_rows / sizeof error_rows[0]));
    /* 30 s: each test asserts its own, much shorter, time */
    dsv4_test_tcase(s, "bounds", 30, setup, teardown,
        DSV4_TESTS(test_includes, test_not_regular_files, test_include_cycle, test_file_count_limit, test_include_dag,
                   test_byte_limit, test_deep_flow_nesting, test_deep_block_nesting, test_node_limit,
                   test_anchor_limits, test_duplicate_keys_linear, test_params_map_limit));
    return dsv4_test_run(s);
}
