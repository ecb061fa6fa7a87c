/* parallel.c - worker threads of the reference; see parallel.h.
 *
 * The workers are a persistent pool: created on the first parallel call,
 * grown when a call wants more of them, each asleep on its own condition
 * variable between jobs (after a short spin, since one job often follows
 * another within microseconds).  A caller hands its job to workers
 * 1..nw-1 one by one, runs worker 0's share itself, then waits for the
 * count of unfinished workers to reach zero.  One caller at a time: a
 * second thread that calls while a job is in flight runs its job serially.
 *
 * fork: only the forking thread exists in the child, so the child's pool
 * is reset to "none" (pthread_atfork) and rebuilt on its first parallel
 * call; the pool lock is held across fork so that the child never sees a
 * half-made change.  At exit the workers are stopped and joined. */
#define _POSIX_C_SOURCE 200809L
#include "parallel.h"

#include <cblas.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
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
    grain = grain < 1 ? 1 : grain;
    const int64_t chunks = (n + grain - 1) / grain; /* a worker per chunk at most */
    const int t = dsv4_threads();
    return chunks < t ? (int)chunks : t;
}

/* ---- one job ---- */

typedef struct par_job {
    dsv4_par_fn fn;
    void *ctx;
    int64_t n, grain, nchunks;
    atomic_llong next;      /* the next chunk to hand out */
    atomic_llong err_chunk; /* the first failing chunk so far (nchunks: none) */
    pthread_mutex_t mu;
    dsv4_status err;        /* its status */
} par_job;

/* Chunks go out in increasing order, so once a chunk after a failing one is
 * drawn, every later draw is too: the worker stops. */
static void run_chunks(par_job *j, int worker)
{
    for (;;) {
        const long long c = atomic_fetch_add(&j->next, 1);
        if (c >= j->nchunks || c > atomic_load(&j->err_chunk))
            break;
        const int64_t b = c * j->grain, e = b + j->grain < j->n ? b + j->grain : j->n;
        dsv4_status st = {0};
        if (j->fn(j->ctx, b, e, worker, &st) != DSV4_OK) {
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
}

/* ---- the pool ---- */

/* How long a worker spins on its job word before it sleeps, and how long a
 * caller spins on the unfinished count before it sleeps: a bit longer than
 * the serial work that usually separates two jobs of one op. */
#define SPIN_NS 50000

typedef struct pool_worker {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t wake;
    atomic_uint ticket;  /* bumped for each job handed to this worker */
    int sleeping;        /* under mu: waiting on wake */
    par_job *job;        /* the job of the latest ticket */
    int index;           /* its worker number in every job (1..) */
} pool_worker;

static struct {
    pthread_mutex_t mu; /* guards size, busy and growth */
    int size;           /* workers started */
    int allocated;      /* worker records in w (>= size; after a fork, records
                           of the parent's workers wait there to be reused) */
    int busy;           /* a caller's job is in flight */
    atomic_int stop;    /* at exit: workers return */
    pthread_mutex_t done_mu;
    pthread_cond_t done;
    atomic_int unfinished; /* workers of the current job still running it */
    pool_worker *w[MAX_WORKERS]; /* w[i] has index i + 1 */
} pool = {PTHREAD_MUTEX_INITIALIZER, 0, 0, 0, 0, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, {0}};

static pthread_once_t pool_once = PTHREAD_ONCE_INIT;

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* One step of a bounded spin: a pause at first, then a yield, so that on a
 * machine with more runnable threads than cores the spinner hands its core
 * to the thread it waits for.  Returns 0 once SPIN_NS have passed. */
static int spin_step(int k, long long end)
{
    if (k < 64) {
        cpu_relax();
        return 1;
    }
    sched_yield();
    return now_ns() < end;
}

/* Spins up to SPIN_NS until *word differs from old (returns 1), else 0. */
static int spin_until_changed(atomic_uint *word, unsigned old)
{
    const long long end = now_ns() + SPIN_NS;
    for (int k = 0;; k++) {
        if (atomic_load_explicit(word, memory_order_acquire) != old)
            return 1;
        if (!spin_step(k, end))
            return 0;
    }
}

static void finish_one(void)
{
    if (atomic_fetch_sub(&pool.unfinished, 1) == 1) {
        pthread_mutex_lock(&pool.done_mu);
        pthread_cond_signal(&pool.done);
        pthread_mutex_unlock(&pool.done_mu);
    }
}

static void *worker_main(void *p)
{
    pool_worker *w = p;
    inside_worker = 1;
    unsigned seen = 0;
    for (;;) {
        if (!spin_until_changed(&w->ticket, seen)) {
            pthread_mutex_lock(&w->mu);
            w->sleeping = 1;
            while (atomic_load(&w->ticket) == seen)
                pthread_cond_wait(&w->wake, &w->mu);
            w->sleeping = 0;
            pthread_mutex_unlock(&w->mu);
        }
        seen = atomic_load(&w->ticket);
        if (atomic_load(&pool.stop))
            return NULL;
        run_chunks(w->job, w->index);
        finish_one();
    }
}

static void hand_out(pool_worker *w, par_job *job)
{
    pthread_mutex_lock(&w->mu);
    w->job = job;
    atomic_fetch_add_explicit(&w->ticket, 1, memory_order_release);
    if (w->sleeping)
        pthread_cond_signal(&w->wake);
    pthread_mutex_unlock(&w->mu);
}

/* Under pool.mu: starts workers until there are want (fewer if a thread
 * cannot start; the jobs then use the ones there are). */
static void grow_locked(int want)
{
    while (pool.size < want) {
        pool_worker *w = pool.size < pool.allocated ? pool.w[pool.size] : calloc(1, sizeof *w);
        if (!w)
            return;
        if (pool.size == pool.allocated)
            pool.w[pool.allocated++] = w;
        /* a reused record (a fork's child) is all new: its thread is gone */
        *w = (pool_worker){.index = pool.size + 1};
        atomic_init(&w->ticket, 0);
        if (pthread_mutex_init(&w->mu, NULL))
            return;
        if (pthread_cond_init(&w->wake, NULL)) {
            pthread_mutex_destroy(&w->mu);
            return;
        }
        if (pthread_create(&w->thread, NULL, worker_main, w)) {
            pthread_cond_destroy(&w->wake);
            pthread_mutex_destroy(&w->mu);
            return;
        }
        pool.size++;
    }
}

static void before_fork(void)
{
    pthread_mutex_lock(&pool.mu);
}

static void after_fork_parent(void)
{
    pthread_mutex_unlock(&pool.mu);
}

/* The child: none of the workers exists (their records stay, to be reused
 * and freed), and a job that was in flight in another thread of the parent
 * has no caller here. */
static void after_fork_child(void)
{
    pool.size = 0;
    pool.busy = 0;
    atomic_store(&pool.unfinished, 0);
    pthread_mutex_init(&pool.done_mu, NULL);
    pthread_cond_init(&pool.done, NULL);
    pthread_mutex_init(&pool.mu, NULL);
}

/* Stops and joins the workers, unless a job is in flight (an exit from
 * another thread or from inside a job: the process ends them). */
static void pool_destroy(void)
{
    pthread_mutex_lock(&pool.mu);
    if (pool.busy || inside_worker) {
        pthread_mutex_unlock(&pool.mu);
        return;
    }
    atomic_store(&pool.stop, 1);
    for (int i = 0; i < pool.size; i++)
        hand_out(pool.w[i], NULL);
    for (int i = 0; i < pool.allocated; i++) {
        pool_worker *w = pool.w[i];
        if (i < pool.size) {
            pthread_join(w->thread, NULL);
            pthread_cond_destroy(&w->wake);
            pthread_mutex_destroy(&w->mu);
        }
        free(w);
        pool.w[i] = NULL;
    }
    pool.size = pool.allocated = 0;
    atomic_store(&pool.stop, 0);
    pthread_mutex_unlock(&pool.mu);
}

static void pool_init(void)
{
    pthread_atfork(before_fork, after_fork_parent, after_fork_child);
    atexit(pool_destroy);
}

/* Takes the pool for a job of nw workers: the workers it may use (>= 1; 1
 * when another caller holds it). */
static int pool_acquire(int nw)
{
    pthread_once(&pool_once, pool_init);
    pthread_mutex_lock(&pool.mu);
    if (pool.busy) {
        pthread_mutex_unlock(&pool.mu);
        return 1;
    }
    grow_locked(nw - 1);
    const int have = pool.size + 1;
    pool.busy = have > 1;
    pthread_mutex_unlock(&pool.mu);
    return nw < have ? nw : have;
}

static void pool_release(void)
{
    pthread_mutex_lock(&pool.mu);
    pool.busy = 0;
    pthread_mutex_unlock(&pool.mu);
}

static void wait_workers(void)
{
    const long long end = now_ns() + SPIN_NS;
    for (int k = 0; atomic_load(&pool.unfinished) > 0 && spin_step(k, end); k++)
        ;
    pthread_mutex_lock(&pool.done_mu);
    while (atomic_load(&pool.unfinished) > 0)
        pthread_cond_wait(&pool.done, &pool.done_mu);
    pthread_mutex_unlock(&pool.done_mu);
}

int dsv4_parallel_for(int64_t n, int64_t grain, int flags, dsv4_par_fn fn, void *ctx, dsv4_status *st)
{
    if (n <= 0)
        return DSV4_OK;
    grain = grain < 1 ? 1 : grain;
    int nw = dsv4_parallel_workers(n, grain);
    if (nw > 1)
        nw = pool_acquire(nw);
    if (nw <= 1) /* the serial loop itself, in one call */
        return fn(ctx, 0, n, 0, st);
    par_job job = {fn, ctx, n, grain, (n + grain - 1) / grain, 0, 0, PTHREAD_MUTEX_INITIALIZER, {0}};
    atomic_init(&job.next, 0);
    atomic_init(&job.err_chunk, job.nchunks);
    const int blas = (flags & DSV4_PAR_BLAS) != 0;
    const int blas_threads = blas ? openblas_get_num_threads() : 0;
    if (blas)
        openblas_set_num_threads(1);
    atomic_store(&pool.unfinished, nw - 1);
    for (int i = 0; i < nw - 1; i++)
        hand_out(pool.w[i], &job);
    inside_worker = 1;
    run_chunks(&job, 0);
    inside_worker = 0;
    wait_workers();
    if (blas)
        openblas_set_num_threads(blas_threads);
    pool_release();
    pthread_mutex_destroy(&job.mu);
    if (atomic_load(&job.err_chunk) < job.nchunks) {
        if (st)
            *st = job.err;
        return job.err.code;
    }
    return DSV4_OK;
}
