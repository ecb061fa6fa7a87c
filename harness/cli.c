#define _POSIX_C_SOURCE 200809L
/* cli.c - option parsing for the dsv4check commands (cli.h). */
#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "help.h"
#include "parallel.h"

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

/* A whole decimal integer in [lo, hi] into *v: 0, else -1. */
static int parse_int_in(const char *s, long lo, long hi, int *v)
{
    char *end;
    errno = 0;
    long x = strtol(s, &end, 10);
    if (errno || *end || x < lo || x > hi)
        return -1;
    *v = (int)x;
    return 0;
}

/* A number, the whole argument, into *v: 0, else -1 (the range is the
 * caller's). */
static int parse_real(const char *s, double *v)
{
    char *end;
    errno = 0;
    *v = strtod(s, &end);
    return errno || *end ? -1 : 0;
}

void dsv4_cli_default_memory_limit(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0)
        dsv4_set_memory_limit((uint64_t)pages * (uint64_t)page / 2);
}

int dsv4_cli_parse(int argc, char **argv, const char *cmd, const char *prog, dsv4_cli *o)
{
    static const struct option longopts[] = {
        {"impl", required_argument, NULL, 'i'}, {"filter", required_argument, NULL, 'f'},
        {"exclude-tag", required_argument, NULL, 'X'},
        {"actual", required_argument, NULL, 'A'}, {"goldens", no_argument, NULL, 'G'},
        {"junit", required_argument, NULL, 'J'}, {"json", required_argument, NULL, 'Y'},
        {"jobs", required_argument, NULL, 'j'}, {"shard", required_argument, NULL, 'S'},
        {"html", required_argument, NULL, 'H'}, {"repro-dir", required_argument, NULL, 'P'},
        {"baseline", required_argument, NULL, 'B'}, {"strict", no_argument, NULL, 'T'},
        {"drift-factor", required_argument, NULL, 'D'},
        {"seed", required_argument, NULL, 's'}, {"device", required_argument, NULL, 'd'},
        {"mem-limit", required_argument, NULL, 'm'}, {"output", required_argument, NULL, 'o'},
        {"force", no_argument, NULL, 'F'}, {"rerun", required_argument, NULL, 'R'},
        {"markdown", no_argument, NULL, 'M'}, {"verbose", no_argument, NULL, 'v'},
        {"timeout", required_argument, NULL, 'W'}, {"special", required_argument, NULL, 'N'},
        {"no-ref", no_argument, NULL, 'Q'},
        {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0},
    };
    memset(o, 0, sizeof *o);
    o->impl = "ref";
    o->device = -1;
    o->jobs = 1;
    o->drift_factor = 2.0;
    o->timeout = 600;
    optind = 1;
    int ch;
    while ((ch = getopt_long(argc, argv, "vho:j:", longopts, NULL)) != -1) {
        char *end;
        switch (ch) {
        case 'i': o->impl = optarg, o->impl_given = 1; break;
        case 'A': o->actual = optarg; break;
        case 'G': o->goldens = 1; break;
        case 'f': o->filter = optarg; break;
        case 'X': o->exclude_tag = optarg; break;
        case 'J': o->junit = optarg; break;
        case 'Y': o->json = optarg; break;
        case 'H': o->html = optarg; break;
        case 'P': o->repro_dir = optarg; break;
        case 'B': o->baseline = optarg; break;
        case 'T': o->strict = 1; break;
        case 'N':
            if (dsv4_special_mode_parse(optarg, &o->special)) {
                fprintf(stderr, "%s %s: --special %s: strict or separate\n", prog, cmd, optarg);
                return DSV4_EINPUT;
            }
            break;
        case 'j':
            if (parse_int_in(optarg, 1, 256, &o->jobs)) {
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
            if (parse_real(optarg, &o->drift_factor) || !(o->drift_factor >= 1) || o->drift_factor > 1e12) {
                fprintf(stderr, "%s %s: --drift-factor %s: a number >= 1\n", prog, cmd, optarg);
                return DSV4_EINPUT;
            }
            break;
        case 'W':
            if (parse_real(optarg, &o->timeout) || !(o->timeout > 0) || o->timeout > 1e6) {
                fprintf(stderr, "%s %s: --timeout %s: seconds, more than 0 and at most 1e6\n", prog, cmd, optarg);
                return DSV4_EINPUT;
            }
            break;
        case 'o': o->outdir = optarg; break;
        case 'F': o->force = 1; break;
        case 'M': o->markdown = 1; break;
        case 'Q': o->no_ref = 1; break;
        case 'R':
            if (parse_int_in(optarg, 1, 1000, &o->rerun)) {
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
            if (parse_int_in(optarg, 0, INT_MAX, &o->device)) {
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
        case 'h': dsv4_usage_cmd(stdout, prog, cmd); return -1;
        default: dsv4_usage_cmd(stderr, prog, cmd); return DSV4_EINPUT;
        }
    }
    if (o->actual) {
        int judging = strcmp(cmd, "run") == 0 || strcmp(cmd, "check") == 0 || strcmp(cmd, "identify") == 0;
        if (!judging || o->impl_given) {
            fprintf(stderr, "%s %s: --actual %s\n", prog, cmd,
                    judging ? "and --impl name two implementations; give one" : "applies to run, check and identify");
            return DSV4_EINPUT;
        }
        snprintf(o->actual_impl, sizeof o->actual_impl, "%s%s", DSV4_ACTUAL_IMPL, o->actual);
        o->impl = o->actual_impl;
    }
    if (o->goldens && strcmp(cmd, "list") != 0) {
        fprintf(stderr, "%s %s: --goldens applies to list\n", prog, cmd);
        return DSV4_EINPUT;
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

/* Does the case carry a tag of the comma-separated list (an entry ending
 * in '*' matches every tag with that prefix)? */
static int has_listed_tag(const dsv4_case *c, const char *list)
{
    for (const char *p = list; *p;) {
        size_t n = strcspn(p, ",");
        const int prefix = n > 0 && p[n - 1] == '*';
        for (int i = 0; i < c->n_tags; i++)
            if (prefix ? strncmp(c->tags[i], p, n - 1) == 0 : strlen(c->tags[i]) == n && !strncmp(c->tags[i], p, n))
                return 1;
        p += n + (p[n] == ',');
    }
    return 0;
}

int dsv4_cli_case_selected(const dsv4_cli *o, const dsv4_case *c)
{
    if (o->shard_n && dsv4_shard_of(c->name, o->shard_n) != o->shard_k)
        return 0;
    if (o->exclude_tag && has_listed_tag(c, o->exclude_tag))
        return 0;
    if (!o->have_re)
        return 1;
    char full[300];
    snprintf(full, sizeof full, "%s/%s", c->op->name, c->name);
    for (int i = 0; i < c->n_tags; i++) /* contract: tags too (no case name has a colon) */
        if (!strncmp(c->tags[i], "contract:", 9) && regexec(&o->re, c->tags[i], 0, NULL, 0) == 0)
            return 1;
    return regexec(&o->re, c->name, 0, NULL, 0) == 0 || regexec(&o->re, full, 0, NULL, 0) == 0;
}

int dsv4_cli_golden_selected(const void *ctx, const char *case_name, const char *op)
{
    const dsv4_cli *o = ctx;
    if (!o->have_re)
        return 1;
    char full[300];
    snprintf(full, sizeof full, "%s/%s", op, case_name);
    return regexec(&o->re, case_name, 0, NULL, 0) == 0 || regexec(&o->re, full, 0, NULL, 0) == 0;
}

void dsv4_cli_free(dsv4_cli *o)
{
    if (o->have_re)
        regfree(&o->re);
    o->have_re = 0;
}

