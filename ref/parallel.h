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
 * single-threaded (DSV4_PAR_BLAS), since they already use every core.
 *
 * The workers are a pool, started by the first parallel call and grown
 * when the thread count rises; between jobs each spins for about 50 us
 * (yielding its core) and then sleeps.  One job at a time: a call from a
 * second thread while a job is in flight runs serially on that thread.
 * After fork the child has no workers; its first parallel call starts its
 * own (a job in flight in the parent, or a fork from inside a job, is not
 * carried over).  The workers are joined at exit. */
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

/* Workers dsv4_parallel_for will use for n items in chunks of grain:
 * min(threads, ceil(n / grain)), 1 inside a worker.  For sizing per-worker
 * scratch. */
int dsv4_parallel_workers(int64_t n, int64_t grain);

/* Runs fn over [0, n) in chunks of grain items (grain >= 1), handed out in
 * order to the workers.  Returns the error of the failing chunk that comes
 * first in item order (the error a serial loop would report), else DSV4_OK.
 *
 * The grain is the least work worth a worker of its own: a job of c chunks
 * wakes at most c - 1 workers, so a job that is one chunk runs serially on
 * the caller with no hand-out at all.  Pick it so that one chunk costs well
 * over a job's hand-out: on a 16-core host about 1 us for two workers and
 * 8 to 15 us for sixteen when they are still spinning from the job before,
 * more when they have gone to sleep.  Asking for at least 2 or 4 chunks a
 * worker measured slower there (a 4-chunk top-k job lost half its speed). */
int dsv4_parallel_for(int64_t n, int64_t grain, int flags, dsv4_par_fn fn, void *ctx, dsv4_status *st);

#endif
