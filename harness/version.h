/* version.h - the version and git revision that dsv4check reports and
 * writes into goldens and reports; the Makefile passes both with -D, and a
 * build without them (another build system) still compiles. */
#ifndef DSV4_HARNESS_VERSION_H
#define DSV4_HARNESS_VERSION_H

#ifndef DSV4_VERSION
#define DSV4_VERSION "0"
#endif
#ifndef DSV4_GIT_REV
#define DSV4_GIT_REV "unknown"
#endif

#endif
