/* plugin_example.c - an example external implementation for dsv4check,
 * written against include/dsv4_plugin.h only (no other dsv4check header),
 * as a kernel team would write one.  It provides combine_topk_swa_indices
 * in its default variant, on the CPU, formulated per output row (the
 * reference works per request), from docs/semantics/indices.md A6.2.
 *
 * It speaks plug-in ABI 2: dsv4check calls run2 with the case (name, seed,
 * golden file); with DSV4_EXAMPLE_CASE_LOG=FILE set it appends one line
 * "NAME SEED GOLDEN" per case to FILE (the ABI test reads it).
 *
 * The test build compiles it four ways:
 *   (plain)              correct;
 *   -DEXAMPLE_WRONG      row 1's first window entry off by one (a planted bug);
 *   -DEXAMPLE_BAD_ABI    declares ABI version DSV4_PLUGIN_ABI_VERSION + 1;
 *   -DEXAMPLE_ABI1       an ABI 1 plug-in: its struct as ABI 1 laid it out
 *                        (ending at fini, no run2), run without the case.
 * The plain build also perturbs the first K rows' column 0 by one when
 * DSV4_EXAMPLE_PERTURB=K is set (used by the drift test).
 *
 * Build: cc -shared -fPIC -o libexample.so tests/plugin_example.c (an installed
 *        dsv4check: cc $(pkg-config --cflags dsv4check) with #include <dsv4_plugin.h>)
 * Use:   dsv4check run cases/ci.yaml --impl ./libexample.so */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../include/dsv4_plugin.h"

static char plugin_name[64] = "example-cpu";

static int example_init(int device, char *err, size_t errlen)
{
    (void)err, (void)errlen;
    /* A CPU plug-in needs no device; it records the one it was given so
     * that the test sees --device arrive here. */
    if (device >= 0)
        snprintf(plugin_name, sizeof plugin_name, "example-cpu (device %d)", device);
    else
        snprintf(plugin_name, sizeof plugin_name, "example-cpu (default device)");
    return DSV4_PLUGIN_OK;
}

static int example_supports(const char *op, const char *variant)
{
    return strcmp(op, "combine_topk_swa_indices") == 0 && strcmp(variant, "default") == 0;
}

static const dsv4_plugin_param *param(const dsv4_plugin_param *ps, int n, const char *name)
{
    for (int k = 0; k < n; k++)
        if (strcmp(ps[k].name, name) == 0 && ps[k].kind == DSV4_PLUGIN_INT)
            return &ps[k];
    return NULL;
}

static const dsv4_plugin_tensor *tensor(const dsv4_plugin_tensor *ts, int n, const char *name, int dtype)
{
    for (int k = 0; k < n; k++)
        if (strcmp(ts[k].name, name) == 0 && ts[k].dtype == dtype)
            return &ts[k];
    return NULL;
}

static int64_t floordiv(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

static int example_run(const char *op, const char *variant, const dsv4_plugin_param *params, int nparams,
                       const dsv4_plugin_tensor *inputs, int ninputs, dsv4_plugin_tensor *outputs,
                       int noutputs, char *err, size_t errlen)
{
    if (!example_supports(op, variant)) {
        snprintf(err, errlen, "op %s [%s] not provided", op, variant);
        return DSV4_PLUGIN_ESKIP;
    }
    const dsv4_plugin_param *pw = param(params, nparams, "window_size"),
                            *pc = param(params, nparams, "compress_ratio"), *pk = param(params, nparams, "topk"),
                            *pm = param(params, nparams, "M"), *pn = param(params, nparams, "N");
    const dsv4_plugin_tensor *ti = tensor(inputs, ninputs, "topk_indices", DSV4_PLUGIN_INT32),
                             *tq = tensor(inputs, ninputs, "query_start_loc", DSV4_PLUGIN_INT32),
                             *ts = tensor(inputs, ninputs, "seq_lens", DSV4_PLUGIN_INT32),
                             *tg = tensor(inputs, ninputs, "gather_lens", DSV4_PLUGIN_INT32);
    dsv4_plugin_tensor *oc = NULL, *ol = NULL;
    for (int k = 0; k < noutputs; k++) {
        if (strcmp(outputs[k].name, "combined_indices") == 0)
            oc = &outputs[k];
        if (strcmp(outputs[k].name, "combined_lens") == 0)
            ol = &outputs[k];
    }
    if (!pw || !pc || !pk || !pm || !pn || !ti || !tq || !ts || !tg || !oc || !ol || ti->ndim != 2 ||
        oc->ndim != 2 || pc->i < 1) {
        snprintf(err, errlen, "missing or malformed parameter, input or output");
        return DSV4_PLUGIN_EINPUT;
    }
    const int32_t *topk = ti->data, *qsl = tq->data, *seq = ts->data, *gat = tg->data;
    int32_t *comb = oc->data, *lens = ol->data;
    const int64_t T = ti->shape[0], Wk = ti->shape[1], P = oc->shape[1], R = ts->shape[0];
    const int64_t width = pk->i < Wk ? pk->i : Wk; /* logical top-k width min(topk, Wk) */
    const char *perturb_env = getenv("DSV4_EXAMPLE_PERTURB");
    const int64_t perturb = perturb_env ? atoll(perturb_env) : 0;
    int64_t r = 0;
    for (int64_t t = 0; t < T; t++) {
        /* The request of row t: query_start_loc is relative to its base. */
        while (r + 1 < R && qsl[r + 1] - qsl[0] <= t)
            r++;
        const int64_t qs = qsl[r] - qsl[0], L = qsl[r + 1] - qsl[r];
        const int64_t pos = seq[r] - L + (t - qs); /* absolute position of the token */
        int64_t tk = floordiv(pos + 1, pc->i);
        tk = tk < 0 ? 0 : tk > width ? width : tk;
        int64_t sw = pos + 1 < pw->i ? pos + 1 : pw->i;
        sw = sw < 0 ? 0 : sw;
        int32_t *row = comb + t * P;
        for (int64_t j = 0; j < P; j++)
            row[j] = -1;
        for (int64_t j = 0; j < tk; j++) {
            int64_t v = topk[t * Wk + j];
            row[j] = (v >= 0 && v < pn->i) ? (int32_t)(r * pm->i + v) : -1;
        }
        /* Window: the last sw positions, addressed in the gathered SWA rows
         * that start at workspace row r*M + N and hold positions from
         * seq - gather onward. */
        const int64_t first = pos - sw + 1, gathered_from = seq[r] - gat[r];
        for (int64_t i = 0; i < sw && tk + i < P; i++)
            row[tk + i] = (int32_t)(r * pm->i + pn->i + (first + i - gathered_from));
        lens[t] = (int32_t)(tk + sw);
#ifdef EXAMPLE_WRONG
        if (t == 1 && sw > 0 && tk < P)
            row[tk] += 1; /* the planted bug: the window starts one row late */
#endif
        if (t < perturb && P > 0)
            row[0] += 1;
    }
    return DSV4_PLUGIN_OK;
}

#ifdef EXAMPLE_ABI1
/* The plug-in struct of ABI 1, as a plug-in built against that header has
 * it: seven fields, nothing after fini. */
typedef struct {
    int abi_version;
    const char *name;
    int (*init)(int, char *, size_t);
    int (*supports)(const char *, const char *);
    int (*run)(const char *, const char *, const dsv4_plugin_param *, int, const dsv4_plugin_tensor *, int,
               dsv4_plugin_tensor *, int, char *, size_t);
    void *time;
    void (*fini)(void);
} example_plugin_abi1;

static const example_plugin_abi1 example = {1, plugin_name, example_init, example_supports, example_run, NULL, NULL};

const dsv4_plugin *dsv4_plugin_entry(void);
const dsv4_plugin *dsv4_plugin_entry(void) { return (const dsv4_plugin *)(const void *)&example; }
#else
/* time: milliseconds a call of the op, over iters runs on the CPU clock
 * (what `dsv4check bench --impl` reports).  The bench's device pseudo-ops
 * (copy bandwidth, matrix units, codec check) are refused: no device here. */
static int example_time(const char *op, const char *variant, const dsv4_plugin_param *params, int nparams,
                        const dsv4_plugin_tensor *inputs, int ninputs, dsv4_plugin_tensor *outputs, int noutputs,
                        int iters, double *ms, char *err, size_t errlen)
{
    if (!example_supports(op, variant)) {
        snprintf(err, errlen, "%s times only combine_topk_swa_indices (default), not %s", plugin_name, op);
        return DSV4_PLUGIN_ESKIP;
    }
    if (iters < 1)
        iters = 1;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < iters; i++) {
        int rc = example_run(op, variant, params, nparams, inputs, ninputs, outputs, noutputs, err, errlen);
        if (rc)
            return rc;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    *ms = ((double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-6) / iters;
    return DSV4_PLUGIN_OK;
}

/* ABI 2: the case comes with the call. */
static int example_run2(const dsv4_plugin_case *cs, const dsv4_plugin_tensor *inputs, int ninputs,
                        dsv4_plugin_tensor *outputs, int noutputs, char *err, size_t errlen)
{
    const char *log = getenv("DSV4_EXAMPLE_CASE_LOG");
    FILE *f = log && *log ? fopen(log, "a") : NULL;
    if (f) {
        fprintf(f, "%s %" PRIu64 " %s\n", cs->name, cs->seed, cs->golden ? cs->golden : "-");
        fclose(f);
    }
    return example_run(cs->op, cs->variant, cs->params, cs->nparams, inputs, ninputs, outputs, noutputs, err,
                       errlen);
}

static const dsv4_plugin example = {
#ifdef EXAMPLE_BAD_ABI
    DSV4_PLUGIN_ABI_VERSION + 1,
#else
    DSV4_PLUGIN_ABI_VERSION,
#endif
    plugin_name, example_init, example_supports, example_run, example_time, NULL, example_run2,
};

const dsv4_plugin *dsv4_plugin_entry(void);
const dsv4_plugin *dsv4_plugin_entry(void) { return &example; }
#endif
