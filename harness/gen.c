#define _POSIX_C_SOURCE 200809L
/* gen.c - `dsv4check gen`: the goldens of the selected cases.  Every suite
 * is loaded and every target path known before the first file is written,
 * so a bad suite or two cases aiming at one file cost no write. */
#include "gen.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "chain.h"
#include "golden.h"
#include "runner.h"

/* One golden to write: the case and where. */
typedef struct gen_job {
    const dsv4_case *c;
    char path[DSV4_PATH_MAX + 200];
} gen_job;

static int target_path(const dsv4_gen_opts *o, const dsv4_case *c, char *path, size_t len)
{
    if (o->outdir) {
        char base[sizeof c->name];
        dsv4_golden_file_name(c->name, base, sizeof base);
        snprintf(path, len, "%s/%s.h5", o->outdir, base);
    } else if (c->golden[0]) {
        snprintf(path, len, "%s", c->golden);
    } else {
        fprintf(stderr, "%s: %s:%d: case %s has no golden path (add golden: or golden_dir:, or use -o DIR)\n",
                o->prog, c->file, c->line, c->name);
        return DSV4_EINPUT;
    }
    return DSV4_OK;
}

/* Two cases writing one file would leave only the second: an error naming
 * both (the suites' own golden paths are checked at load; -o DIR and
 * several suites can still collide). */
static int check_unique_targets(const dsv4_gen_opts *o, const gen_job *jobs, int n)
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++)
            if (dsv4_golden_same_path(jobs[i].path, jobs[j].path)) {
                fprintf(stderr, "%s: cases '%s' (%s:%d) and '%s' (%s:%d) both write %s; rename one\n",
                        o->prog, jobs[j].c->name, jobs[j].c->file, jobs[j].c->line, jobs[i].c->name,
                        jobs[i].c->file, jobs[i].c->line, jobs[i].path);
                return DSV4_EINPUT;
            }
    return DSV4_OK;
}

/* The folder part of path ("." for a bare name) into dir. */
static void dir_of(const char *path, char *dir, size_t len)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(dir, len, ".");
    else
        snprintf(dir, len, "%.*s", slash == path ? 1 : (int)(slash - path), path);
}

/* Temporary files a killed gen left in the target folders (each folder once). */
static void remove_stale_temps(const dsv4_gen_opts *o, const gen_job *jobs, int n)
{
    for (int i = 0; i < n; i++) {
        char dir[sizeof jobs[i].path], prev[sizeof jobs[i].path];
        dir_of(jobs[i].path, dir, sizeof dir);
        int seen = 0;
        for (int j = 0; j < i && !seen; j++) {
            dir_of(jobs[j].path, prev, sizeof prev);
            seen = strcmp(dir, prev) == 0;
        }
        if (seen)
            continue;
        int removed = 0;
        dsv4_status st = {0};
        if (dsv4_golden_remove_stale_temps(dir, &removed, &st))
            fprintf(stderr, "%s: warning: %s\n", o->prog, st.msg);
        if (removed)
            printf("gen: removed %d stale temporary file(s) of an interrupted gen from %s\n", removed, dir);
    }
}

static int gen_case(const dsv4_gen_opts *o, const gen_job *job)
{
    const dsv4_case *c = job->c;
    dsv4_golden g;
    memset(&g, 0, sizeof g);
    uint64_t seed = o->have_seed ? o->seed : c->seed;
    dsv4_golden_describe(&g, c->op, c->variant, c->name, seed, &c->params, "");
    dsv4_opctx ctx = dsv4_opctx_make(c->op, &c->params, c->variant, seed);
    dsv4_status st = {0};
    int rc = c->op->generate(&ctx, &g.inputs, &st);
    if (!rc)
        rc = c->op->validate(&ctx, &g.inputs, &st);
    if (!rc)
        rc = dsv4_reference_outputs(c->op, &ctx, &g.inputs, &g.outputs, &st);
    if (!rc)
        rc = dsv4_golden_write(job->path, &g, o->force, &st);
    if (rc)
        fprintf(stderr, "%s: %s:%d: case %s: %s\n", o->prog, c->file, c->line, c->name, st.msg);
    else
        printf("wrote %s\n", job->path);
    dsv4_golden_free(&g);
    return rc;
}

/* Writes the jobs; the worst code wins, bad input over runtime errors. */
static int gen_jobs(const dsv4_gen_opts *o, const gen_job *jobs, int n)
{
    int worst = DSV4_OK, wrote = 0;
    for (int i = 0; i < n; i++) {
        const dsv4_case *c = jobs[i].c;
        int r, chain_wrote = 0;
        if (dsv4_chain_of(c->op)) { /* one golden per step, <golden base>.<step>.h5 (chain.h) */
            dsv4_status st = {0};
            if ((r = dsv4_chain_gen_case(c, o->outdir, o->have_seed ? o->seed : c->seed, o->force, &chain_wrote, &st)))
                fprintf(stderr, "%s: %s:%d: case %s: %s\n", o->prog, c->file, c->line, c->name, st.msg);
            wrote += chain_wrote;
        } else {
            r = gen_case(o, &jobs[i]);
            wrote += r == DSV4_OK;
        }
        if (r && (worst == DSV4_OK || r == DSV4_EINPUT))
            worst = r;
    }
    printf("gen: %d golden file(s) written\n", wrote);
    return worst;
}

int dsv4_gen(const dsv4_gen_opts *o, char *const *suites, int n_suites)
{
    if (o->outdir && mkdir(o->outdir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "%s gen: -o %s: cannot create: %s\n", o->prog, o->outdir, strerror(errno));
        return DSV4_EINPUT;
    }
    dsv4_suite *loaded = calloc(n_suites > 0 ? (size_t)n_suites : 1, sizeof *loaded);
    if (!loaded) {
        fprintf(stderr, "%s gen: out of memory\n", o->prog);
        return DSV4_ERUNTIME;
    }
    int n_loaded = 0, total = 0, rc = DSV4_OK;
    for (; n_loaded < n_suites; n_loaded++) {
        dsv4_status st = {0};
        if (dsv4_suite_load(suites[n_loaded], &loaded[n_loaded], &st)) {
            fprintf(stderr, "%s: %s\n", o->prog, st.msg);
            rc = st.code;
            break;
        }
        total += loaded[n_loaded].n;
    }
    gen_job *jobs = rc ? NULL : calloc(total ? (size_t)total : 1, sizeof *jobs);
    if (!rc && !jobs) {
        fprintf(stderr, "%s gen: out of memory for %d cases\n", o->prog, total);
        rc = DSV4_ERUNTIME;
    }
    int n_jobs = 0;
    for (int s = 0; !rc && s < n_loaded; s++)
        for (int i = 0; !rc && i < loaded[s].n; i++) {
            const dsv4_case *c = &loaded[s].cases[i];
            if ((o->selected && !o->selected(o->select_ctx, c)) || (dsv4_chain_of(c->op) && !dsv4_chain_has_goldens(c)))
                continue;
            jobs[n_jobs].c = c;
            rc = target_path(o, c, jobs[n_jobs].path, sizeof jobs[n_jobs].path);
            n_jobs++;
        }
    if (!rc)
        rc = check_unique_targets(o, jobs, n_jobs);
    if (!rc) {
        dsv4_golden_catch_signals();
        remove_stale_temps(o, jobs, n_jobs);
        rc = gen_jobs(o, jobs, n_jobs);
    }
    free(jobs);
    for (int s = 0; s < n_loaded; s++)
        dsv4_suite_free(&loaded[s]);
    free(loaded);
    return rc;
}
