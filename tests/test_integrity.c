/* test_integrity.c - the gate cannot be fooled or broken by the
 * implementation it tests, nor by where its reports go.  End to end through
 * build/dsv4check (or $DSV4CHECK) with the hostile plug-ins of
 * tests/plugins/hostile.c (build/tests/plugins/):
 *   - exit(0), _exit(0), abort, SIGSEGV, a constructor that exits, a write
 *     past an output: each an ERROR of its case (exit 3) at -j 1 (one case
 *     and two) and -j 2, with the console, JUnit, JSON, HTML and repro
 *     reports all written and the repro files replayable;
 *   - an err message without its NUL is read to errlen - 1 bytes;
 *   - a run() that never returns is killed at --timeout;
 *   - a GEMM that zeroes its output and overwrites an input is an ERROR
 *     naming the input and its first changed element;
 *   - SIGTERM or SIGINT of dsv4check ends its workers and their plug-in
 *     processes;
 *   - reports are renamed into place whole, and never over a suite or
 *     golden the run reads (under any name or link). */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

static char tmpdir[256];
static char *out; /* the last command's stdout + stderr */
#define OUT_MAX (1 << 20)

static const char *two_cases = "'^combine_(decode_only_c4|mixed_prefill_c4)$'";
static const char *one_case = "'^combine_decode_only_c4$'";
static const char *case_names[2] = {"combine_decode_only_c4", "combine_mixed_prefill_c4"};

/* build/tests/<sub>: the plug-ins sit beside the test programs. */
static const char *built(const char *sub) { return dsv4_test_build_path("tests", sub); }

static const char *hostile(const char *mode)
{
    char sub[64];
    snprintf(sub, sizeof sub, "plugins/libhostile_%s.so", mode);
    return built(sub);
}

/* Runs a shell command line, stdout + stderr into out; the exit code. */
#define sh(...) dsv4_test_sh(out, OUT_MAX, __VA_ARGS__)

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void setup(void) { dsv4_test_scratch_open(tmpdir, sizeof tmpdir, "dsv4int", &out, OUT_MAX); }
static void teardown(void) { dsv4_test_scratch_close(tmpdir, &out); }

static int file_exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* A process that is gone, or a zombie nobody reaped yet. */
static int process_gone(long pid)
{
    char path[64], stat[256] = "";
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 1;
    size_t n = fread(stat, 1, sizeof stat - 1, f);
    fclose(f);
    stat[n] = '\0';
    const char *close = strrchr(stat, ')');
    return close && close[1] == ' ' && (close[2] == 'Z' || close[2] == 'X');
}

/* ---- processes that end: ERROR of their case, every report written ---- */

typedef struct crash_class {
    const char *mode;
    const char *message; /* in the console line of each case and in every report */
} crash_class;

static const crash_class crashes[] = {
    {"exit", "hostile-exit: the implementation's process exited with status 0 while running "
             "combine_topk_swa_indices [default]"},
    {"_exit", "hostile-_exit: the implementation's process exited with status 0 while running "
              "combine_topk_swa_indices [default]"},
    {"abort", "hostile-abort: the implementation's process was killed by signal 6 (Aborted) while running "
              "combine_topk_swa_indices [default]"},
    {"segv", "hostile-segv: the implementation's process was killed by signal 11 (Segmentation fault) while "
             "running combine_topk_swa_indices [default]"},
    {"ctor_exit", "libhostile_ctor_exit.so: the implementation's process exited with status 0 while loading (in "
                  "a constructor, dsv4_plugin_entry, init or supports)"},
    {"overrun", "output 'combined_indices': guard bytes after the buffer overwritten (byte 0 of 4096 is 0x11)"},
};
#define N_CRASHES ((int)(sizeof crashes / sizeof crashes[0]))

/* -j 1 on one case, -j 1 on two, -j 2 on two. */
static const struct {
    int jobs, cases;
} settings[] = {{1, 1}, {1, 2}, {2, 2}};
#define N_SETTINGS 3

START_TEST(crashes_are_errors_with_every_report)
{
    const crash_class *k = &crashes[_i / N_SETTINGS];
    const int jobs = settings[_i % N_SETTINGS].jobs, n = settings[_i % N_SETTINGS].cases;
    char what[64];
    snprintf(what, sizeof what, "%s, -j %d, %d case(s)", k->mode, jobs, n);
    int rc = sh("%s run cases/ci.yaml --filter %s --impl %s -j %d --junit %s/r.xml --json %s/r.json --html %s/r.html "
                "--repro-dir %s/repro",
                dsv4_test_exe(), n == 1 ? one_case : two_cases, hostile(k->mode), jobs, tmpdir, tmpdir, tmpdir, tmpdir);
    ck_assert_msg(rc == 3, "%s: exit %d:\n%.3000s", what, rc, out);
    ck_assert_msg(dsv4_test_count(out, "ERROR     combine_") == n, "%s:\n%.3000s", what, out);
    ck_assert_msg(dsv4_test_count(out, k->message) == n, "%s: '%s' not %d times:\n%.3000s", what, k->message, n, out);
    char summary[64];
    snprintf(summary, sizeof summary, "summary: 0 passed, %d failed, 0 skipped", n);
    ck_assert_msg(strstr(out, summary) != NULL, "%s:\n%.3000s", what, out);
    char path[400];
    snprintf(path, sizeof path, "%s/r.xml", tmpdir);
    char *junit = dsv4_test_slurp(path);
    char errors[32];
    snprintf(errors, sizeof errors, "errors=\"%d\"", n);
    ck_assert_msg(strstr(junit, errors) && dsv4_test_count(junit, "<error message=\"") == n &&
                      dsv4_test_count(junit, k->message) == n,
                  "%s: JUnit:\n%.3000s", what, junit);
    snprintf(path, sizeof path, "%s/r.json", tmpdir);
    char *json = dsv4_test_slurp(path);
    ck_assert_msg(strstr(json, "\"exit_code\": 3") && dsv4_test_count(json, "\"result\": \"ERROR\"") == n &&
                      dsv4_test_count(json, k->message) == n,
                  "%s: JSON:\n%.3000s", what, json);
    snprintf(path, sizeof path, "%s/r.html", tmpdir);
    char *html = dsv4_test_slurp(path);
    ck_assert_msg(strstr(html, summary) && dsv4_test_count(html, k->message) == n, "%s: HTML", what);
    free(junit), free(json), free(html);
    for (int c = 0; c < n; c++) {
        snprintf(path, sizeof path, "%s/repro/%s.h5", tmpdir, case_names[c]);
        ck_assert_msg(file_exists(path), "%s: no repro file %s:\n%.3000s", what, path, out);
        /* the saved inputs and expected outputs replay: the reference passes */
        rc = sh("%s check %s --impl ref", dsv4_test_exe(), path);
        ck_assert_msg(rc == 0, "%s: check %s --impl ref: exit %d:\n%.3000s", what, path, rc, out);
    }
}
END_TEST

/* err filled to errlen without a NUL: the message is its first errlen - 1
 * bytes, nothing after them. */
START_TEST(unterminated_err_is_read_to_errlen)
{
    char want[600];
    int n = snprintf(want, sizeof want, "hostile-errstr: ");
    memset(want + n, 'E', 511);
    snprintf(want + n + 511, sizeof want - (size_t)n - 511, "\n");
    for (int jobs = 1; jobs <= 2; jobs++) {
        int rc = sh("%s run cases/ci.yaml --filter %s --impl %s -j %d", dsv4_test_exe(), two_cases,
                    hostile("errstr"), jobs);
        ck_assert_msg(rc == 3, "-j %d: exit %d:\n%.3000s", jobs, rc, out);
        /* the prefix, exactly 511 E and the end of the line, once per case */
        ck_assert_msg(dsv4_test_count(out, want) == 2, "-j %d:\n%.3000s", jobs, out);
    }
}
END_TEST

/* ---- a run() that never returns ---- */

/* "pid ppid" of every plug-in process that ran, from DSV4_HOSTILE_PIDDIR. */
static int recorded_pids(const char *dir, long pids[][2], int max)
{
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) && n < max;) {
        if (e->d_name[0] == '.')
            continue;
        char path[600];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "r");
        if (f && fscanf(f, "%ld %ld", &pids[n][0], &pids[n][1]) == 2)
            n++;
        if (f)
            fclose(f);
    }
    closedir(d);
    return n;
}

START_TEST(hang_is_killed_at_timeout)
{
    for (int jobs = 1; jobs <= 2; jobs++) {
        char pids_dir[300];
        snprintf(pids_dir, sizeof pids_dir, "%s/pids%d", tmpdir, jobs);
        ck_assert_int_eq(mkdir(pids_dir, 0755), 0);
        double t0 = now_s();
        int rc = sh("DSV4_HOSTILE_PIDDIR=%s %s run cases/ci.yaml --filter %s --impl %s -j %d --timeout 2 --json %s/t.json",
                    pids_dir, dsv4_test_exe(), two_cases, hostile("hang"), jobs, tmpdir);
        double took = now_s() - t0;
        ck_assert_msg(rc == 3, "-j %d: exit %d:\n%.3000s", jobs, rc, out);
        ck_assert_msg(dsv4_test_count(out, "hostile-hang: the implementation's process timed out after 2 s "
                                           "(--timeout) and was killed while running combine_topk_swa_indices") == 2,
                      "-j %d:\n%.3000s", jobs, out);
        /* each case waited 2 s; -j 2 waits for both at once */
        ck_assert_msg(took >= 2.0 * (3 - jobs) - 0.1 && took < 2.0 * (3 - jobs) + 20, "-j %d: %.1f s", jobs, took);
        char path[400];
        snprintf(path, sizeof path, "%s/t.json", tmpdir);
        char *json = dsv4_test_slurp(path);
        ck_assert_int_eq(dsv4_test_count(json, "\"result\": \"ERROR\""), 2);
        free(json);
        /* one plug-in process per case (the second case gets a fresh one), all gone */
        long pids[8][2];
        int n = recorded_pids(pids_dir, pids, 8);
        ck_assert_msg(n == 2, "-j %d: %d plug-in processes ran", jobs, n);
        for (int i = 0; i < n; i++)
            ck_assert_msg(process_gone(pids[i][0]), "-j %d: plug-in process %ld still runs", jobs, pids[i][0]);
    }
}
END_TEST

/* ---- protected inputs ---- */

START_TEST(gemm_that_overwrites_an_input_is_an_error)
{
    const char *msg = "input 'x_scale' was modified by the implementation (inputs are read-only): first "
                      "changed element [0, 0]: ";
    for (int jobs = 1; jobs <= 2; jobs++) {
        int rc = sh("%s run cases/ci.yaml --filter '^gemm_(wq_b_v41_k1280|bpre_m16_k512)$' --impl %s -j %d",
                    dsv4_test_exe(), hostile("gemm"), jobs);
        ck_assert_msg(rc == 3, "-j %d: exit %d:\n%.3000s", jobs, rc, out);
        ck_assert_msg(strstr(out, "ERROR     gemm_wq_b_v41_k1280  [gemm_a8w8_blockscale default]") &&
                          strstr(out, "ERROR     gemm_bpre_m16_k512  [gemm_a8w8_blockscale bpreshuffle]"),
                      "-j %d:\n%.3000s", jobs, out);
        ck_assert_msg(dsv4_test_count(out, msg) == 2 && dsv4_test_count(out, " became 0\n") == 2, "-j %d:\n%.3000s",
                      jobs, out);
        ck_assert_msg(strstr(out, "summary: 0 passed, 2 failed, 0 skipped"), "-j %d:\n%.3000s", jobs, out);
    }
    /* the same against the golden file */
    int rc = sh("%s check data/ci/gemm_wq_b_v41_k1280.h5 --impl %s", dsv4_test_exe(), hostile("gemm"));
    ck_assert_msg(rc == 3 && strstr(out, msg), "exit %d:\n%.3000s", rc, out);
}
END_TEST

/* ---- signals ---- */

/* SIGTERM or SIGINT of dsv4check, at -j 1 and -j 2, while every plug-in
 * process hangs: dsv4check dies of it, and so do its workers and plug-in
 * processes (this test is their subreaper, so it can tell). */
START_TEST(signals_end_workers_and_implementations)
{
    const int sig = _i < 2 ? SIGTERM : SIGINT, jobs = 1 + _i % 2;
    ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
    char pids_dir[300], jarg[8];
    snprintf(pids_dir, sizeof pids_dir, "%s/pids", tmpdir);
    ck_assert_int_eq(mkdir(pids_dir, 0755), 0);
    snprintf(jarg, sizeof jarg, "%d", jobs);
    fflush(NULL);
    pid_t p = fork();
    ck_assert_int_ge(p, 0);
    if (p == 0) {
        setenv("DSV4_HOSTILE_PIDDIR", pids_dir, 1);
        if (!freopen("/dev/null", "w", stdout))
            _exit(126);
        execl(dsv4_test_exe(), dsv4_test_exe(), "run", "cases/ci.yaml", "--filter",
              "^combine_(decode_only_c4|mixed_prefill_c4)$", "--impl", hostile("hang"), "-j", jarg, (char *)NULL);
        _exit(127);
    }
    long pids[8][2];
    int n = 0;
    for (double until = now_s() + 30; now_s() < until && (n = recorded_pids(pids_dir, pids, 8)) < jobs;)
        usleep(20000);
    ck_assert_msg(n == jobs, "%s, -j %d: %d of %d plug-in processes started", strsignal(sig), jobs, n, jobs);
    ck_assert_int_eq(kill(p, sig), 0);
    int status;
    ck_assert_int_eq(waitpid(p, &status, 0), p);
    ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == sig, "%s, -j %d: dsv4check status 0x%x", strsignal(sig),
                  jobs, (unsigned)status);
    int alive = 1;
    for (double until = now_s() + 10; alive && now_s() < until;) {
        while (waitpid(-1, NULL, WNOHANG) > 0) /* the orphans came to us */
            ;
        alive = 0;
        for (int i = 0; i < n; i++)
            alive |= !process_gone(pids[i][0]) || (pids[i][1] != p && !process_gone(pids[i][1]));
        if (alive)
            usleep(20000);
    }
    for (int i = 0; i < n; i++) {
        ck_assert_msg(process_gone(pids[i][0]), "%s, -j %d: plug-in process %ld survived", strsignal(sig), jobs,
                      pids[i][0]);
        ck_assert_msg(jobs == 1 ? pids[i][1] == p : process_gone(pids[i][1]), "%s, -j %d: worker %ld survived",
                      strsignal(sig), jobs, pids[i][1]);
    }
}
END_TEST

/* ---- report files ---- */

static void write_at(const char *name, const char *text)
{
    char path[400];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    dsv4_test_write_file(path, text);
}

/* The names in tmpdir, sorted, joined by spaces. */
static void listing(char *buf, size_t len)
{
    struct dirent **names;
    int n = scandir(tmpdir, &names, NULL, alphasort);
    ck_assert_int_ge(n, 0);
    buf[0] = '\0';
    for (int i = 0; i < n; i++) {
        if (names[i]->d_name[0] != '.')
            snprintf(buf + strlen(buf), len - strlen(buf), "%s%s", buf[0] ? " " : "", names[i]->d_name);
        free(names[i]);
    }
    free(names);
}

/* A report replaces its path by a rename: another name of the old file
 * keeps the old contents, a symbolic link stays a link to the new report,
 * the mode is what fopen would give, and no temporary is left behind, also
 * when the rename fails. */
START_TEST(reports_are_replaced_whole)
{
    char a[400], b[400], lnk[400], target[400];
    write_at("old.json", "old\n");
    snprintf(a, sizeof a, "%s/old.json", tmpdir);
    snprintf(b, sizeof b, "%s/keep.json", tmpdir);
    ck_assert_int_eq(link(a, b), 0);
    write_at("target.xml", "old\n");
    snprintf(lnk, sizeof lnk, "%s/lnk.xml", tmpdir);
    snprintf(target, sizeof target, "%s/target.xml", tmpdir);
    ck_assert_int_eq(symlink("target.xml", lnk), 0);
    int rc = sh("%s run cases/ci.yaml --filter %s --json %s --junit %s --html %s/r.html", dsv4_test_exe(), one_case, a,
                lnk, tmpdir);
    ck_assert_msg(rc == 0, "exit %d:\n%.3000s", rc, out);
    char *kept = dsv4_test_slurp(b), *json = dsv4_test_slurp(a), *xml = dsv4_test_slurp(target);
    ck_assert_str_eq(kept, "old\n");
    ck_assert_ptr_nonnull(strstr(json, "\"result\": \"PASS\""));
    ck_assert_ptr_nonnull(strstr(xml, "<testsuites>"));
    free(kept), free(json), free(xml);
    struct stat sb;
    ck_assert_int_eq(lstat(lnk, &sb), 0);
    ck_assert(S_ISLNK(sb.st_mode));
    mode_t mask = umask(0);
    umask(mask);
    ck_assert_int_eq(stat(a, &sb), 0);
    ck_assert_int_eq(sb.st_mode & 0777, 0666 & ~mask);
    char names[1024];
    listing(names, sizeof names);
    ck_assert_str_eq(names, "keep.json lnk.xml old.json r.html target.xml");
    /* over a directory: the rename fails, the temporary goes */
    char dir[400];
    snprintf(dir, sizeof dir, "%s/adir", tmpdir);
    ck_assert_int_eq(mkdir(dir, 0755), 0);
    write_at("adir/x", "x");
    const char *opts[] = {"--json", "--junit", "--html"};
    for (int k = 0; k < 3; k++) {
        rc = sh("%s run cases/ci.yaml --filter %s %s %s", dsv4_test_exe(), one_case, opts[k], dir);
        ck_assert_msg(rc == 2, "%s: exit %d:\n%.3000s", opts[k], rc, out);
        char want[500];
        snprintf(want, sizeof want, "%s: cannot write report: Is a directory", dir);
        ck_assert_msg(strstr(out, want) != NULL, "%s:\n%.3000s", opts[k], out);
        listing(names, sizeof names);
        ck_assert_str_eq(names, "adir keep.json lnk.xml old.json r.html target.xml");
    }
}
END_TEST

static int same_bytes(const char *p, const char *q)
{
    size_t n, m;
    char *a = dsv4_test_slurp_len(p, &n), *b = dsv4_test_slurp_len(q, &m);
    int same = n == m && memcmp(a, b, n) == 0;
    free(a), free(b);
    return same;
}

/* No report, and no repro file, over a suite or golden the run reads:
 * exit 2 naming both files, and the input is untouched. */
START_TEST(reports_never_replace_inputs)
{
    const char *src = "data/ci/combine_decode_only_c4.h5";
    char g[400], suite[400], sym[400], hard[400];
    snprintf(g, sizeof g, "%s/combine_decode_only_c4.h5", tmpdir);
    ck_assert_int_eq(sh("cp %s %s", src, g), 0);
    write_at("s.yaml", "suite: t\ncases:\n  - name: combine_decode_only_c4\n    op: combine_topk_swa_indices\n"
                       "    seed: 1\n    golden: combine_decode_only_c4.h5\n"
                       "    params: {compress_ratio: 4, topk: 512, window_size: 128,\n"
                       "             query_lens: [1, 1, 1, 1], prefix_lens: [0, 3, 100, 5000]}\n");
    snprintf(suite, sizeof suite, "%s/s.yaml", tmpdir);
    snprintf(sym, sizeof sym, "%s/sym.html", tmpdir);
    snprintf(hard, sizeof hard, "%s/hard.json", tmpdir);
    ck_assert_int_eq(symlink("combine_decode_only_c4.h5", sym), 0);
    ck_assert_int_eq(link(g, hard), 0);
    char *yaml = dsv4_test_slurp(suite);
    ck_assert_int_eq(sh("%s run %s", dsv4_test_exe(), suite), 0); /* the golden belongs to the case */
    const struct {
        const char *args, *want;
    } rows[] = {
        {"run @/s.yaml --json @/s.yaml", "--json @/s.yaml is the same file as the input @/s.yaml"},
        {"run @/s.yaml --junit @/sym.html", "--junit @/sym.html is the same file as the input @/combine_decode_only_c4.h5"},
        {"run @/s.yaml --html @/hard.json", "--html @/hard.json is the same file as the input @/combine_decode_only_c4.h5"},
        {"check @/combine_decode_only_c4.h5 --json @/combine_decode_only_c4.h5",
         "--json @/combine_decode_only_c4.h5 is the same file as the input @/combine_decode_only_c4.h5"},
        {"check @/hard.json --html @/sym.html", "--html @/sym.html is the same file as the input @/hard.json"},
        /* the repro file of the failing case would be its own golden: the
         * folder is refused before any case runs */
        {"run @/s.yaml --impl SEGV --repro-dir @",
         "--repro-dir @ holds @/combine_decode_only_c4.h5, a golden of this run"},
        {"check @/combine_decode_only_c4.h5 --impl WRONG --repro-dir @",
         "--repro-dir @ holds @/combine_decode_only_c4.h5"},
    };
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        char args[1200] = "", want[1200] = "";
        for (int pass = 0; pass < 2; pass++) {
            const char *in = pass ? rows[r].want : rows[r].args;
            char *o = pass ? want : args;
            for (const char *p = in; *p; p++) {
                size_t n = strlen(o);
                if (*p == '@')
                    snprintf(o + n, 1200 - n, "%s", tmpdir);
                else if (strncmp(p, "SEGV", 4) == 0)
                    snprintf(o + n, 1200 - n, "%s", hostile("segv")), p += 3;
                else if (strncmp(p, "WRONG", 5) == 0)
                    snprintf(o + n, 1200 - n, "%s", built("libexample_wrong.so")), p += 4;
                else
                    o[n] = *p, o[n + 1] = '\0';
            }
        }
        int rc = sh("%s %s", dsv4_test_exe(), args);
        ck_assert_msg(rc == 2, "%s: exit %d:\n%.3000s", args, rc, out);
        ck_assert_msg(strstr(out, want) != NULL, "%s: no '%s' in:\n%.3000s", args, want, out);
        ck_assert_msg(same_bytes(g, src), "%s: the golden changed", args);
        char *now = dsv4_test_slurp(suite);
        ck_assert_msg(strcmp(now, yaml) == 0, "%s: the suite changed", args);
        free(now);
        struct stat sb;
        ck_assert(lstat(sym, &sb) == 0 && S_ISLNK(sb.st_mode));
    }
    free(yaml);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("integrity");
    TCase *tc = dsv4_test_tcase(s, "e2e", 240, setup, teardown, NULL, 0);
    tcase_add_loop_test(tc, crashes_are_errors_with_every_report, 0, N_CRASHES * N_SETTINGS);
    dsv4_test_add(tc, DSV4_TESTS(unterminated_err_is_read_to_errlen, hang_is_killed_at_timeout,
                                 gemm_that_overwrites_an_input_is_an_error));
    tcase_add_loop_test(tc, signals_end_workers_and_implementations, 0, 4);
    dsv4_test_add(tc, DSV4_TESTS(reports_are_replaced_whole, reports_never_replace_inputs));
    return dsv4_test_run(s);
}
