/* cli.h - the options of the dsv4check commands (cli.c parses them;
 * main.c runs the commands). */
#ifndef DSV4_CLI_H
#define DSV4_CLI_H

#include <regex.h>
#include <stdint.h>

#include "cases.h"
#include "special.h"

typedef struct dsv4_cli {
    const char *impl;
    int impl_given;
    const char *actual;        /* --actual FILE */
    char actual_impl[4200];    /* "actual:FILE", the backend's name for it */
    int goldens;               /* list --goldens */
    const char *filter;
    const char *exclude_tag;   /* --exclude-tag: comma-separated tags; "prefix*" matches a prefix */
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
    int no_ref;                /* bench --no-ref */
    regex_t re;
    int have_re;
    /* CI features */
    const char *html;
    const char *repro_dir;
    const char *baseline;
    int strict;
    double drift_factor;
    int jobs;
    int shard_k, shard_n; /* 0 = no --shard */
    char device_arg[32];
    double timeout; /* --timeout: seconds one call into the implementation may take */
    dsv4_special_mode special; /* --special: strict (default) or separate (special.h) */
} dsv4_cli;

/* Parses the options of command cmd (getopt: optind is left at the first
 * operand).  Returns 0, -1 after printing --help, or an exit code after
 * printing why (messages start with prog). */
int dsv4_cli_parse(int argc, char **argv, const char *cmd, const char *prog, dsv4_cli *o);
void dsv4_cli_free(dsv4_cli *o);
/* The memory limit before --mem-limit: half the RAM. */
void dsv4_cli_default_memory_limit(void);
/* Whether --shard, --exclude-tag and --filter keep case c (the filter
 * matches its name, op/name or one of its contract: tags). */
int dsv4_cli_case_selected(const dsv4_cli *o, const dsv4_case *c);
/* The same for a golden's case name and op (no shard): the ctx is a dsv4_cli. */
int dsv4_cli_golden_selected(const void *ctx, const char *case_name, const char *op);

#endif
