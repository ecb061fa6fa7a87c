/* bench.c - benchmark table and machine-peak measurements. */
#define _POSIX_C_SOURCE 200809L
#include "bench.h"

#include <cblas.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runner.h"

typedef struct bench_case {
    const char *name;
    const char *op;
    const char *params[16]; /* "name=value" in the op's parameter syntax */
    /* Floating-point operations of one run (0: memory-bound op). */
    double (*flops)(const dsv4_params *ps, const dsv4_tensors *in);
} bench_case;

/* The production shape of toolchain.md section 6: 4 requests x 2048 tokens
 * after a 30000-token prefix, window 128, ratio 4, topk 2048. */
static const bench_case bench_table[] = {
    {"combine_prefill_8192", "combine_topk_swa_indices",
     {"window_size=128", "compress_ratio=4", "topk=2048", "query_lens=[2048,2048,2048,2048]",
      "prefix_lens=[30000,30000,30000,30000]", NULL},
     NULL},
    /* The same 8192 tokens, K = 2048, C4 (Bc = 64). */
    {"global_topk_8192x2048", "compute_global_topk_indices_and_lens",
     {"block_size=64", "compress_ratio=4", "topk=2048", "query_lens=[2048,2048,2048,2048]",
      "prefix_lens=[30000,30000,30000,30000]", NULL},
     NULL},
};

static double seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Read + write bandwidth of memcpy on buffers far larger than the caches. */
static double measure_copy_gbs(void)
{
    const size_t n = (size_t)256 << 20;
    char *a = malloc(n), *b = malloc(n);
    double best = 0;
    if (a && b) {
        memset(a, 1, n);
        memset(b, 2, n);
        for (int k = 0; k < 3; k++) {
            double t0 = seconds();
            memcpy(b, a, n);
            double dt = seconds() - t0;
            if (2.0 * (double)n / dt / 1e9 > best)
                best = 2.0 * (double)n / dt / 1e9;
        }
    }
    free(a);
    free(b);
    return best;
}

static double measure_gemm_gflops(int dbl)
{
    const int n = 1024;
    double best = 0;
    void *a = calloc((size_t)n * n, dbl ? 8 : 4), *b = calloc((size_t)n * n, dbl ? 8 : 4),
         *c = calloc((size_t)n * n, dbl ? 8 : 4);
    if (a && b && c)
        for (int k = 0; k < 3; k++) {
            double t0 = seconds();
            if (dbl)
                cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0, a, n, b, n, 0.0, c, n);
            else
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
            double dt = seconds() - t0;
            if (2.0 * n * n * (double)n / dt / 1e9 > best)
                best = 2.0 * n * n * (double)n / dt / 1e9;
        }
    free(a);
    free(b);
    free(c);
    return best;
}

static int bench_params(const dsv4_op *op, const bench_case *bc, dsv4_params *ps, dsv4_status *st)
{
    memset(ps, 0, sizeof *ps);
    for (int k = 0; bc->params[k]; k++) {
        char name[DSV4_NAME_MAX];
        const char *eq = strchr(bc->params[k], '=');
        size_t len = eq ? (size_t)(eq - bc->params[k]) : 0;
        if (!eq || len >= sizeof name)
            return dsv4_fail(st, DSV4_EINPUT, "bench %s: bad parameter '%s'", bc->name, bc->params[k]);
        memcpy(name, bc->params[k], len);
        name[len] = '\0';
        const dsv4_param_spec *spec = dsv4_op_param(op, name);
        dsv4_param p;
        if (!spec)
            return dsv4_fail(st, DSV4_EINPUT, "bench %s: op has no parameter '%s'", bc->name, name);
        if (dsv4_param_parse(spec, eq + 1, &p, st) || dsv4_params_set(ps, &p, st))
            return st->code;
    }
    int rc = dsv4_op_complete_params(op, ps, bc->name, st);
    if (!rc && op->resolve)
        rc = op->resolve(ps, st);
    return rc;
}

static size_t tensors_bytes(const dsv4_tensors *ts)
{
    size_t s = 0;
    for (int k = 0; k < ts->n; k++)
        s += ts->t[k].nbytes;
    return s;
}

/* Best-of timing of the reference into an already-made output set: at
 * least 3 runs and 0.5 s. */
static int time_reference(const dsv4_op *op, const dsv4_opctx *c, const dsv4_tensors *in, double *best,
                          dsv4_status *st)
{
    dsv4_tensors out = {0};
    int rc = dsv4_reference_outputs(op, c, in, &out, st);
    *best = 1e30;
    double start = seconds();
    for (int k = 0; !rc && (k < 3 || seconds() - start < 0.5) && k < 50; k++) {
        double t0 = seconds();
        rc = op->reference(c, in, &out, st);
        double dt = seconds() - t0;
        if (dt < *best)
            *best = dt;
    }
    dsv4_tensors_free(&out);
    return rc;
}

int dsv4_bench_run(const dsv4_backend *b, const regex_t *re, int verbose, FILE *out)
{
    (void)verbose;
    double copy = measure_copy_gbs(), sg = measure_gemm_gflops(0), dg = measure_gemm_gflops(1);
    fprintf(out, "machine: memcpy %.1f GB/s (read+write), sgemm %.1f GFLOP/s, dgemm %.1f GFLOP/s (1024^3, OpenBLAS)\n",
            copy, sg, dg);
    fprintf(out, "%-28s %-8s %12s %12s %10s %12s %10s\n", "bench", "impl", "time", "bytes", "GB/s",
            "GFLOP/s", "% peak");
    int worst = 0;
    for (size_t i = 0; i < sizeof bench_table / sizeof bench_table[0]; i++) {
        const bench_case *bc = &bench_table[i];
        if (re && regexec(re, bc->name, 0, NULL, 0) != 0)
            continue;
        const dsv4_op *op = dsv4_op_find(bc->op);
        dsv4_params ps;
        dsv4_status st = {0};
        dsv4_tensors in = {0}, o = {0};
        dsv4_opctx c = {&ps, 0, 1};
        int rc = op ? bench_params(op, bc, &ps, &st) : dsv4_fail(&st, DSV4_EINPUT, "no op %s", bc->op);
        if (!rc)
            rc = op->generate(&c, &in, &st);
        if (!rc)
            rc = op->alloc_outputs(&c, &in, &o, &st);
        double t = 0;
        if (!rc)
            rc = time_reference(op, &c, &in, &t, &st);
        if (rc) {
            fprintf(out, "%-28s error: %s\n", bc->name, st.msg);
            worst = rc;
        } else {
            double bytes = (double)(tensors_bytes(&in) + tensors_bytes(&o));
            double fl = bc->flops ? bc->flops(&ps, &in) : 0;
            double gbs = bytes / t / 1e9;
            fprintf(out, "%-28s %-8s %9.3f ms %12.0f %10.2f %12.1f %9.1f%%\n", bc->name, "ref", t * 1e3, bytes,
                    gbs, fl / t / 1e9, fl ? 100.0 * fl / t / 1e9 / sg : 100.0 * gbs / copy);
            double ms;
            if (b) {
                dsv4_status bst = {0};
                int brc = dsv4_backend_supports(b, op, 0)
                              ? dsv4_backend_time(b, op, &c, &in, &o, 20, &ms, &bst)
                              : dsv4_fail(&bst, DSV4_ESKIP, "not implemented");
                if (brc)
                    fprintf(out, "%-28s %-8s %s\n", bc->name, b->name, bst.msg);
                else
                    fprintf(out, "%-28s %-8s %9.3f ms %12.0f %10.2f %12.1f\n", bc->name, b->name, ms, bytes,
                            bytes / (ms * 1e-3) / 1e9, fl / (ms * 1e-3) / 1e9);
            }
        }
        dsv4_tensors_free(&in);
        dsv4_tensors_free(&o);
    }
    return worst;
}
