/* test_parallel.c - the reference's worker threads (ref/parallel.h): every
 * item runs exactly once, the first failing item in order is the one
 * reported, nested calls run serially, the persistent pool survives many
 * tiny jobs, failing jobs, thread-count changes, a second caller and
 * fork (the child rebuilds it), and the references of the parallelized ops
 * give the same bytes at 1, 2, 3 and 5 threads on shapes large enough to be
 * split (the ci suite's are mostly too small). */
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../harness/cases.h"
#include "../harness/runner.h"
#include "../ref/parallel.h"
#include "testutil.h"

static const int thread_counts[] = {1, 2, 3, 5};

/* *a = max(*a, v), atomically (the workers race to record their numbers). */
static void atomic_max(atomic_int *a, int v)
{
    int m = atomic_load(a);
    while (v > m && !atomic_compare_exchange_weak(a, &m, v))
        ;
}

typedef struct count_ctx {
    atomic_int *hits;
    int64_t fail_at[2]; /* items that fail (-1: none) */
    atomic_int max_worker;
} count_ctx;

static int count_range(void *ctx, int64_t b, int64_t e, int worker, dsv4_status *st)
{
    count_ctx *c = ctx;
    atomic_max(&c->max_worker, worker);
    for (int64_t i = b; i < e; i++) {
        if (i == c->fail_at[0] || i == c->fail_at[1])
            return dsv4_fail(st, DSV4_EINPUT, "item %lld failed", (long long)i);
        atomic_fetch_add(&c->hits[i], 1);
    }
    return DSV4_OK;
}

START_TEST(every_item_once)
{
    const int64_t n = 10007;
    atomic_int *hits = calloc((size_t)n, sizeof *hits);
    ck_assert_ptr_nonnull(hits);
    for (size_t k = 0; k < sizeof thread_counts / sizeof thread_counts[0]; k++)
        for (int64_t grain = 1; grain <= 4096; grain *= 8) {
            dsv4_set_threads(thread_counts[k]);
            for (int64_t i = 0; i < n; i++)
                atomic_store(&hits[i], 0);
            count_ctx c = {hits, {-1, -1}, 0};
            dsv4_status st = {0};
            ck_assert_int_eq(dsv4_parallel_for(n, grain, 0, count_range, &c, &st), DSV4_OK);
            for (int64_t i = 0; i < n; i++)
                ck_assert_msg(atomic_load(&hits[i]) == 1, "item %lld ran %d times (threads %d, grain %lld)",
                              (long long)i, atomic_load(&hits[i]), thread_counts[k], (long long)grain);
            const int workers = dsv4_parallel_workers(n, grain);
            ck_assert_int_lt(atomic_load(&c.max_worker), workers);
            ck_assert_int_le(workers, thread_counts[k]);
        }
    dsv4_set_threads(0);
    free(hits);
}
END_TEST

START_TEST(first_failure_in_item_order)
{
    const int64_t n = 5000;
    atomic_int *hits = calloc((size_t)n, sizeof *hits);
    ck_assert_ptr_nonnull(hits);
    for (size_t k = 0; k < sizeof thread_counts / sizeof thread_counts[0]; k++) {
        dsv4_set_threads(thread_counts[k]);
        count_ctx c = {hits, {4321, 37}, 0};
        dsv4_status st = {0};
        ck_assert_int_eq(dsv4_parallel_for(n, 16, 0, count_range, &c, &st), DSV4_EINPUT);
        ck_assert_str_eq(st.msg, "item 37 failed");
    }
    dsv4_set_threads(0);
    free(hits);
}
END_TEST

typedef struct nest_ctx {
    atomic_int inner_workers_max;
} nest_ctx;

static int nested_range(void *ctx, int64_t b, int64_t e, int worker, dsv4_status *st)
{
    nest_ctx *c = ctx;
    (void)b, (void)e, (void)worker, (void)st;
    const int w = dsv4_parallel_workers(1000, 1); /* inside a worker: 1 */
    atomic_max(&c->inner_workers_max, w);
    return DSV4_OK;
}

START_TEST(nested_calls_run_serially)
{
    dsv4_set_threads(3);
    nest_ctx c = {0};
    dsv4_status st = {0};
    ck_assert_int_eq(dsv4_parallel_for(64, 1, 0, nested_range, &c, &st), DSV4_OK);
    ck_assert_int_eq(atomic_load(&c.inner_workers_max), 1);
    ck_assert_int_eq(dsv4_parallel_workers(64, 1), 3); /* back outside: the pool again */
    ck_assert_int_eq(dsv4_parallel_workers(64, 64), 1);
    dsv4_set_threads(0);
}
END_TEST

/* A job whose items add their index into a sum: the job's result. */
typedef struct sum_ctx {
    atomic_llong sum;
    atomic_int max_worker;
    int64_t fail_at; /* -1: none */
    atomic_int blas_threads_max;
} sum_ctx;

static int sum_range(void *ctx, int64_t b, int64_t e, int worker, dsv4_status *st)
{
    sum_ctx *c = ctx;
    atomic_max(&c->max_worker, worker);
    const int bt = openblas_get_num_threads();
    atomic_max(&c->blas_threads_max, bt);
    long long s = 0;
    for (int64_t i = b; i < e; i++) {
        if (i == c->fail_at)
            return dsv4_fail(st, DSV4_EINPUT, "item %lld failed", (long long)i);
        s += i;
    }
    atomic_fetch_add(&c->sum, s);
    return DSV4_OK;
}

/* One job of n items: DSV4_OK with the right sum and worker numbers, or
 * the failing item's error when fail_at is in range. Returns 0 when right. */
static int job_ok(int64_t n, int64_t grain, int flags, int64_t fail_at)
{
    sum_ctx c = {0};
    atomic_init(&c.sum, 0);
    atomic_init(&c.max_worker, 0);
    atomic_init(&c.blas_threads_max, 0);
    c.fail_at = fail_at;
    const int workers = dsv4_parallel_workers(n, grain);
    dsv4_status st = {0};
    const int rc = dsv4_parallel_for(n, grain, flags, sum_range, &c, &st);
    if (atomic_load(&c.max_worker) >= workers)
        return 1;
    if (fail_at >= 0 && fail_at < n) {
        char want[64];
        snprintf(want, sizeof want, "item %lld failed", (long long)fail_at);
        return rc != DSV4_EINPUT || strcmp(st.msg, want) != 0 ? 2 : 0;
    }
    if (rc != DSV4_OK || atomic_load(&c.sum) != (long long)(n * (n - 1) / 2))
        return 3;
    if ((flags & DSV4_PAR_BLAS) && workers > 1 && atomic_load(&c.blas_threads_max) != 1)
        return 4;
    return 0;
}

START_TEST(many_tiny_jobs)
{
    dsv4_set_threads(3);
    for (int k = 0; k < 20000; k++)
        ck_assert_int_eq(job_ok(1 + k % 9, 1, 0, -1), 0);
    dsv4_set_threads(0);
}
END_TEST

START_TEST(failing_jobs_leave_the_pool_usable)
{
    dsv4_set_threads(4);
    for (int k = 0; k < 2000; k++) {
        const int64_t n = 64 + k % 200;
        ck_assert_int_eq(job_ok(n, 1 + k % 5, 0, k % 3 == 0 ? 0 : k % 3 == 1 ? n - 1 : n / 2), 0);
        ck_assert_int_eq(job_ok(n, 1 + k % 5, 0, -1), 0);
    }
    dsv4_set_threads(0);
}
END_TEST

START_TEST(thread_count_changes_between_jobs)
{
    static const int counts[] = {1, 6, 2, 9, 3, 1, 12, 4};
    const int blas_before = openblas_get_num_threads();
    for (int rep = 0; rep < 50; rep++)
        for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
            dsv4_set_threads(counts[k]);
            ck_assert_int_eq(openblas_get_num_threads(), counts[k]);
            ck_assert_int_le(dsv4_parallel_workers(1000, 1), counts[k]);
            ck_assert_int_eq(job_ok(1000, 7, 0, -1), 0);
            ck_assert_int_eq(job_ok(1000, 3, DSV4_PAR_BLAS, -1), 0);
            /* the job's duration only: back to the count after */
            ck_assert_int_eq(openblas_get_num_threads(), counts[k]);
        }
    dsv4_set_threads(0);
    ck_assert_int_eq(openblas_get_num_threads(), blas_before);
}
END_TEST

/* Jobs run from a second thread while the first runs its own. */
static void *other_caller(void *arg)
{
    atomic_int *bad = arg;
    for (int k = 0; k < 3000; k++)
        if (job_ok(100 + k % 50, 2, 0, k % 7 == 0 ? 33 : -1))
            atomic_fetch_add(bad, 1);
    return NULL;
}

START_TEST(two_callers_at_once)
{
    dsv4_set_threads(3);
    atomic_int bad;
    atomic_init(&bad, 0);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, other_caller, &bad), 0);
    for (int k = 0; k < 3000; k++)
        ck_assert_int_eq(job_ok(100 + k % 61, 3, 0, k % 5 == 0 ? 71 : -1), 0);
    pthread_join(t, NULL);
    ck_assert_int_eq(atomic_load(&bad), 0);
    dsv4_set_threads(0);
}
END_TEST

/* The child of a fork has none of its parent's workers: its jobs must
 * still finish (on a pool it builds) and be right, before and after it
 * changes the thread count, and the parent's pool must go on working. */
static int child_jobs(void)
{
    for (int k = 0; k < 500; k++)
        if (job_ok(300 + k, 1 + k % 4, 0, k % 11 == 0 ? 17 : -1))
            return 10 + k % 10;
    dsv4_set_threads(6);
    for (int k = 0; k < 500; k++)
        if (job_ok(300 + k, 1 + k % 4, DSV4_PAR_BLAS, -1))
            return 20;
    return 0;
}

/* The child's exit status, or -1 if it has not exited within 120 s (a
 * child waiting on workers that do not exist there): it is then killed. */
static int wait_child(pid_t pid)
{
    for (int ms = 0; ms < 120000; ms += 10) {
        int status = 0;
        const pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
        if (r < 0)
            return -2;
        nanosleep(&(struct timespec){0, 10000000}, NULL);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -1;
}

START_TEST(fork_child_rebuilds_the_pool)
{
    dsv4_set_threads(4);
    ck_assert_int_eq(job_ok(5000, 3, 0, -1), 0); /* the parent's pool exists */
    for (int round = 0; round < 3; round++) {
        fflush(NULL);
        const pid_t pid = fork();
        ck_assert_int_ne(pid, -1);
        if (pid == 0) {
            const int rc = child_jobs();
            if (rc == 0) { /* a grandchild too: the child's pool is forked again */
                const pid_t g = fork();
                if (g == 0)
                    _exit(child_jobs());
                if (g < 0 || wait_child(g) != 0)
                    _exit(30);
            }
            /* _exit, as the harness's children leave: a sanitizer's exit-time
             * leak scan in a fork's child lists the parent's threads */
            _exit(rc);
        }
        for (int k = 0; k < 200; k++) /* the parent meanwhile */
            ck_assert_int_eq(job_ok(2000 + k, 5, 0, -1), 0);
        const int status = wait_child(pid);
        ck_assert_msg(status == 0, "child: exit status %d (-1: hung, killed)", status);
        ck_assert_int_eq(job_ok(5000, 3, 0, 4999), 0);
    }
    dsv4_set_threads(0);
}
END_TEST

/* Shapes that split into many work items for every parallelized op. */
static const char medium_suite[] =
    "suite: medium\n"
    "defaults: {seed: 5}\n"
    "cases:\n"
    "  - {name: mx4, op: mxfp4_quant, params: {T: 300, W: 2048, special: all}}\n"
    "  - {name: mx4_f32, op: mxfp4_quant, variant: \"scale_rule=ceil_log2_f32,e2m1=threshold\","
    " params: {T: 300, W: 1024, dtype: float32, scale: 30}}\n"
    "  - {name: mx8, op: mxfp8_quant, params: {T: 300, W: 2048, special: all}}\n"
    "  - {name: gq, op: fp8_group_quant, variant: \"impl=triton,fp8=fnuz\", params: {M: 300, K: 2048, special: all}}\n"
    "  - {name: fq, op: fused_qk_rmsnorm_group_quant, params: {m: 203, n1: 1536, n2: 512}}\n"
    "  - {name: ins, op: quantize_and_insert_k_cache, params: {block_size: 64, query_lens: [700, 5, 300],"
    " prefix_lens: [60, 0, 127], invalid_frac: 0.15, pad_tokens: 3}}\n"
    "  - {name: gat, op: dequantize_and_gather_k_cache, params: {block_size: 64, offset: 3,"
    " req_seq_lens: [1500, 700, 3, 400], req_gather_lens: [800, 700, 3, 0]}}\n"
    "  - {name: comb, op: combine_topk_swa_indices, params: {compress_ratio: 4, topk: 512, window_size: 128,"
    " invalid_frac: 0.1, query_lens: [1, 300, 1, 900], prefix_lens: [700, 300, 9000, 40]}}\n"
    "  - {name: gtk, op: compute_global_topk_ragged_indices_and_indptr, params: {block_size: 64, compress_ratio: 4,"
    " topk: 512, invalid_token_frac: 0.2, hole_frac: 0.05, query_lens: [400, 1, 700], prefix_lens: [3000, 9000, 0]}}\n"
    "  - {name: pft, op: build_prefill_topk_ragged_indices, variant: \"invalid=drop\", params: {block_size: 64,"
    " compress_ratio: 4, topk_width: 512, fail_frac: 0.3, query_lens: [600, 500], prefix_lens: [3000, 100]}}\n"
    "  - {name: attn, op: rocm_sparse_attn_prefill, params: {num_heads: 8, compress_ratio: 4, topk: 64,"
    " window_size: 16, query_lens: [30, 20], prefix_lens: [600, 0]}}\n"
    "  - {name: paged, op: rocm_sparse_attn_decode, params: {num_heads: 8, compress_ratio: 4, topk: 64,"
    " window_size: 16, query_lens: [1, 1, 1, 1, 1, 1], prefix_lens: [300, 70, 900, 5, 260, 1000]}}\n"
    "  - {name: ropemx, op: rocm_inverse_rope_mxfp8_rows, params: {num_tokens: 200, num_heads: 4}}\n"
    "  - {name: gemm, op: gemm_a8w8_blockscale, params: {M: 300, N: 600, K: 384}}\n"
    "  - {name: gemm32, op: gemm_a8w8_blockscale, params: {M: 600, N: 272, K: 256, ref_accum: f32}}\n"
    "  - {name: woa, op: rocm_mxfp8_wo_a_bmm, params: {num_tokens: 270, n_local_groups: 2, o_lora_rank: 300, K: 128}}\n"
    "  - {name: ein, op: rocm_inv_rope_einsum, params: {num_tokens: 9, num_heads: 4, n_local_groups: 2,"
    " o_lora_rank: 40, inverse_rope: 1}}\n"
    "  - {name: qni, op: fused_qnorm_rope_kv_insert, params: {num_tokens: 100, num_heads: 6, num_blocks: 3}}\n"
    "  - {name: kst, op: rocm_mxfp4_indexer_k_store, params: {query_lens: [300, 200], prefix_lens: [100, 0]}}\n"
    "  - {name: qq, op: rocm_mxfp4_indexer_q_quant, params: {T: 70, H: 64}}\n"
    "  - {name: logits, op: paged_mxfp4_mqa_logits, params: {heads: 64, seq_lens: [5000, 300, 2600],"
    " query_lens: [20, 1, 3]}}\n"
    "  - {name: logits_dec, op: paged_mxfp4_mqa_logits, variant: \"mode=faithful\", params: {heads: 32,"
    " seq_lens: [9000], query_lens: [1]}}\n"
    "  - {name: logits_batch, op: paged_mxfp4_mqa_logits, params: {heads: 64, wild: 2, seq_lens: [6000, 3000,"
    " 9000, 17, 4100, 40], query_lens: [1, 1, 2, 1, 8, 9]}}\n";

/* The reference's outputs of case i at n threads (the caller frees them). */
static void reference_at(const dsv4_case *c, int n, dsv4_tensors *in, dsv4_tensors *out)
{
    dsv4_opctx ctx = dsv4_opctx_make(c->op, &c->params, c->variant, c->seed);
    dsv4_status st = {0};
    memset(out, 0, sizeof *out);
    dsv4_set_threads(n);
    int rc = dsv4_reference_outputs(c->op, &ctx, in, out, &st);
    dsv4_set_threads(0);
    ck_assert_msg(rc == DSV4_OK, "%s at %d threads: %s", c->name, n, st.msg);
}

START_TEST(references_bit_identical_across_thread_counts)
{
    dsv4_suite s;
    dsv4_status st = {0};
    ck_assert_msg(dsv4_suite_load_buffer("medium.yaml", medium_suite, sizeof medium_suite - 1, &s, &st) == DSV4_OK,
                  "%s", st.msg);
    for (int i = 0; i < s.n; i++) {
        const dsv4_case *c = &s.cases[i];
        dsv4_opctx ctx = dsv4_opctx_make(c->op, &c->params, c->variant, c->seed);
        dsv4_tensors in = {0}, first;
        ck_assert_msg(c->op->generate(&ctx, &in, &st) == DSV4_OK, "%s: %s", c->name, st.msg);
        reference_at(c, 1, &in, &first);
        for (size_t k = 1; k < sizeof thread_counts / sizeof thread_counts[0]; k++) {
            dsv4_tensors again;
            reference_at(c, thread_counts[k], &in, &again);
            ck_assert_int_eq(again.n, first.n);
            for (int t = 0; t < first.n; t++) {
                ck_assert_uint_eq(again.t[t].nbytes, first.t[t].nbytes);
                ck_assert_msg(memcmp(again.t[t].data, first.t[t].data, first.t[t].nbytes) == 0,
                              "%s: output %s differs between 1 and %d threads", c->name, first.t[t].name,
                              thread_counts[k]);
            }
            dsv4_tensors_free(&again);
        }
        dsv4_tensors_free(&first);
        dsv4_tensors_free(&in);
    }
    dsv4_suite_free(&s);
}
END_TEST

DSV4_TEST_MAIN("parallel", "parallel", 600, NULL, NULL, every_item_once, first_failure_in_item_order,
               nested_calls_run_serially, many_tiny_jobs, failing_jobs_leave_the_pool_usable,
               thread_count_changes_between_jobs, two_callers_at_once, fork_child_rebuilds_the_pool,
               references_bit_identical_across_thread_counts)
