/* readpast.c - which input an implementation reads outside of (readpast.h). */
#include "readpast.h"

#include <stdio.h>
#include <string.h>

/* A bit per output of first: the outputs of one more run under fill that
 * differ from first.  -1 when the run failed (nothing is concluded). */
static long changed_outputs(const dsv4_backend *b, const dsv4_op *op, const dsv4_opctx *c, const dsv4_case_id *id,
                            const dsv4_guard_fill *fill, const dsv4_tensors *in, const dsv4_tensors *first)
{
    dsv4_status st = {0};
    dsv4_tensors again = {0};
    long changed = -1;
    if (!op->alloc_outputs(c, in, &again, &st) && !dsv4_backend_run_fill(b, op, c, id, fill, in, &again, &st) &&
        again.n == first->n) {
        changed = 0;
        for (int k = 0; k < first->n && k < (int)(8 * sizeof changed - 1); k++)
            if (again.t[k].nbytes != first->t[k].nbytes ||
                memcmp(again.t[k].data, first->t[k].data, first->t[k].nbytes) != 0)
                changed |= 1L << k;
    }
    dsv4_tensors_free(&again);
    return changed;
}

/* Puts text in front of the hint of every failing output of outs that the
 * bits of mask name (first's order); the op's own hint follows it. */
static void prepend_hint(dsv4_output_result *outs, int nout, const dsv4_tensors *first, long mask, const char *text)
{
    for (int k = 0; k < first->n && k < (int)(8 * sizeof mask - 1); k++) {
        if (!(mask & (1L << k)))
            continue;
        for (int j = 0; j < nout; j++) {
            dsv4_cmp_result *cmp = &outs[j].cmp;
            if (cmp->verdict != DSV4_FAIL || strcmp(cmp->output, first->t[k].name) != 0)
                continue;
            char old[sizeof cmp->hint];
            snprintf(old, sizeof old, "%s", cmp->hint);
            snprintf(cmp->hint, sizeof cmp->hint, "%s%s%s", text, old[0] ? "; " : "", old);
        }
    }
}

/* The hint for input name, by the sides whose zeroing changes the outputs. */
static void side_hint(const char *name, int after, int before, char *buf, size_t len)
{
    if (after && before)
        snprintf(buf, len, "reads outside input '%s' (its outputs change with the bytes before and after it)", name);
    else if (after)
        snprintf(buf, len, "reads past the end of input '%s' (its outputs change with the bytes after it)", name);
    else if (before)
        snprintf(buf, len, "reads before the start of input '%s' (its outputs change with the bytes before it)",
                 name);
    else
        snprintf(buf, len, "reads outside input '%s' (its outputs change with the bytes around it)", name);
}

void dsv4_readpast_attribute(const dsv4_backend *b, const dsv4_op *op, const dsv4_opctx *c,
                             const dsv4_case_id *id, const dsv4_tensors *in, const dsv4_tensors *first,
                             dsv4_output_result *outs, int nout)
{
    if (b->is_ref || b->actual)
        return;
    /* The same guards again: a kernel whose outputs change anyway says
     * nothing about where it reads. */
    long same = changed_outputs(b, op, c, id, NULL, in, first);
    if (same != 0) {
        if (same > 0)
            prepend_hint(outs, nout, first, same,
                         "nondeterministic: a rerun with the same inputs and guards gave other outputs "
                         "(no input is blamed for reading outside it)");
        return;
    }
    for (int k = 0; k < in->n; k++) {
        const dsv4_guard_fill around = {k, DSV4_GUARD_BEFORE | DSV4_GUARD_AFTER};
        long changed = changed_outputs(b, op, c, id, &around, in, first);
        if (changed <= 0)
            continue;
        const dsv4_guard_fill after = {k, DSV4_GUARD_AFTER}, before = {k, DSV4_GUARD_BEFORE};
        char text[200];
        side_hint(in->t[k].name, changed_outputs(b, op, c, id, &after, in, first) > 0,
                  changed_outputs(b, op, c, id, &before, in, first) > 0, text, sizeof text);
        prepend_hint(outs, nout, first, changed, text);
    }
}
