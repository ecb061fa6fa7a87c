/* main.c - the dsv4check command line (design.md section 6).
 *
 *   dsv4check list  [SUITE.yaml...]          ops, variants, params; or cases
 *   dsv4check run   SUITE.yaml... [opts]     implementation vs golden / reference
 *   dsv4check gen   SUITE.yaml... [opts]     write goldens (atomic; --force to replace)
 *   dsv4check check FILE.h5... [opts]        implementation vs golden files
 *   dsv4check show  FILE.h5...               print a golden's contents
 *   dsv4check bench [opts]                   reference (and --impl) speed
 *
 * Exit codes: 0 all passed, 1 a tolerance violation, 2 bad usage or input,
 * 3 runtime or device error, 77 skipped (e.g. no GPU for --impl hip). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "cases.h"
#include "drift.h"
#include "golden.h"
#include "html.h"
#include "parallel.h"
#include "runner.h"

#ifndef DSV4_VERSION
#define DSV4_VERSION "0"
#endif
#ifndef DSV4_GIT_REV
#define DSV4_GIT_REV "unknown"
#endif

typedef struct cli {
    const char *impl;
    const char *filter;
    const char *junit;
    const char *json;
    const char *outdir;
    int have_seed;
    uint64_t seed;
    int verbose;
    int force;
    int device;
    int rerun;
    int markdown;
    regex_t re;
    int have_re;
    /* issue 8: CI features */
    const char *html;
    const char *repro_dir;
    const char *baseline;
    int strict;
    double drift_factor;
    int jobs;
    int shard_k, shard_n; /* 0 = no --shard */
    char device_arg[32];
} cli;

static const char *prog = "dsv4check";
static char command_line[4096]; /* this run's argv, shell-quoted, for the HTML report */

static void usage_main(FILE *f)
{
    fprintf(f,
            "usage: %s COMMAND [options] [args]\n"
            "\n"
            "A correctness reference and golden-test harness for the DeepSeek V4 sparse-MLA\n"
            "kernels (vLLM on ROCm through aiter).\n"
            "\n"
            "commands:\n"
            "  list  [SUITE.yaml...]     the ops with their variants, parameters, inputs and\n"
            "                            outputs; with suites, their cases\n"
            "  run   SUITE.yaml...       run every case: the implementation (--impl) against\n"
            "                            the case's golden, or the live reference if it has none\n"
            "  gen   SUITE.yaml...       write the goldens of the cases (reference outputs)\n"
            "  check FILE.h5...          the implementation against golden files\n"
            "  show  FILE.h5...          print a golden file's attributes and tensors\n"
            "  bench                     time the reference (and --impl) on production shapes\n"
            "\n"
            "`%s COMMAND --help` lists each command's options.\n"
            "exit codes: 0 passed, 1 tolerance violation, 2 bad usage or input,\n"
            "            3 runtime or device error, 77 skipped (e.g. no GPU)\n"
            "version %s (%s)\n",
            prog, prog, DSV4_VERSION, DSV4_GIT_REV);
}

static const char common_help[] =
    "  --impl IMPL       ref (default), hip (build/libdsv4_hip.so), or a plug-in .so\n"
    "  --filter REGEX    only cases whose name or op/name matches (POSIX extended)\n"
    "  --junit FILE      write a JUnit XML report (one testcase per case and output)\n"
    "  --json FILE       write a JSON report with every metric\n"
    "  --device N        GPU to use for --impl hip or a GPU plug-in\n"
    "  --rerun N         run the implementation N times; any bitwise difference fails\n"
    "  --mem-limit BYTES refuse cases needing more (suffix K, M, G; default: half the RAM)\n"
    "  -j, --jobs N      run N cases at once in worker processes (same results, suite order)\n"
    "  --shard K/N       only the cases whose name hashes to shard K of N (FNV-1a mod N)\n"
    "  --html FILE       write a self-contained HTML report (heatmaps of failing outputs)\n"
    "  --repro-dir DIR   write DIR/<case>.h5 for each failing case, replayable with `check`\n"
    "  --baseline JSON   warn when a passing case's error grew since that --json report\n"
    "  --drift-factor F  growth that counts as drift (default 2)\n"
    "  --strict          drift fails the run (exit 1)\n"
    "  -v, --verbose     print every output's metrics, not only failures\n"
    "  -h, --help        this help\n";

static void usage_cmd(FILE *f, const char *cmd)
{
    if (strcmp(cmd, "run") == 0)
        fprintf(f,
                "usage: %s run SUITE.yaml... [options]\n"
                "Runs each case: inputs from its golden (checked against the generator), the\n"
                "implementation under test, and a comparison of every output under its policy.\n"
                "A case without a golden is compared with the live CPU reference.\n"
                "  --seed N          override every case's seed (goldens are then not used)\n%s",
                prog, common_help);
    else if (strcmp(cmd, "gen") == 0)
        fprintf(f,
                "usage: %s gen SUITE.yaml... [options]\n"
                "Writes each case's golden (inputs and reference outputs) to its golden path,\n"
                "or under -o DIR.  Writes are atomic; an existing file is kept unless --force.\n"
                "  -o, --output DIR  write DIR/<case>.h5 instead of the cases' golden paths\n"
                "  --force           replace existing golden files\n"
                "  --filter REGEX    only matching cases\n"
                "  --seed N          override every case's seed\n"
                "  -h, --help        this help\n",
                prog);
    else if (strcmp(cmd, "check") == 0)
        fprintf(f,
                "usage: %s check FILE.h5... [options]\n"
                "Checks the implementation against golden files (written by `gen`, or by hand\n"
                "following data/README.md).\n%s",
                prog, common_help);
    else if (strcmp(cmd, "show") == 0)
        fprintf(f, "usage: %s show FILE.h5...\nPrints attributes, parameters and tensors (with the first values).\n",
                prog);
    else if (strcmp(cmd, "list") == 0)
        fprintf(f,
                "usage: %s list [SUITE.yaml...] [--impl IMPL [--device N]] [--filter RE] [--shard K/N]\n"
                "Without suites: every op, its variants (the first is the default) with sources,\n"
                "its parameters, inputs and outputs.  With suites: their cases.  With --impl:\n"
                "which ops and variants that implementation provides.  --markdown: the\n"
                "README's table of ops, variants and sources.\n",
                prog);
    else if (strcmp(cmd, "bench") == 0)
        fprintf(f,
                "usage: %s bench [--impl IMPL] [--filter REGEX] [-v]\n"
                "Times the CPU reference on production-size cases (best of several runs) and\n"
                "reports time, GB/s and GFLOP/s, with the machine's measured copy bandwidth and\n"
                "sgemm/dgemm rates for scale: %% peak is against the line's probe, measured just\n"
                "before it.  The reference runs on DSV4_THREADS threads (default: every core);\n"
                "each line also gives its 1-thread time and the speed-up, and fails if the\n"
                "outputs differ between the two (-v prints their digest).  With --impl hip it\n"
                "also times the kernels.\n",
                prog);
}

static int parse_size(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || v <= 0)
        return -1;
    switch (*end) {
    case 'K': case 'k': v *= 1024.0; end++; break;
    case 'M': case 'm': v *= 1024.0 * 1024; end++; break;
    case 'G': case 'g': v *= 1024.0 * 1024 * 1024; end++; break;
    default: break;
    }
    if (*end != '\0' || v > 1.8e19)
        return -1;
    *out = (uint64_t)v;
    return 0;
}

static void default_memory_limit(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0)
        dsv4_set_memory_limit((uint64_t)pages * (uint64_t)page / 2);
}

/* Parses the options shared by the commands; returns 0, or an exit code. */
static int parse_options(int argc, char **argv, const char *cmd, cli *o)
{
    static const struct option longopts[] = {
        {"impl", required_argument, NULL, 'i'}, {"filter", required_argument, NULL, 'f'},
        {"junit", required_argument, NULL, 'J'}, {"json", required_argument, NULL, 'Y'},
        {"jobs", required_argument, NULL, 'j'}, {"shard", required_argument, NULL, 'S'},
        {"html", required_argument, NULL, 'H'}, {"repro-dir", required_argument, NULL, 'P'},
        {"baseline", required_argument, NULL, 'B'}, {"strict", no_argument, NULL, 'T'},
        {"drift-factor", required_argument, NULL, 'D'},
        {"seed", required_argument, NULL, 's'}, {"device", required_argument, NULL, 'd'},
        {"mem-limit", required_argument, NULL, 'm'}, {"output", required_argument, NULL, 'o'},
        {"force", no_argument, NULL, 'F'}, {"rerun", required_argument, NULL, 'R'},
        {"markdown", no_argument, NULL, 'M'}, {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0},
    };
    memset(o, 0, sizeof *o);
    o->impl = "ref";
    o->device = -1;
    o->jobs = 1;
    o->drift_factor = 2.0;
    optind = 1;
    int ch;
    while ((ch = getopt_long(argc, argv, "vho:j:", longopts, NULL)) != -1) {
        char *end;
        switch (ch) {
        case 'i': o->impl = optarg; break;
        case 'f': o->filter = optarg; break;
        case 'J': o->junit = optarg; break;
        case 'Y': o->json = optarg; break;
        case 'H': o->html = optarg; break;
        case 'P': o->repro_dir = optarg; break;
        case 'B': o->baseline = optarg; break;
        case 'T': o->strict = 1; break;
        case 'j':
            errno = 0;
            o->jobs = (int)strtol(optarg, &end, 10);
            if (errno || *end || o->jobs < 1 || o->jobs > 256) {
                fprintf(stderr, "%s %s: -j %s: a count from 1 to 256\n", prog, cmd, optarg);
                return DSV4_EINPUT;
            }
            break;
        case 'S':
            if (dsv4_shard_parse(optarg, &o->shard_k, &o->shard_n)) {
                fprintf(stderr, "%s %s: --shard %s: expected K/N with 1 <= K <= N <= 1024\n", prog, cmd, optarg);
                return DSV4_EINPUT;
            }
            break;
        case 'D':
            errno = 0;
            o->drift_factor = strtod(optarg, &end);
            if (errno || *end || !(o->drift_factor >= 1) || o->drift_factor > 1e12) {
                fprintf(stderr, "%s %s: --drift-factor %s: a number >= 1\n", prog, cmd, optarg);
                return DSV4_EINPUT;
            }
            break;
        case 'o': o->outdir = optarg; break;
        case 'F': o->force = 1; break;
        case 'M': o->markdown = 1; break;
        case 'R':
            errno = 0;
            o->rerun = (int)strtol(optarg, &end, 10);
            if (errno || *end || o->rerun < 1 || o->rerun > 1000) {
                fprintf(stderr, "%s %s: --rerun %s: a count from 1 to 1000\n", prog, cmd, optarg);
                return DSV4_EINPUT;
            }
            break;
        case 'v': o->verbose = 1; break;
        case 's':
            errno = 0;
            o->seed = strtoull(optarg, &end, 0);
            if (errno || *end || optarg[0] == '-') {
                fprintf(stderr, "%s %s: --seed %s: not a non-negative integer\n", prog, cmd, optarg);
                return DSV4_EINPUT;
            }
            o->have_seed = 1;
            break;
        case 'd':
            errno = 0;
            o->device = (int)strtol(optarg, &end, 10);
            if (errno || *end || o->device < 0) {
                fprintf(stderr, "%s %s: --device %s: not a GPU index\n", prog, cmd, optarg);
                return DSV4_EINPUT;
            }
            snprintf(o->device_arg, sizeof o->device_arg, " --device %d", o->device);
            break;
        case 'm': {
            uint64_t v;
            if (parse_size(optarg, &v)) {
                fprintf(stderr, "%s %s: --mem-limit %s: not a size (e.g. 512M, 8G)\n", prog, cmd, optarg);
                return DSV4_EINPUT;
            }
            dsv4_set_memory_limit(v);
            break;
        }
        case 'h': usage_cmd(stdout, cmd); return -1;
        default: usage_cmd(stderr, cmd); return DSV4_EINPUT;
        }
    }
    if (o->filter) {
        int rc = regcomp(&o->re, o->filter, REG_EXTENDED | REG_NOSUB);
        if (rc) {
            char msg[256];
            regerror(rc, &o->re, msg, sizeof msg);
            fprintf(stderr, "%s %s: --filter '%s': %s\n", prog, cmd, o->filter, msg);
            return DSV4_EINPUT;
        }
        o->have_re = 1;
    }
    return 0;
}

static int case_selected(const cli *o, const dsv4_case *c)
{
    if (o->shard_n && dsv4_shard_of(c->name, o->shard_n) != o->shard_k)
        return 0;
    if (!o->have_re)
        return 1;
    char full[300];
    snprintf(full, sizeof full, "%s/%s", c->op->name, c->name);
    return regexec(&o->re, c->name, 0, NULL, 0) == 0 || regexec(&o->re, full, 0, NULL, 0) == 0;
}

/* Progress on stderr for long runs, only where someone watches. */
typedef struct progress {
    int enabled, shown;
    double start;
} progress;

static double wall_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void progress_update(progress *p, int done, int total, const char *name)
{
    if (!p->enabled || wall_seconds() - p->start < 2.0)
        return;
    fprintf(stderr, "\r[%d/%d] %-60.60s", done, total, name);
    p->shown = 1;
}

static void progress_end(progress *p)
{
    if (p->shown)
        fprintf(stderr, "\r%80s\r", "");
}

/* ---- run and check: the jobs, serial or -j, then the reports ---- */

typedef struct job_set {
    const dsv4_case **cases; /* run: the selected cases, in suite order */
    char **paths;            /* check: the golden files */
    int n;
    dsv4_run_opts ro;
    int verbose;
    progress pg;
} job_set;

static void job_run(void *ctx, int i, const dsv4_backend *b, dsv4_case_result *r)
{
    const job_set *js = ctx;
    if (js->cases)
        dsv4_run_case(js->cases[i], b, &js->ro, r);
    else
        dsv4_check_golden(js->paths[i], b, &js->ro, r);
}

static void job_done(void *ctx, int i, const dsv4_case_result *r)
{
    job_set *js = ctx;
    progress_end(&js->pg);
    dsv4_print_result(stdout, r, js->verbose);
    fflush(stdout);
    if (i + 1 < js->n)
        progress_update(&js->pg, i + 1, js->n, js->cases ? js->cases[i + 1]->name : js->paths[i + 1]);
}

static const char *job_name(void *ctx, int i)
{
    const job_set *js = ctx;
    return js->cases ? js->cases[i]->name : js->paths[i];
}

/* --baseline: drift lines after the results; with --strict drift fails. */
static int check_drift(const cli *o, dsv4_case_result *rs, int n, int *drifting)
{
    dsv4_baseline *bl = NULL;
    dsv4_status st = {0};
    *drifting = 0;
    if (!o->baseline)
        return DSV4_OK;
    if (dsv4_baseline_load(o->baseline, &bl, &st)) {
        fprintf(stderr, "%s: %s\n", prog, st.msg);
        return st.code;
    }
    *drifting = dsv4_drift_check(bl, rs, n, o->drift_factor, stdout);
    printf("drift: %d case(s) drifted by more than x%g against %s (%d outputs in the baseline)%s\n", *drifting,
           o->drift_factor, o->baseline, dsv4_baseline_size(bl),
           *drifting && !o->strict ? "; a warning (--strict fails)" : "");
    dsv4_baseline_free(bl);
    return DSV4_OK;
}

static int finish_reports(const cli *o, const char *suite, dsv4_case_result *rs, int n)
{
    int drifting;
    int drc = check_drift(o, rs, n, &drifting);
    int code = dsv4_print_summary(stdout, rs, n);
    if (drc)
        code = drc;
    else if (code == DSV4_OK && drifting && o->strict)
        code = DSV4_EFAIL;
    dsv4_status st = {0};
    if (o->junit && dsv4_write_junit(o->junit, suite, o->impl, rs, n, &st))
        fprintf(stderr, "%s: %s\n", prog, st.msg), code = DSV4_EINPUT;
    dsv4_status_clear(&st);
    if (o->json && dsv4_write_json(o->json, suite, o->impl, rs, n, &st))
        fprintf(stderr, "%s: %s\n", prog, st.msg), code = DSV4_EINPUT;
    dsv4_status_clear(&st);
    if (o->html && dsv4_write_html(o->html, suite, o->impl, command_line, rs, n, &st))
        fprintf(stderr, "%s: %s\n", prog, st.msg), code = DSV4_EINPUT;
    return code;
}

static int execute_jobs(cli *o, job_set *js, const char *suite)
{
    js->ro = (dsv4_run_opts){.impl = o->impl, .verbose = o->verbose, .seed_override = o->have_seed,
                             .seed = o->seed, .argv0 = prog, .rerun = o->rerun, .repro_dir = o->repro_dir,
                             .maps = o->html != NULL, .device_arg = o->device_arg};
    js->verbose = o->verbose;
    js->pg = (progress){isatty(2), 0, wall_seconds()};
    dsv4_case_result *rs = calloc(js->n ? (size_t)js->n : 1, sizeof *rs);
    if (!rs) {
        fprintf(stderr, "%s: out of memory for %d results\n", prog, js->n);
        return DSV4_ERUNTIME;
    }
    dsv4_status st = {0};
    int rc = dsv4_run_jobs(js->n, o->jobs, o->impl, o->device, job_run, job_done, job_name, js, rs, &st);
    progress_end(&js->pg);
    if (rc == DSV4_ESKIP)
        printf("skipped: %s\n", st.msg);
    else if (rc)
        fprintf(stderr, "%s: %s\n", prog, st.msg);
    else
        rc = finish_reports(o, suite, rs, js->n);
    for (int i = 0; i < js->n; i++)
        dsv4_result_free_maps(&rs[i]);
    free(rs);
    return rc;
}

static int open_backend(const cli *o, dsv4_backend *b)
{
    dsv4_status st = {0};
    int rc = dsv4_backend_open(o->impl, o->device, b, &st);
    if (rc == DSV4_ESKIP)
        printf("skipped: %s\n", st.msg);
    else if (rc)
        fprintf(stderr, "%s: %s\n", prog, st.msg);
    return rc;
}

static void cli_free(cli *o)
{
    if (o->have_re)
        regfree(&o->re);
    o->have_re = 0;
}

static int cmd_run(int argc, char **argv)
{
    cli o;
    int rc = parse_options(argc, argv, "run", &o);
    if (rc)
        return rc < 0 ? 0 : rc;
    if (optind >= argc) {
        usage_cmd(stderr, "run");
        return DSV4_EINPUT;
    }
    /* Every suite is loaded (and the selection made) before any case runs:
     * the workers of -j share the loaded cases, and a load error costs no
     * run. */
    int nsuites = argc - optind, loaded = 0, total = 0;
    dsv4_suite *suites = calloc((size_t)nsuites, sizeof *suites);
    char suite_names[256] = "";
    rc = suites ? DSV4_OK : DSV4_ERUNTIME;
    for (; !rc && loaded < nsuites; loaded++) {
        dsv4_status st = {0};
        if (dsv4_suite_load(argv[optind + loaded], &suites[loaded], &st)) {
            fprintf(stderr, "%s: %s\n", prog, st.msg);
            rc = st.code;
            break;
        }
        snprintf(suite_names + strlen(suite_names), sizeof suite_names - strlen(suite_names), "%s%s",
                 suite_names[0] ? "+" : "", suites[loaded].name);
        total += suites[loaded].n;
    }
    job_set js = {0};
    js.cases = rc ? NULL : calloc(total ? (size_t)total : 1, sizeof *js.cases);
    if (!rc && !js.cases)
        rc = DSV4_ERUNTIME;
    for (int k = 0; !rc && k < loaded; k++)
        for (int i = 0; i < suites[k].n; i++)
            if (case_selected(&o, &suites[k].cases[i]))
                js.cases[js.n++] = &suites[k].cases[i];
    if (!rc && js.n == 0) {
        fprintf(stderr, "%s run: no case selected%s%s%s\n", prog, o.filter ? " by --filter " : "",
                o.filter ? o.filter : "", o.shard_n ? " in this --shard" : "");
        rc = DSV4_EINPUT;
    }
    if (o.shard_n) {
        char tail[40];
        snprintf(tail, sizeof tail, " shard %d/%d", o.shard_k, o.shard_n);
        snprintf(suite_names + strlen(suite_names), sizeof suite_names - strlen(suite_names), "%s", tail);
    }
    if (!rc)
        rc = execute_jobs(&o, &js, suite_names);
    free(js.cases);
    for (int k = 0; k < loaded; k++)
        dsv4_suite_free(&suites[k]);
    free(suites);
    cli_free(&o);
    return rc;
}

static int cmd_check(int argc, char **argv)
{
    cli o;
    int rc = parse_options(argc, argv, "check", &o);
    if (rc)
        return rc < 0 ? 0 : rc;
    if (optind >= argc) {
        usage_cmd(stderr, "check");
        return DSV4_EINPUT;
    }
    job_set js = {0};
    js.paths = calloc((size_t)(argc - optind), sizeof *js.paths);
    if (!js.paths) {
        cli_free(&o);
        return DSV4_ERUNTIME;
    }
    /* --shard for check hashes each path as given on the command line. */
    for (int a = optind; a < argc; a++)
        if (!o.shard_n || dsv4_shard_of(argv[a], o.shard_n) == o.shard_k)
            js.paths[js.n++] = argv[a];
    char suite[64];
    if (o.shard_n)
        snprintf(suite, sizeof suite, "check shard %d/%d", o.shard_k, o.shard_n);
    else
        snprintf(suite, sizeof suite, "check");
    rc = execute_jobs(&o, &js, suite);
    free(js.paths);
    cli_free(&o);
    return rc;
}

/* ---- gen ---- */

static void sanitize(const char *name, char *out, size_t len)
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

static int gen_case(const dsv4_case *c, const cli *o)
{
    char path[DSV4_PATH_MAX + 200];
    if (o->outdir) {
        char base[200];
        sanitize(c->name, base, sizeof base);
        snprintf(path, sizeof path, "%s/%s.h5", o->outdir, base);
    } else if (c->golden[0]) {
        snprintf(path, sizeof path, "%s", c->golden);
    } else {
        fprintf(stderr, "%s: %s:%d: case %s has no golden path (add golden: or golden_dir:, or use -o DIR)\n",
                prog, c->file, c->line, c->name);
        return DSV4_EINPUT;
    }
    dsv4_golden g;
    memset(&g, 0, sizeof g);
    g.schema = DSV4_SCHEMA_VERSION;
    snprintf(g.op, sizeof g.op, "%s", c->op->name);
    snprintf(g.variant, sizeof g.variant, "%s", dsv4_op_variant_name(c->op, c->variant));
    snprintf(g.case_name, sizeof g.case_name, "%s", c->name);
    g.seed = o->have_seed ? o->seed : c->seed;
    snprintf(g.generator, sizeof g.generator, "dsv4check %s (%s)", DSV4_VERSION, DSV4_GIT_REV);
    time_t now = time(NULL);
    struct tm tmv;
    gmtime_r(&now, &tmv);
    strftime(g.created, sizeof g.created, "%Y-%m-%dT%H:%M:%SZ", &tmv);
    g.params = c->params;
    dsv4_opctx ctx = dsv4_opctx_make(c->op, &c->params, c->variant, g.seed);
    dsv4_status st = {0};
    int rc = c->op->generate(&ctx, &g.inputs, &st);
    if (!rc)
        rc = c->op->validate(&ctx, &g.inputs, &st);
    if (!rc)
        rc = dsv4_reference_outputs(c->op, &ctx, &g.inputs, &g.outputs, &st);
    if (!rc)
        rc = dsv4_golden_write(path, &g, o->force, &st);
    if (rc)
        fprintf(stderr, "%s: %s:%d: case %s: %s\n", prog, c->file, c->line, c->name, st.msg);
    else
        printf("wrote %s\n", path);
    dsv4_golden_free(&g);
    return rc;
}

static int cmd_gen(int argc, char **argv)
{
    cli o;
    int rc = parse_options(argc, argv, "gen", &o);
    if (rc)
        return rc < 0 ? 0 : rc;
    if (optind >= argc) {
        usage_cmd(stderr, "gen");
        return DSV4_EINPUT;
    }
    int worst = 0, wrote = 0;
    if (o.outdir && mkdir(o.outdir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "%s gen: -o %s: cannot create: %s\n", prog, o.outdir, strerror(errno));
        if (o.have_re)
            regfree(&o.re);
        return DSV4_EINPUT;
    }
    for (int a = optind; a < argc; a++) {
        dsv4_suite s;
        dsv4_status st = {0};
        if (dsv4_suite_load(argv[a], &s, &st)) {
            fprintf(stderr, "%s: %s\n", prog, st.msg);
            worst = st.code;
            break;
        }
        for (int i = 0; i < s.n; i++) {
            if (!case_selected(&o, &s.cases[i]))
                continue;
            int r = gen_case(&s.cases[i], &o);
            if (r && (worst == 0 || r == DSV4_EINPUT))
                worst = r;
            wrote += r == 0;
        }
        dsv4_suite_free(&s);
    }
    if (o.have_re)
        regfree(&o.re);
    printf("gen: %d golden file(s) written\n", wrote);
    return worst;
}

/* ---- show ---- */

static void show_tensor(const dsv4_tensor *t)
{
    char shape[96];
    printf("    %-24s %-18s %s", t->name, dsv4_dtype_name(t->dtype), dsv4_shape_str(t, shape, sizeof shape));
    if (t->output_dtype != DSV4_DT_NONE)
        printf("  (ideal; kernel dtype %s)", dsv4_dtype_name(t->output_dtype));
    int64_t n = dsv4_tensor_numel(t);
    printf("\n      ");
    for (int64_t i = 0; i < n && i < 8; i++)
        printf("%s%.9g", i ? ", " : "", dsv4_tensor_get(t, i));
    printf("%s\n", n > 8 ? ", ..." : "");
}

static int cmd_show(int argc, char **argv)
{
    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        usage_cmd(stdout, "show");
        return 0;
    }
    if (argc < 2) {
        usage_cmd(stderr, "show");
        return DSV4_EINPUT;
    }
    int worst = 0;
    for (int a = 1; a < argc; a++) {
        dsv4_golden g;
        dsv4_status st = {0};
        memset(&g, 0, sizeof g);
        if (dsv4_golden_read(argv[a], &g, &st)) {
            fprintf(stderr, "%s: %s\n", prog, st.msg);
            worst = st.code;
            continue;
        }
        printf("%s\n  schema %d, op %s, variant %s, case %s, seed %" PRIu64 "\n  generator %s, created %s\n",
               argv[a], g.schema, g.op, g.variant, g.case_name, g.seed, g.generator, g.created);
        printf("  params:\n");
        for (int k = 0; k < g.params.n; k++) {
            char v[4096];
            printf("    %s = %s\n", g.params.p[k].name, dsv4_param_value_str(&g.params.p[k], v, sizeof v));
        }
        printf("  inputs:\n");
        for (int k = 0; k < g.inputs.n; k++)
            show_tensor(&g.inputs.t[k]);
        printf("  outputs:\n");
        for (int k = 0; k < g.outputs.n; k++)
            show_tensor(&g.outputs.t[k]);
        dsv4_golden_free(&g);
    }
    return worst;
}

/* ---- list ---- */

static void list_ops(const dsv4_backend *b)
{
    for (int i = 0; i < dsv4_op_count(); i++) {
        const dsv4_op *op = dsv4_op_at(i);
        printf("%s\n  %s\n  source: %s\n  variants:\n", op->name, op->summary, op->source);
        for (int v = 0; v < dsv4_op_variant_count(op); v++)
            printf("    %-24s%s %s\n", dsv4_op_variant_name(op, v),
                   b && !dsv4_backend_supports(b, op, v) ? " (not in this impl)" : "",
                   dsv4_op_variant_doc(op, v));
        printf("  params:\n");
        for (const dsv4_param_spec *p = op->params; p->name; p++)
            printf("    %-16s %-9s %-8s %s\n", p->name, dsv4_ptype_name(p->type), p->def ? p->def : "required",
                   p->doc);
        printf("  inputs:\n");
        for (const dsv4_io_spec *io = op->inputs; io->name; io++)
            printf("    %-20s %-16s %s\n", io->name, dsv4_dtype_name(io->dtype), io->doc);
        printf("  outputs:\n");
        for (const dsv4_io_spec *io = op->outputs; io->name; io++)
            printf("    %-20s %-16s %s%s%s\n", io->name, dsv4_dtype_name(io->dtype), io->doc,
                   io->golden_dtype != DSV4_DT_NONE ? "; golden stores the ideal as " : "",
                   io->golden_dtype != DSV4_DT_NONE ? dsv4_dtype_name(io->golden_dtype) : "");
    }
}

/* list --impl LIB.so: which ops and variants the implementation provides. */
static void list_impl(const dsv4_backend *b)
{
    int yes = 0, all = 0;
    if (b->plugin)
        printf("plug-in ABI %d, device %d%s\n", b->plugin->abi_version, b->device,
               b->device < 0 ? " (default)" : "");
    printf("%-10s %-34s %s\n", "provides", "op", "variant");
    for (int i = 0; i < dsv4_op_count(); i++) {
        const dsv4_op *op = dsv4_op_at(i);
        for (int v = 0; v < dsv4_op_variant_count(op); v++, all++) {
            int s = dsv4_backend_supports(b, op, v);
            yes += s;
            printf("%-10s %-34s %s\n", s ? "yes" : "no", op->name, dsv4_op_variant_name(op, v));
        }
    }
    printf("%d of %d op variants provided\n", yes, all);
}

/* The README's op table: op | variants (first = default) | source. */
static void list_markdown(void)
{
    printf("| op | variants (first = default) | source |\n|---|---|---|\n");
    for (int i = 0; i < dsv4_op_count(); i++) {
        const dsv4_op *op = dsv4_op_at(i);
        printf("| `%s` | ", op->name);
        for (int v = 0; v < dsv4_op_variant_count(op); v++)
            printf("%s`%s`", v ? ", " : "", dsv4_op_variant_name(op, v));
        printf(" | %s |\n", op->source);
    }
}

static int cmd_list(int argc, char **argv)
{
    cli o;
    int rc = parse_options(argc, argv, "list", &o);
    if (rc)
        return rc < 0 ? 0 : rc;
    dsv4_backend b;
    int have_b = 0;
    if (strcmp(o.impl, "ref") != 0) {
        if ((rc = open_backend(&o, &b)))
            return rc;
        have_b = 1;
        printf("implementation: %s\n", b.name);
    }
    if (optind >= argc && o.markdown)
        list_markdown();
    else if (optind >= argc && have_b)
        list_impl(&b);
    else if (optind >= argc)
        list_ops(NULL);
    for (int a = optind; a < argc && !rc; a++) {
        dsv4_suite s;
        dsv4_status st = {0};
        if (dsv4_suite_load(argv[a], &s, &st)) {
            fprintf(stderr, "%s: %s\n", prog, st.msg);
            rc = st.code;
            break;
        }
        printf("%s (suite %s): %d cases\n", argv[a], s.name, s.n);
        for (int i = 0; i < s.n; i++)
            if (case_selected(&o, &s.cases[i]))
                printf("  %-56s %-30s %s\n", s.cases[i].name, s.cases[i].op->name,
                       dsv4_op_variant_name(s.cases[i].op, s.cases[i].variant));
        dsv4_suite_free(&s);
    }
    if (have_b)
        dsv4_backend_close(&b);
    if (o.have_re)
        regfree(&o.re);
    return rc;
}

/* ---- bench ---- */

static int cmd_bench(int argc, char **argv)
{
    cli o;
    int rc = parse_options(argc, argv, "bench", &o);
    if (rc)
        return rc < 0 ? 0 : rc;
    dsv4_backend b;
    int have_b = 0;
    if (strcmp(o.impl, "ref") != 0) {
        if ((rc = open_backend(&o, &b)))
            return rc;
        have_b = 1;
    }
    rc = dsv4_bench_run(have_b ? &b : NULL, o.have_re ? &o.re : NULL, o.verbose, stdout);
    if (have_b)
        dsv4_backend_close(&b);
    if (o.have_re)
        regfree(&o.re);
    return rc;
}

/* argv, each word single-quoted where the shell would need it. */
static void record_command_line(int argc, char **argv)
{
    size_t used = 0;
    for (int a = 0; a < argc && used + 1 < sizeof command_line; a++) {
        const char *w = argv[a];
        int plain = *w != '\0' && strspn(w, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
                                             "_-./=:,+@%") == strlen(w);
        used += (size_t)snprintf(command_line + used, sizeof command_line - used, "%s%s%s%s", a ? " " : "",
                                 plain ? "" : "'", w, plain ? "" : "'");
    }
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    prog = argv[0];
    record_command_line(argc, argv);
    dsv4_h5_quiet();
    default_memory_limit();
    if (argc < 2) {
        usage_main(stderr);
        return DSV4_EINPUT;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        usage_main(stdout);
        return 0;
    }
    if (strcmp(cmd, "--version") == 0) {
        printf("dsv4check %s (%s)\n", DSV4_VERSION, DSV4_GIT_REV);
        return 0;
    }
    static const struct {
        const char *name;
        int (*fn)(int, char **);
    } cmds[] = {{"run", cmd_run}, {"check", cmd_check}, {"gen", cmd_gen},
                {"show", cmd_show}, {"list", cmd_list}, {"bench", cmd_bench}};
    for (size_t k = 0; k < sizeof cmds / sizeof cmds[0]; k++)
        if (strcmp(cmd, cmds[k].name) == 0)
            return cmds[k].fn(argc - 1, argv + 1);
    fprintf(stderr, "%s: unknown command '%s'\n", prog, cmd);
    usage_main(stderr);
    return DSV4_EINPUT;
}
