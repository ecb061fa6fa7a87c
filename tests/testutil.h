/* testutil.h - shared helpers for the Check test programs. */
#ifndef DSV4_TESTUTIL_H
#define DSV4_TESTUTIL_H

#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Runs one suite with CK_NORMAL output; returns the process exit status. */
static inline int dsv4_test_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/* The tests of a TCase as one argument pair, e.g.
 * dsv4_test_tcase(s, "core", 60, NULL, NULL, DSV4_TESTS(one_test, another)). */
#define DSV4_TESTS(...) \
    (const TTest *const[]){__VA_ARGS__}, sizeof((const TTest *const[]){__VA_ARGS__}) / sizeof(const TTest *)

/* Adds n tests to tc in order. */
static inline void dsv4_test_add(TCase *tc, const TTest *const *tests, size_t n)
{
    for (size_t i = 0; i < n; i++)
        tcase_add_test(tc, tests[i]);
}

/* Adds a TCase named name to s with its timeout in seconds (0 keeps
 * Check's default), a checked fixture (setup and teardown, each may be NULL)
 * and its n tests in order (tests may be NULL when n is 0); returns it, for
 * loop tests. */
static inline TCase *dsv4_test_tcase(Suite *s, const char *name, double timeout, SFun setup, SFun teardown,
                                     const TTest *const *tests, size_t n)
{
    TCase *tc = tcase_create(name);
    if (setup || teardown)
        tcase_add_checked_fixture(tc, setup, teardown);
    if (timeout > 0)
        tcase_set_timeout(tc, timeout);
    dsv4_test_add(tc, tests, n);
    suite_add_tcase(s, tc);
    return tc;
}

/* The whole main() of a test program with one TCase: builds the suite,
 * runs it (dsv4_test_run) and returns the exit status. */
static inline int dsv4_test_main(const char *suite_name, const char *tcase_name, double timeout, SFun setup,
                                 SFun teardown, const TTest *const *tests, size_t n)
{
    Suite *s = suite_create(suite_name);
    dsv4_test_tcase(s, tcase_name, timeout, setup, teardown, tests, n);
    return dsv4_test_run(s);
}

/* Defines main() of a test program with one TCase: its suite, TCase
 * name, timeout and checked fixture as dsv4_test_tcase, then its tests. */
#define DSV4_TEST_MAIN(suite_name, tcase_name, timeout, setup, teardown, ...) \
    int main(void) { return dsv4_test_main(suite_name, tcase_name, timeout, setup, teardown, DSV4_TESTS(__VA_ARGS__)); }

/* One TCase of a program with several: its name, timeout, checked fixture
 * and tests, as dsv4_test_tcase takes them; DSV4_TEST_GROUP(name, timeout,
 * setup, teardown, tests...) writes one. */
typedef struct dsv4_test_group {
    const char *name;
    double timeout;
    SFun setup, teardown;
    const TTest *const *tests;
    size_t n;
} dsv4_test_group;

#define DSV4_TEST_GROUP(name, timeout, setup, teardown, ...) {name, timeout, setup, teardown, DSV4_TESTS(__VA_ARGS__)}

/* The groups of a program as one argument pair of dsv4_test_groups_main. */
#define DSV4_TEST_GROUPS(...)                                                                          \
    (const dsv4_test_group[]){__VA_ARGS__},                                                            \
        sizeof((const dsv4_test_group[]){__VA_ARGS__}) / sizeof(dsv4_test_group)

/* The whole main() of a test program with n TCases: builds the suite of
 * the groups in order, runs it (dsv4_test_run) and returns the exit status. */
static inline int dsv4_test_groups_main(const char *suite_name, const dsv4_test_group *groups, size_t n)
{
    Suite *s = suite_create(suite_name);
    for (size_t i = 0; i < n; i++)
        dsv4_test_tcase(s, groups[i].name, groups[i].timeout, groups[i].setup, groups[i].teardown, groups[i].tests,
                        groups[i].n);
    return dsv4_test_run(s);
}

/* Defines main() of a test program with several TCases: its suite, then its
 * groups (DSV4_TEST_GROUP) in order. */
#define DSV4_TEST_GROUPS_MAIN(suite_name, ...) \
    int main(void) { return dsv4_test_groups_main(suite_name, DSV4_TEST_GROUPS(__VA_ARGS__)); }

/* Reads a whole file into a malloc'd buffer with a NUL after its last byte
 * (so text can be searched as a string); *len, when given, is its size. */
static inline char *dsv4_test_slurp_len(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    ck_assert_msg(n >= 0, "cannot size %s", path);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    ck_assert_ptr_nonnull(buf);
    ck_assert_int_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    fclose(f);
    if (len)
        *len = (size_t)n;
    return buf;
}

static inline char *dsv4_test_slurp(const char *path) { return dsv4_test_slurp_len(path, NULL); }

/* How many times needle occurs in hay (overlapping occurrences count). */
static inline int dsv4_test_count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

/* The strings an output must hold, as one argument of dsv4_test_holds or
 * dsv4_test_expect: DSV4_WANTS("summary: 1 passed", "PASS ..."). */
#define DSV4_WANTS(...) ((const char *const[]){__VA_ARGS__, NULL})

/* The first of the NULL-terminated strings wants that text does not hold;
 * NULL when it holds them all. */
static inline const char *dsv4_test_first_missing(const char *text, const char *const *wants)
{
    for (; *wants; wants++)
        if (!strstr(text, *wants))
            return *wants;
    return NULL;
}

/* Asserts that text holds every string of wants (DSV4_WANTS); a failure
 * names the first one missing and shows the text. Macros, so that Check
 * reports the caller's line. */
#define dsv4_test_holds(text, wants)                                                                   \
    do {                                                                                               \
        const char *const text_ = (text), *const missing_ = dsv4_test_first_missing(text_, wants);    \
        ck_assert_msg(missing_ == NULL, "no '%s' in:\n%.6000s", missing_, text_);                     \
    } while (0)

/* Asserts that the command run (an expression that runs it into text and
 * gives its exit code, e.g. dsv4_test_cli(...)) exits with want_rc and that
 * text then holds every string of wants; a failure names the command as
 * written and shows its output. */
#define dsv4_test_expect(run, want_rc, text, wants)                                                    \
    do {                                                                                               \
        const int rc_ = (run);                                                                         \
        ck_assert_msg(rc_ == (want_rc), "%s: exit %d, want %d:\n%.6000s", #run, rc_, (want_rc), (text)); \
        dsv4_test_holds(text, wants);                                                                  \
    } while (0)

/* Writes text to path (created or truncated). */
static inline void dsv4_test_write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

/* The process helpers need POSIX (popen, mkdtemp): a test program that uses
 * them defines _POSIX_C_SOURCE 200809L before its first #include. */
#if defined(_POSIX_C_SOURCE) && _POSIX_C_SOURCE >= 200809L
#include <libgen.h>
#include <sys/wait.h>

/* The dsv4check under test: $DSV4CHECK, else build/dsv4check (tests run
 * from the repository root). */
static inline const char *dsv4_test_exe(void)
{
    const char *p = getenv("DSV4CHECK");
    return p && *p ? p : "build/dsv4check";
}

/* Runs the shell command line cmd (which redirects stderr itself) with its
 * output read into out (NUL-terminated, at most len - 1 bytes); asserts a
 * normal exit (a signal means a crash) and returns the exit code. */
static inline int dsv4_test_popen(char *out, size_t len, const char *cmd)
{
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    size_t n = fread(out, 1, len - 1, p);
    out[n] = '\0';
    int status = pclose(p);
    ck_assert_msg(WIFEXITED(status), "`%s` did not exit normally (crash?):\n%s", cmd, out);
    return WEXITSTATUS(status);
}

/* Runs the shell command line fmt (printf-style) as `( CMD ) 2>&1`, its
 * stdout + stderr into out; the exit code, as dsv4_test_popen. */
static inline int dsv4_test_sh(char *out, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static inline int dsv4_test_sh(char *out, size_t len, const char *fmt, ...)
{
    char cmd[16384], full[16500];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    ck_assert_msg(n >= 0 && (size_t)n < sizeof cmd, "command line too long");
    snprintf(full, sizeof full, "( %s ) 2>&1", cmd);
    return dsv4_test_popen(out, len, full);
}

/* <the folder of the dsv4check under test>/sub/name, e.g. an example
 * plug-in built beside the tests ("tests") or a mutant ("mutants"); the 4
 * most recent results stay valid. */
static inline const char *dsv4_test_build_path(const char *sub, const char *name)
{
    static char buf[4][512];
    static int k;
    char dir[400];
    snprintf(dir, sizeof dir, "%s", dsv4_test_exe());
    snprintf(buf[k & 3], sizeof buf[0], "%s/%s/%s", dirname(dir), sub, name);
    return buf[k++ & 3];
}

/* Runs `ENV dsv4check ARGS 2>&1` (ENV: "" or "NAME=value ...", ARGS from
 * fmt printf-style) into out; the exit code, as dsv4_test_popen. */
static inline int dsv4_test_vcli_env(char *out, size_t len, const char *env, const char *fmt, va_list ap)
{
    char args[8192], cmd[8448];
    int n = vsnprintf(args, sizeof args, fmt, ap);
    ck_assert_msg(n >= 0 && (size_t)n < sizeof args, "command line too long");
    n = snprintf(cmd, sizeof cmd, "%s%s%s %s 2>&1", env, *env ? " " : "", dsv4_test_exe(), args);
    ck_assert_msg(n >= 0 && (size_t)n < sizeof cmd, "command line too long");
    return dsv4_test_popen(out, len, cmd);
}

static inline int dsv4_test_cli_env(char *out, size_t len, const char *env, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static inline int dsv4_test_cli_env(char *out, size_t len, const char *env, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = dsv4_test_vcli_env(out, len, env, fmt, ap);
    va_end(ap);
    return rc;
}

/* Runs `dsv4check ARGS 2>&1` into out; the exit code. */
static inline int dsv4_test_cli(char *out, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static inline int dsv4_test_cli(char *out, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = dsv4_test_vcli_env(out, len, "", fmt, ap);
    va_end(ap);
    return rc;
}

/* Writes text to dir/name (created or truncated). */
static inline void dsv4_test_write_in(const char *dir, const char *name, const char *text)
{
    char path[600];
    ck_assert_int_lt(snprintf(path, sizeof path, "%s/%s", dir, name), (int)sizeof path);
    dsv4_test_write_file(path, text);
}

/* Suite files L0.yaml .. L7.yaml in dir, each including the next level 40
 * times, and the leaf L8.yaml: 40^8 loads for a loader that does not count
 * its files in all. */
static inline void dsv4_test_write_include_dag(const char *dir)
{
    dsv4_test_write_in(dir, "L8.yaml", "suite: leaf\ninclude: []\n");
    for (int k = 0; k < 8; k++) {
        char name[16], text[1024];
        int n = snprintf(text, sizeof text, "suite: l%d\ninclude: [", k);
        for (int i = 0; i < 40; i++)
            n += snprintf(text + n, sizeof text - (size_t)n, "%sL%d.yaml", i ? ", " : "", k + 1);
        snprintf(text + n, sizeof text - (size_t)n, "]\n");
        snprintf(name, sizeof name, "L%d.yaml", k);
        dsv4_test_write_in(dir, name, text);
    }
}

/* Makes a fresh folder /tmp/<tag>.XXXXXX into dir. */
static inline void dsv4_test_mkdtemp(char *dir, size_t len, const char *tag)
{
    snprintf(dir, len, "/tmp/%s.XXXXXX", tag);
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

/* Removes a folder made by dsv4_test_mkdtemp, with everything in it. */
static inline void dsv4_test_rm_rf(const char *dir)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}

/* The checked fixture of an end-to-end test program: a fresh folder
 * /tmp/<tag>.XXXXXX into dir and an output buffer of out_len bytes into
 * *out; dsv4_test_scratch_close removes the one and frees the other. */
static inline void dsv4_test_scratch_open(char *dir, size_t len, const char *tag, char **out, size_t out_len)
{
    *out = malloc(out_len);
    ck_assert_ptr_nonnull(*out);
    dsv4_test_mkdtemp(dir, len, tag);
}

static inline void dsv4_test_scratch_close(const char *dir, char **out)
{
    dsv4_test_rm_rf(dir);
    free(*out);
    *out = NULL;
}

/* The public C API, for a test program that includes dsv4check.h first. */
#ifdef DSV4CHECK_H
/* The checked fixture of an API test program: an output buffer of out_len
 * bytes into *out and the suite at path loaded into *suite (err, of errlen
 * bytes, gets the loader's message: none); dsv4_test_api_close frees both. */
static inline void dsv4_test_api_open(const char *path, dsv4check_suite **suite, char *err, size_t errlen, char **out,
                                      size_t out_len)
{
    *out = malloc(out_len);
    ck_assert_ptr_nonnull(*out);
    ck_assert_msg(dsv4check_suite_load(path, suite, err, errlen) == DSV4CHECK_OK, "%s: %s", path, err);
    ck_assert_str_eq(err, "");
}

static inline void dsv4_test_api_close(dsv4check_suite *suite, char **out)
{
    dsv4check_suite_free(suite);
    free(*out);
    *out = NULL;
}

/* Defines the fixture of an API test program on the suite at path: err (the
 * API's messages), out (out_len bytes, for the CLI's output), suite_var (the
 * suite), setup and teardown (dsv4_test_api_open / _close) and find_case
 * (a case of the suite by name). */
#define DSV4_TEST_API_FIXTURE(path, suite_var, out_len)                                                \
    static char err[1024];                                                                             \
    static dsv4check_suite *suite_var;                                                                 \
    static char *out;                                                                                  \
    static void setup(void) { dsv4_test_api_open(path, &suite_var, err, sizeof err, &out, out_len); }   \
    static void teardown(void) { dsv4_test_api_close(suite_var, &out); }                               \
    static const dsv4check_case *find_case(const char *name) { return dsv4_test_find_case(suite_var, name); }

/* The case of suite s named name; the test fails when s has none. */
static inline const dsv4check_case *dsv4_test_find_case(const dsv4check_suite *s, const char *name)
{
    for (int i = 0; i < dsv4check_suite_count(s); i++)
        if (strcmp(dsv4check_case_name(dsv4check_suite_case(s, i)), name) == 0)
            return dsv4check_suite_case(s, i);
    ck_abort_msg("case %s not in the suite", name);
    return NULL;
}
#endif

/* Goldens, for a test program that includes harness/golden.h first. */
#ifdef DSV4_GOLDEN_H
/* The first written slot (>= 0) of an int32 or int64 slot_mapping; the
 * test fails when every token is skipped. */
static inline long dsv4_test_first_slot(const dsv4_tensor *sm)
{
    long slot = -1;
    for (int64_t t = 0; t < sm->shape[0] && slot < 0; t++)
        slot = sm->dtype == DSV4_I32 ? ((const int32_t *)sm->data)[t] : (long)((const int64_t *)sm->data)[t];
    ck_assert_int_ge(slot, 0);
    return slot;
}

/* The golden at path read into g (which the caller frees). */
static inline void dsv4_test_golden_read(const char *path, dsv4_golden *g)
{
    dsv4_status st = {0};
    memset(g, 0, sizeof *g);
    ck_assert_msg(dsv4_golden_read(path, g, &st) == 0, "%s: %s", path, st.msg);
}

/* Writes g (a golden the test changed) to path, replacing what is there,
 * frees it and runs `dsv4check check PATH --impl ref` with its output into
 * out; returns the exit code. */
static inline int dsv4_test_check_changed(dsv4_golden *g, const char *path, char *out, size_t len)
{
    dsv4_status st = {0};
    ck_assert_msg(dsv4_golden_write(path, g, 1, &st) == 0, "%s", st.msg);
    dsv4_golden_free(g);
    return dsv4_test_cli(out, len, "check %s --impl ref", path);
}

/* The same through a fresh folder under /tmp, removed afterwards. */
static inline int dsv4_test_check_changed_tmp(dsv4_golden *g, char *out, size_t len)
{
    char dir[64], path[128];
    dsv4_test_mkdtemp(dir, sizeof dir, "dsv4changed");
    snprintf(path, sizeof path, "%s/changed.h5", dir);
    const int rc = dsv4_test_check_changed(g, path, out, len);
    dsv4_test_rm_rf(dir);
    return rc;
}
#endif
#endif

/* Ops, for a test program that includes ops/ops.h first. */
#ifdef DSV4_OPS_H
/* Sets one parameter of op from its YAML text. */
static inline void dsv4_test_set_param(const dsv4_op *op, dsv4_params *ps, const char *name, const char *text)
{
    dsv4_status st = {0};
    dsv4_param p;
    ck_assert_ptr_nonnull(dsv4_op_param(op, name));
    ck_assert_msg(dsv4_param_parse(dsv4_op_param(op, name), text, &p, &st) == 0, "%s", st.msg);
    ck_assert_msg(dsv4_params_set(ps, &p, &st) == 0, "%s", st.msg);
}

/* The op named op_name, with ps set from the name, text pairs of kv (a
 * NULL name ends them) and completed by the op's defaults. */
static inline const dsv4_op *dsv4_test_op_with(const char *op_name, dsv4_params *ps, const char *const *kv)
{
    const dsv4_op *op = dsv4_op_find(op_name);
    ck_assert_msg(op != NULL, "no op %s", op_name);
    memset(ps, 0, sizeof *ps);
    for (int k = 0; kv[k]; k += 2)
        dsv4_test_set_param(op, ps, kv[k], kv[k + 1]);
    dsv4_status st = {0};
    ck_assert_msg(dsv4_op_complete_params(op, ps, "test", &st) == 0, "%s", st.msg);
    return op;
}
#endif

#endif
