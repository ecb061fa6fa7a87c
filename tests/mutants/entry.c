/* entry.c - the plug-in entry of one mutant: built once per catalogue line
 * with -DMUTANT_ID=<id of catalogue.def> (Makefile, `make mutants`). */
#include "plugin_abi.h"

#ifndef MUTANT_ID
#error "build with -DMUTANT_ID=<id of tests/mutants/catalogue.def>"
#endif
#define MUTANT_STR2(x) #x
#define MUTANT_STR(x) MUTANT_STR2(x)

const dsv4_plugin *dsv4_mutant_plugin(const char *id); /* core.c */
const dsv4_plugin *dsv4_plugin_entry(void);
const dsv4_plugin *dsv4_plugin_entry(void)
{
    return dsv4_mutant_plugin(MUTANT_STR(MUTANT_ID));
}
