/* repro.c - a replayable file per failing case: a schema-1
 * golden (inputs, expected outputs, params, seed) that `dsv4check check`
 * replays, plus the implementation's outputs under /actual for people and
 * h5py (the schema-1 reader ignores groups it does not know).  golden.c
 * writes it. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "golden.h"
#include "repro.h"

int dsv4_write_repro(const char *dir, const dsv4_op *op, const dsv4_opctx *c,
                     const dsv4_tensors *in, const dsv4_tensors *expected,
                     const dsv4_tensors *actual, dsv4_case_result *r, dsv4_status *st)
{
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return dsv4_fail(st, DSV4_EINPUT, "--repro-dir %s: cannot create: %s", dir, strerror(errno));
    char base[sizeof r->name], path[sizeof r->repro_file];
    dsv4_golden_file_name(r->name, base, sizeof base);
    snprintf(path, sizeof path, "%s/%s.h5", dir, base);
    /* A shallow view: the golden writer only reads these tensors. */
    static const dsv4_golden zero;
    dsv4_golden g = zero;
    dsv4_golden_describe(&g, op, c->variant, r->name, c->seed, c->params, " --repro-dir");
    g.inputs = *in;
    g.outputs = *expected;
    int rc = dsv4_golden_write_repro(path, &g, actual, st);
    if (!rc)
        snprintf(r->repro_file, sizeof r->repro_file, "%s", path);
    return rc;
}
