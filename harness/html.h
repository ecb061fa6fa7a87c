/* html.h - the self-contained HTML report of --html FILE: no
 * network, no scripts; inline CSS and SVG only. */
#ifndef DSV4_HTML_H
#define DSV4_HTML_H

#include "report.h"

/* command: the command line of this run, shown at the top. */
int dsv4_write_html(const char *path, const char *suite, const char *impl, const char *command,
                    const dsv4_case_result *rs, int n, dsv4_status *st);

#endif
