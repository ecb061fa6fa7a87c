/* actualutil.h - actuals files for the tests, written with the C writer
 * (harness/actual.h) from golden files' expected outputs as a kernel would
 * produce them.  Needs check.h (testutil.h) first. */
#ifndef DSV4_ACTUALUTIL_H
#define DSV4_ACTUALUTIL_H

#include <stdlib.h>
#include <string.h>

#include "../harness/actual.h"
#include "../harness/golden.h"

/* What a test changes in the outputs of one case before they are written. */
typedef void (*mutate_fn)(const char *case_name, dsv4_tensors *outs);

/* The outputs of a golden as the kernel produces them: exact outputs as
 * stored, float ideals rounded into the kernel's dtype. */
static inline void kernel_outputs(const dsv4_golden *g, dsv4_tensors *outs)
{
    dsv4_status st = {0};
    for (int k = 0; k < g->outputs.n; k++) {
        const dsv4_tensor *e = &g->outputs.t[k];
        dsv4_dtype dt = e->output_dtype != DSV4_DT_NONE ? e->output_dtype : e->dtype;
        dsv4_tensor *t;
        ck_assert_int_eq(dsv4_tensors_add(outs, e->name, dt, e->ndim, e->shape, &t, &st), 0);
        if (dt == e->dtype) {
            memcpy(t->data, e->data, e->nbytes);
            continue;
        }
        for (int64_t i = 0; i < dsv4_tensor_numel(e); i++)
            dsv4_tensor_set(t, i, dsv4_tensor_get(e, i));
    }
}

/* Writes path from the goldens (NULL-terminated), each case mutated by fn. */
static inline void write_actuals(const char *path, const char *const *goldens, mutate_fn fn)
{
    int n = 0;
    while (goldens[n])
        n++;
    dsv4_golden *gs = calloc((size_t)n, sizeof *gs);
    dsv4_tensors *outs = calloc((size_t)n, sizeof *outs);
    dsv4_actual_case *cs = calloc((size_t)n, sizeof *cs);
    ck_assert(gs && outs && cs);
    dsv4_status st = {0};
    for (int i = 0; i < n; i++) {
        ck_assert_msg(dsv4_golden_read(goldens[i], &gs[i], &st) == 0, "%s", st.msg);
        kernel_outputs(&gs[i], &outs[i]);
        if (fn)
            fn(gs[i].case_name, &outs[i]);
        cs[i] = (dsv4_actual_case){gs[i].case_name, gs[i].op, gs[i].variant, &outs[i]};
    }
    ck_assert_msg(dsv4_actual_write(path, cs, n, &st) == 0, "%s", st.msg);
    for (int i = 0; i < n; i++) {
        dsv4_tensors_free(&outs[i]);
        dsv4_golden_free(&gs[i]);
    }
    free(gs), free(outs), free(cs);
}

#endif
