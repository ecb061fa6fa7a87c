/* help.h - the command line's help texts (help.c). */
#ifndef DSV4_HELP_H
#define DSV4_HELP_H

#include <stdio.h>

/* `dsv4check --help`: the commands, limits, exit codes and version. */
void dsv4_usage_main(FILE *f, const char *prog);
/* `dsv4check CMD --help`: the command's usage and options. */
void dsv4_usage_cmd(FILE *f, const char *prog, const char *cmd);

#endif
