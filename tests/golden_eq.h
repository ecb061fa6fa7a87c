/* golden_eq.h - compare two goldens read back by dsv4_golden_read: every
 * field and every tensor byte, except the provenance attributes `generator`
 * and `created` (which name the build and the time of a regeneration).
 * Used by tests/golden_same.c (make verify-goldens) and the tests. */
#ifndef DSV4_GOLDEN_EQ_H
#define DSV4_GOLDEN_EQ_H

#include <stdio.h>
#include <string.h>

#include "../harness/golden.h"

static inline int dsv4_param_same(const dsv4_param *a, const dsv4_param *b)
{
    if (strcmp(a->name, b->name) || a->type != b->type)
        return 0;
    switch (a->type) {
    case DSV4_P_INT: return a->i == b->i;
    case DSV4_P_FLOAT: return memcmp(&a->f, &b->f, sizeof a->f) == 0; /* bitwise */
    case DSV4_P_STR: return strcmp(a->s, b->s) == 0;
    default:
        return a->n == b->n && memcmp(a->list, b->list, (size_t)a->n * sizeof a->list[0]) == 0;
    }
}

static inline int dsv4_tensors_same(const dsv4_tensors *x, const dsv4_tensors *y, const char *grp,
                                    char *why, size_t len)
{
    if (x->n != y->n) {
        snprintf(why, len, "/%s holds %d vs %d datasets", grp, x->n, y->n);
        return 0;
    }
    for (int k = 0; k < x->n; k++) {
        const dsv4_tensor *a = &x->t[k], *b = &y->t[k];
        if (strcmp(a->name, b->name) || a->dtype != b->dtype || a->output_dtype != b->output_dtype ||
            !dsv4_tensor_same_shape(a, b) || a->nbytes != b->nbytes ||
            (a->nbytes && memcmp(a->data, b->data, a->nbytes))) {
            snprintf(why, len, "/%s/%s differs (name, dtype, shape or bytes)", grp, a->name);
            return 0;
        }
    }
    return 1;
}

/* 1 when a and b agree except for generator and created; else 0 with why. */
static inline int dsv4_golden_same(const dsv4_golden *a, const dsv4_golden *b, char *why, size_t len)
{
    if (a->schema != b->schema || strcmp(a->op, b->op) || strcmp(a->variant, b->variant) ||
        strcmp(a->case_name, b->case_name) || a->seed != b->seed) {
        snprintf(why, len, "root attributes differ (schema, op, variant, case or seed)");
        return 0;
    }
    if (a->params.n != b->params.n) {
        snprintf(why, len, "%d vs %d params", a->params.n, b->params.n);
        return 0;
    }
    for (int k = 0; k < a->params.n; k++)
        if (!dsv4_param_same(&a->params.p[k], &b->params.p[k])) {
            snprintf(why, len, "param %s differs", a->params.p[k].name);
            return 0;
        }
    return dsv4_tensors_same(&a->inputs, &b->inputs, "inputs", why, len) &&
           dsv4_tensors_same(&a->outputs, &b->outputs, "outputs", why, len);
}

#endif
