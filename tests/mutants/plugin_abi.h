/* plugin_abi.h - the one place the mutants include the plug-in ABI from, so
 * that moving the header (to include/dsv4_plugin.h) is a one-line change. */
#ifndef DSV4_MUTANT_PLUGIN_ABI_H
#define DSV4_MUTANT_PLUGIN_ABI_H

#include "../../include/dsv4_plugin.h"

#endif
