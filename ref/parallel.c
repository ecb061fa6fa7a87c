/* parallel.c - worker threads of the reference; see parallel.h. */
#define _POSIX_C_SOURCE 200809L
#include "parallel.h"

#include <cblas.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#define MAX_WORKERS DSV4_MAX_THREADS

static pthread_once_t default_once = PTHREAD_ONCE_INIT;
static int default_threads = 1;
static int override_threads; /* 0: the default */
static _Thread_local int inside_worker;

static int env_count(const char *name)
{
    const char *s = getenv(name);
    char *end;
    long v = s && *s ? strtol(s, &end, 10) : 0;
    return s && *s && *end == '\0' && v >= 1 ? (int)(v < MAX_WORKERS ? v : MAX_WORKERS) : 0;
}

static void init_default(void)
{
    int n = env_count("DSV4_THREADS");
    if (n) {
        openblas_set_num_threads(n); /* one count for the whole reference */
    } else {
        n = env_count("OPENBLAS_NUM_THREADS");
        if (!n) {
            long cpus = sysconf(_SC_NPROCESSORS_ONLN);
            n = cpus < 1 ? 1 : cpus > MAX_WORKERS ? MAX_WORKERS : (int)cpus;
        }
    }
    default_threads = n;
}

int dsv4_threads(void)
{
    pthread_once(&default_once, init_default);
    return override_threads > 0 ? override_threads : default_threads;
}

void dsv4_set_threads(int n)
{
    pthread_once(&default_once, init_default);
    override_threads = n >= 1 ? (n < MAX_WORKERS ? n : MAX_WORKERS) : 0;
    openblas_set_num_threads(dsv4_threads());
}

int dsv4_parallel_workers(int64_t n, int64_t grain)
{
    if (inside_worker || n <= 0)
        return 1;
    const int64_t chunks = (n + (grain < 1 ? 1 : grain) - 1) / (grain < 1 ? 1 : grain);
    const int t = dsv4_threads();
    return chunks < t ? (int)chunks : t;
}

typedef struct par_job {
    dsv4_par_fn fn;
    void *ctx;
    int64_t n, grain, nchunks;
    atomic_llong next;      /* the next chunk to hand out */
    atomic_llong err_chunk; /* the first failing chunk so far (nchunks: none) */
    pthread_mutex_t mu;
    dsv4_status err;        /* its status */
} par_job;

typedef struct par_worker {
    par_job *job;
    int index;
} par_worker;

/* Chunks go out in increasing order, so once a chunk after a failing one is
 * drawn, every later draw is too: the worker stops. */
static void *worker_main(void *p)
{
    const par_worker *w = p;
    par_job *j = w->job;
    inside_worker = 1;
    for (;;) {
        const long long c = atomic_fetch_add(&j->next, 1);
        if (c >= j->nchunks || c > atomic_load(&j->err_chunk))
            break;
        const int64_t b = c * j->grain, e = b + j->grain < j->n ? b + j->grain : j->n;
        dsv4_status st = {0};
        if (j->fn(j->ctx, b, e, w->index, &st) != DSV4_OK) {
            pthread_mutex_lock(&j->mu);
            if (c < atomic_load(&j->err_chunk)) {
                atomic_store(&j->err_chunk, c);
                j->err = st;
                if (!j->err.code)
                    j->err.code = DSV4_ERUNTIME;
            }
            pthread_mutex_unlock(&j->mu);
            break;
        }
    }
    return NULL;
}

int dsv4_parallel_for(int64_t n, int64_t grain, int flags, dsv4_par_fn fn, void *ctx, dsv4_status *st)
{
    if (n <= 0)
        return DSV4_OK;
    grain = grain < 1 ? 1 : grain;
    const int nw = dsv4_parallel_workers(n, grain);
    if (nw <= 1)
        return fn(ctx, 0, n, 0, st);
    par_job job = {fn, ctx, n, grain, (n + grain - 1) / grain, 0, 0, PTHREAD_MUTEX_INITIALIZER, {0}};
    atomic_init(&job.next, 0);
    atomic_init(&job.err_chunk, job.nchunks);
    par_worker workers[MAX_WORKERS];
    pthread_t threads[MAX_WORKERS];
    int started[MAX_WORKERS] = {0};
    const int blas = (flags & DSV4_PAR_BLAS) != 0;
    const int blas_threads = blas ? openblas_get_num_threads() : 0;
    if (blas)
        openblas_set_num_threads(1);
    for (int i = 0; i < nw; i++) {
        workers[i] = (par_worker){&job, i};
        /* a worker that cannot start leaves its chunks to the others */
        started[i] = i > 0 && pthread_create(&threads[i], NULL, worker_main, &workers[i]) == 0;
    }
    worker_main(&workers[0]);
    inside_worker = 0;
    for (int i = 1; i < nw; i++)
        if (started[i])
            pthread_join(threads[i], NULL);
    if (blas)
        openblas_set_num_threads(blas_threads);
    pthread_mutex_destroy(&job.mu);
    if (atomic_load(&job.err_chunk) < job.nchunks) {
        if (st)
            *st = job.err;
        return job.err.code;
    }
    return DSV4_OK;
}
