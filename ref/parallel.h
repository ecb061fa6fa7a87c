/* parallel.h - the reference's worker threads.
 *
 * A parallel for over independent items (rows, tokens, requests, output
 * tiles): every item is computed whole by one thread with the same code a
 * serial loop runs, never a reduction split across threads, so outputs are
 * bit-identical for every thread count.
 *
 * The thread count is DSV4_THREADS from the environment, else
 * OPENBLAS_NUM_THREADS (so that a run pinned to one BLAS thread stays on one
 * thread), else the online CPUs; dsv4_set_threads overrides it and sets
 * OpenBLAS's count to the same value.  Calls made from inside a worker run
 * serially (no nested threads).  Workers that call BLAS run it
 * single-threaded (DSV4_PAR_BLAS), since they already use every core. */
#ifndef DSV4_PARALLEL_H
#define DSV4_PARALLEL_H

#include <stdint.h>

#include "status.h"

/* The most threads (and so workers) a parallel call uses. */
#define DSV4_MAX_THREADS 256

/* Threads the next parallel call may use (>= 1). */
int dsv4_threads(void);
/* n >= 1: use n threads (and n OpenBLAS threads); n <= 0: back to the
 * default.  Not thread-safe: call between reference runs. */
void dsv4_set_threads(int n);

/* Items [begin, end) on worker `worker` (0 <= worker < the count that
 * dsv4_parallel_workers returned).  Returns DSV4_OK or an error code with st
 * filled; the items after a failing one need not be computed. */
typedef int (*dsv4_par_fn)(void *ctx, int64_t begin, int64_t end, int worker, dsv4_status *st);

enum { DSV4_PAR_BLAS = 1 }; /* the items call BLAS: one BLAS thread per worker */

/* A job's worker count: each worker should get at least this many chunks
 * of the caller's grain, so a job that is only a few chunks does not wake
 * more workers than its work pays for (see dsv4_parallel_workers). */
#define DSV4_PAR_MIN_CHUNKS 1

/* Workers dsv4_parallel_for will use for n items in chunks of grain: with
 * c = ceil(n / grain) chunks, min(threads, c) for c <= 2, else
 * min(threads, max(2, ceil(c / DSV4_PAR_MIN_CHUNKS))); 1 inside a worker.
 * For sizing per-worker scratch. */
int dsv4_parallel_workers(int64_t n, int64_t grain);

/* Runs fn over [0, n) in chunks of grain items (grain >= 1), handed out in
 * order to the workers.  Returns the error of the failing chunk that comes
 * first in item order (the error a serial loop would report), else DSV4_OK. */
int dsv4_parallel_for(int64_t n, int64_t grain, int flags, dsv4_par_fn fn, void *ctx, dsv4_status *st);

#endif
