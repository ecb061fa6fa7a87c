/* cases_apply.c - what the runner asks of a loaded case (cases.h): its
 * tolerance overrides applied to an output's policy, and its tags. */
#include <stdio.h>
#include <string.h>

#include "cases.h"

void dsv4_case_apply_overrides(const dsv4_case *c, const char *output, dsv4_policy *pol)
{
    char prov[192] = "";
    size_t used = 0;
    for (int i = 0; i < c->n_overrides; i++) {
        const dsv4_tol_override *o = &c->overrides[i];
        if (!o->set || (strcmp(o->output, "*") != 0 && strcmp(o->output, output) != 0))
            continue;
        double *to[DSV4_TOL_FIELD_COUNT] = DSV4_TOL_FIELDS(pol);
        const double *from[DSV4_TOL_FIELD_COUNT] = DSV4_TOL_FIELDS(o);
        for (int k = 0; k < DSV4_TOL_FIELD_COUNT; k++)
            if (o->set & (1u << k))
                *to[k] = *from[k];
        if (used < sizeof prov) {
            int w = snprintf(prov + used, sizeof prov - used, "%s%s:%d", used ? ", " : "",
                             c->file, o->line);
            used += w > 0 ? (size_t)w : 0;
        }
    }
    if (!used)
        return;
    char old[sizeof pol->rule];
    memcpy(old, pol->rule, sizeof old);
    old[sizeof old - 1] = '\0';
    snprintf(pol->rule, sizeof pol->rule, "%s%soverride (%s)", old, old[0] ? "; " : "", prov);
}

int dsv4_case_has_tag(const dsv4_case *c, const char *tag)
{
    for (int i = 0; i < c->n_tags; i++)
        if (strcmp(c->tags[i], tag) == 0)
            return 1;
    return 0;
}
