/* main.c - the dsv4check command line (README.md, "Command line").
 *
 *   dsv4check list  [SUITE.yaml...]          ops, variants, params; or cases
 *   dsv4check list  --goldens [DIR]          every golden: op, variant, case, shapes
 *   dsv4check run   SUITE.yaml... [opts]     implementation vs golden / reference
 *   dsv4check gen   SUITE.yaml... [opts]     write goldens (atomic; --force to replace)
 *   dsv4check check FILE.h5... [opts]        implementation vs golden files
 *   dsv4check identify [SOURCE...] [opts]    which variant each op computes
 *   dsv4check show  FILE.h5...               print a golden's contents
 *   dsv4check bench [opts]                   reference (and --impl) speed
 *
 * run, check and identify judge an implementation (--impl) or outputs
 * computed elsewhere (--actual FILE, harness/actual.h).
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
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "cases.h"
#include "cli.h"
#include "drift.h"
#include "gen.h"
#include "golden.h"
#include "actual.h"
#include "help.h"
#include "html.h"
#include "identify.h"
#include "listing.h"
#include "parallel.h"
#include "runner.h"
#include "yaml_doc.h"
#include "version.h"

typedef dsv4_cli cli;

static const char *prog = "dsv4check";
static char command_line[4096]; /* this run's argv, shell-quoted, for the HTML report */

static void usage_main(FILE *f) { dsv4_usage_main(f, prog); }
static void usage_cmd(FILE *f, const char *cmd) { dsv4_usage_cmd(f, prog, cmd); }

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
    dsv4_input_files inputs; /* every suite and golden file the run reads */
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

/* No report may replace a file the run reads, under any name or link. */
static int check_report_paths(const cli *o, const dsv4_input_files *inputs)
{
    const struct {
        const char *option, *path;
    } reports[] = {{"--junit", o->junit}, {"--json", o->json}, {"--html", o->html}};
    for (size_t k = 0; k < sizeof reports / sizeof reports[0]; k++) {
        const char *input = reports[k].path ? dsv4_input_files_match(inputs, reports[k].path) : NULL;
        if (input) {
            fprintf(stderr, "%s: %s %s is the same file as the input %s; not overwriting it\n", prog,
                    reports[k].option, reports[k].path, input);
            return DSV4_EINPUT;
        }
    }
    return DSV4_OK;
}

/* --actual: how many cases the file provided and, on a run of whole
 * suites, the groups of the file no case has (a misspelt case name). */
static void report_coverage(const cli *o, const dsv4_case_result *rs, int n, int whole_suites)
{
    int missing = 0;
    for (int i = 0; i < n; i++)
        missing += rs[i].status == DSV4_ESKIP && strncmp(rs[i].error, "not provided:", 13) == 0;
    printf("actual: %d of %d case%s provided by %s%s", n - missing, n, n == 1 ? "" : "s", o->actual,
           missing ? "; " : "\n");
    if (missing)
        printf("%d not provided (skipped; listed above)\n", missing);
    dsv4_actual *a;
    dsv4_status st = {0};
    if (!whole_suites || o->have_re || o->shard_n || dsv4_actual_open(o->actual, &a, &st))
        return;
    int extra = 0;
    for (int k = 0; k < dsv4_actual_count(a); k++) {
        const char *g = dsv4_actual_case_at(a, k);
        int found = 0;
        for (int i = 0; i < n && !found; i++) { /* a case, or a stage "<chain case>/<step>" of one */
            size_t len = strlen(rs[i].name);
            found = strncmp(rs[i].name, g, len) == 0 && (g[len] == '\0' || g[len] == '/');
        }
        if (!found && extra++ < 5)
            printf("%s%s", extra == 1 ? "actual: groups no case of this run has: " : ", ", g);
    }
    if (extra)
        printf("%s (%d in all)\n", extra > 5 ? ", ..." : "", extra);
    dsv4_actual_close(a);
}

static int execute_jobs(cli *o, job_set *js, const char *suite)
{
    if (check_report_paths(o, &js->inputs))
        return DSV4_EINPUT;
    js->ro = (dsv4_run_opts){.impl = o->impl, .verbose = o->verbose, .seed_override = o->have_seed,
                             .seed = o->seed, .argv0 = prog, .rerun = o->rerun, .repro_dir = o->repro_dir,
                             .maps = o->html != NULL, .device_arg = o->device_arg, .inputs = &js->inputs,
                             .special = o->special};
    js->verbose = o->verbose;
    js->pg = (progress){isatty(2), 0, wall_seconds()};
    dsv4_case_result *rs = calloc(js->n ? (size_t)js->n : 1, sizeof *rs);
    if (!rs) {
        fprintf(stderr, "%s: out of memory for %d results\n", prog, js->n);
        return DSV4_ERUNTIME;
    }
    dsv4_status st = {0};
    int rc = dsv4_run_jobs(js->n, o->jobs, o->impl, o->device, o->timeout, job_run, job_done, job_name, js, rs,
                           &st);
    progress_end(&js->pg);
    int ran = rc == DSV4_OK;
    if (rc == DSV4_ESKIP)
        printf("skipped: %s\n", st.msg);
    else if (rc)
        fprintf(stderr, "%s: %s\n", prog, st.msg);
    else
        rc = finish_reports(o, suite, rs, js->n);
    if (o->actual && ran)
        report_coverage(o, rs, js->n, js->cases != NULL);
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

/* The backend of --impl, opened, or none for ref (the reference runs in
 * this process): *have_b says which.  Errors are printed. */
static int open_backend_unless_ref(const cli *o, dsv4_backend *b, int *have_b)
{
    *have_b = 0;
    if (strcmp(o->impl, "ref") == 0)
        return DSV4_OK;
    int rc = open_backend(o, b);
    *have_b = rc == DSV4_OK;
    return rc;
}

/* The start of every command but show: its options into o.  Returns 1 where the command
 * is done before it began, its exit code in *rc (--help: 0; a bad option,
 * or no operand where need_operand asks for one: the error). */
static int parse_command(int argc, char **argv, const char *cmd, int need_operand, cli *o, int *rc)
{
    *rc = dsv4_cli_parse(argc, argv, cmd, prog, o);
    if (*rc) {
        *rc = *rc < 0 ? 0 : *rc;
        return 1;
    }
    if (need_operand && optind >= argc) {
        usage_cmd(stderr, cmd);
        dsv4_cli_free(o);
        *rc = DSV4_EINPUT;
        return 1;
    }
    return 0;
}

/* --repro-dir must not be a folder holding this run's goldens or inputs. */
static int check_repro_dir(const cli *o, const char *const *files, int n)
{
    if (!o->repro_dir)
        return DSV4_OK;
    dsv4_status st = {0};
    int rc = dsv4_golden_check_repro_dir(o->repro_dir, files, n, &st);
    if (rc)
        fprintf(stderr, "%s: %s\n", prog, st.msg);
    return rc;
}

/* run: every golden path of the loaded suites, selected or not. */
static int check_repro_dir_suites(const cli *o, const dsv4_suite *suites, int n_suites, int total)
{
    if (!o->repro_dir)
        return DSV4_OK;
    const char **files = calloc(total ? (size_t)total : 1, sizeof *files);
    if (!files)
        return DSV4_ERUNTIME;
    int n = 0;
    for (int k = 0; k < n_suites; k++)
        for (int i = 0; i < suites[k].n; i++)
            files[n++] = suites[k].cases[i].golden;
    int rc = check_repro_dir(o, files, n);
    free(files);
    return rc;
}

static int cmd_run(cli *o, int argc, char **argv)
{
    int rc = DSV4_OK;
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
            if (dsv4_cli_case_selected(o, &suites[k].cases[i]))
                js.cases[js.n++] = &suites[k].cases[i];
    if (!rc && o->actual && dsv4_input_files_add(&js.inputs, o->actual))
        rc = DSV4_ERUNTIME;
    for (int a = 0; !rc && a < loaded; a++) {
        int bad = dsv4_input_files_add(&js.inputs, argv[optind + a]);
        for (int i = 0; !bad && i < suites[a].n; i++)
            bad = dsv4_input_files_add(&js.inputs, suites[a].cases[i].file) ||
                  (suites[a].cases[i].golden[0] && dsv4_input_files_add(&js.inputs, suites[a].cases[i].golden));
        if (bad)
            rc = DSV4_ERUNTIME;
    }
    if (!rc)
        rc = check_repro_dir_suites(o, suites, loaded, total);
    if (!rc && js.n == 0) {
        fprintf(stderr, "%s run: no case selected%s%s%s\n", prog, o->filter ? " by --filter " : "",
                o->filter ? o->filter : "", o->shard_n ? " in this --shard" : "");
        rc = DSV4_EINPUT;
    }
    if (o->shard_n) {
        char tail[40];
        snprintf(tail, sizeof tail, " shard %d/%d", o->shard_k, o->shard_n);
        snprintf(suite_names + strlen(suite_names), sizeof suite_names - strlen(suite_names), "%s", tail);
    }
    if (!rc)
        rc = execute_jobs(o, &js, suite_names);
    dsv4_input_files_free(&js.inputs);
    free(js.cases);
    for (int k = 0; k < loaded; k++)
        dsv4_suite_free(&suites[k]);
    free(suites);
    return rc;
}

static int cmd_check(cli *o, int argc, char **argv)
{
    int rc = DSV4_OK;
    job_set js = {0};
    js.paths = calloc((size_t)(argc - optind), sizeof *js.paths);
    if (!js.paths)
        return DSV4_ERUNTIME;
    /* --shard for check hashes each path as given on the command line. */
    for (int a = optind; a < argc; a++) {
        if (!o->shard_n || dsv4_shard_of(argv[a], o->shard_n) == o->shard_k)
            js.paths[js.n++] = argv[a];
        if (dsv4_input_files_add(&js.inputs, argv[a]))
            rc = DSV4_ERUNTIME;
    }
    if (o->actual && dsv4_input_files_add(&js.inputs, o->actual))
        rc = DSV4_ERUNTIME;
    char suite[64];
    if (o->shard_n)
        snprintf(suite, sizeof suite, "check shard %d/%d", o->shard_k, o->shard_n);
    else
        snprintf(suite, sizeof suite, "check");
    if (!rc)
        rc = check_repro_dir(o, (const char *const *)(argv + optind), argc - optind);
    if (!rc)
        rc = execute_jobs(o, &js, suite);
    dsv4_input_files_free(&js.inputs);
    free(js.paths);
    return rc;
}

/* ---- gen (harness/gen.c) ---- */

static int gen_selected(const void *ctx, const dsv4_case *c) { return dsv4_cli_case_selected(ctx, c); }

static int cmd_gen(cli *o, int argc, char **argv)
{
    dsv4_gen_opts g = {.outdir = o->outdir, .force = o->force, .have_seed = o->have_seed, .seed = o->seed,
                       .selected = gen_selected, .select_ctx = o, .prog = prog};
    return dsv4_gen(&g, argv + optind, argc - optind);
}

/* ---- show ---- */

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
        dsv4_show_golden(stdout, argv[a], &g);
        dsv4_golden_free(&g);
    }
    return worst;
}

/* ---- list ---- */

/* list --goldens [DIR] [--json FILE|-]: the golden index. */
static int list_goldens(cli *o, int argc, char **argv)
{
    if (argc - optind > 1) {
        fprintf(stderr, "%s list --goldens: one folder at most\n", prog);
        return DSV4_EINPUT;
    }
    const char *dir = optind < argc ? argv[optind] : "data/ci";
    dsv4_status st = {0};
    dsv4_report_file rf;
    int to_file = o->json && strcmp(o->json, "-") != 0;
    FILE *f = to_file ? dsv4_report_open(&rf, o->json, &st) : stdout;
    int rc = f ? dsv4_list_goldens(f, prog, dir, o->json != NULL, dsv4_cli_golden_selected, o, &st) : st.code;
    if (f && to_file) {
        dsv4_status cs = {0};
        int crc = dsv4_report_commit(&rf, &cs);
        if (crc && !rc)
            rc = crc, st = cs;
    }
    if (rc)
        fprintf(stderr, "%s: %s\n", prog, st.msg);
    return rc;
}

static int cmd_list(cli *o, int argc, char **argv)
{
    if (o->goldens)
        return list_goldens(o, argc, argv);
    int rc;
    dsv4_backend b;
    int have_b;
    if ((rc = open_backend_unless_ref(o, &b, &have_b)))
        return rc;
    if (have_b)
        printf("implementation: %s\n", b.name);
    if (optind >= argc && o->markdown)
        dsv4_list_markdown(stdout);
    else if (optind >= argc && have_b)
        dsv4_list_impl(stdout, &b);
    else if (optind >= argc)
        dsv4_list_ops(stdout, NULL);
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
            if (dsv4_cli_case_selected(o, &s.cases[i])) {
                const dsv4_case *cs = &s.cases[i];
                printf("  %-56s %-30s %s", cs->name, cs->op->name, dsv4_op_variant_name(cs->op, cs->variant));
                for (int t = 0, first = 1; t < cs->n_tags; t++) /* the contracts it exceeds */
                    if (!strncmp(cs->tags[t], "contract:", 9)) {
                        printf("%s%s", first ? "  beyond contract: " : ", ", cs->tags[t] + 9);
                        first = 0;
                    }
                printf("\n");
            }
        dsv4_suite_free(&s);
    }
    if (have_b)
        dsv4_backend_close(&b);
    return rc;
}

/* ---- identify ---- */

static int cmd_identify(cli *o, int argc, char **argv)
{
    if (!o->impl_given && !o->actual) {
        fprintf(stderr, "%s identify: name the implementation: --impl IMPL or --actual FILE\n", prog);
        return DSV4_EINPUT;
    }
    static char default_suite[] = "cases/ci.yaml";
    char *defaults[] = {default_suite};
    char **sources = optind < argc ? argv + optind : defaults;
    int n = optind < argc ? argc - optind : 1;
    dsv4_identify_opts io = {o->impl, o->device, o->timeout, prog, dsv4_cli_golden_selected, o};
    dsv4_status st = {0};
    int rc = dsv4_identify(&io, sources, n, stdout, &st);
    if (rc == DSV4_ESKIP)
        printf("skipped: %s\n", st.msg);
    else if (rc && rc != DSV4_EFAIL)
        fprintf(stderr, "%s: %s\n", prog, st.msg);
    return rc;
}

/* ---- bench ---- */

static int cmd_bench(cli *o, int argc, char **argv)
{
    (void)argc, (void)argv; /* the cases are bench.c's own */
    int rc;
    dsv4_backend b;
    int have_b;
    if (o->no_ref && (!o->impl_given || strcmp(o->impl, "ref") == 0)) {
        fprintf(stderr, "%s bench: --no-ref times only an implementation's kernels: give --impl (not ref)\n", prog);
        return DSV4_EINPUT;
    }
    if ((rc = open_backend_unless_ref(o, &b, &have_b)))
        return rc;
    rc = dsv4_bench_run(have_b ? &b : NULL, o->have_re ? &o->re : NULL, o->verbose, o->no_ref, stdout);
    if (have_b)
        dsv4_backend_close(&b);
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
    dsv4_cli_default_memory_limit();
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
    if (strcmp(cmd, "show") == 0)
        return cmd_show(argc - 1, argv + 1);
    /* The other commands take options: parsed into o before, freed after. */
    static const struct {
        const char *name;
        int need_operand;
        int (*fn)(cli *o, int argc, char **argv);
    } cmds[] = {{"run", 1, cmd_run},   {"check", 1, cmd_check}, {"gen", 1, cmd_gen},
                {"list", 0, cmd_list}, {"bench", 0, cmd_bench}, {"identify", 0, cmd_identify}};
    for (size_t k = 0; k < sizeof cmds / sizeof cmds[0]; k++) {
        cli o;
        int rc;
        if (strcmp(cmd, cmds[k].name) != 0)
            continue;
        if (parse_command(argc - 1, argv + 1, cmds[k].name, cmds[k].need_operand, &o, &rc))
            return rc;
        rc = cmds[k].fn(&o, argc - 1, argv + 1);
        dsv4_cli_free(&o);
        return rc;
    }
    fprintf(stderr, "%s: unknown command '%s'\n", prog, cmd);
    usage_main(stderr);
    return DSV4_EINPUT;
}
