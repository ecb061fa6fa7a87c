/* parallel.h - run N jobs (cases or golden files) on a backend, serially or
 * in forked worker processes (-j), reporting results in job order, and the
 * deterministic suite sharding of --shard K/N. */
#ifndef DSV4_PARALLEL_H
#define DSV4_PARALLEL_H

#include "runner.h"

/* Runs job i into r (r is zeroed first). */
typedef void (*dsv4_job_fn)(void *ctx, int i, const dsv4_backend *b, dsv4_case_result *r);
/* Called in job order, in the calling process, as each result is ready. */
typedef void (*dsv4_done_fn)(void *ctx, int i, const dsv4_case_result *r);
/* The name of job i (for the result of a job whose worker died). */
typedef const char *(*dsv4_name_fn)(void *ctx, int i);

/* Opens backend impl on device (in each worker when jobs > 1; a plug-in in
 * a child process of its own, each call into it limited to timeout_s
 * seconds), runs jobs 0..n-1 into rs[0..n-1] and calls done for each in
 * order.  Returns DSV4_OK, or the backend's open status (DSV4_ESKIP,
 * DSV4_EINPUT, ...) with st set, in which case no job ran. */
int dsv4_run_jobs(int n, int jobs, const char *impl, int device, double timeout_s, dsv4_job_fn run,
                  dsv4_done_fn done, dsv4_name_fn name, void *ctx, dsv4_case_result *rs, dsv4_status *st);

/* --shard K/N: "K/N" with 1 <= K <= N <= 1024. */
int dsv4_shard_parse(const char *s, int *k, int *n);
/* The shard (1..n) of a case: FNV-1a-64 of its name, mod n, plus 1.  A
 * case keeps its shard when others are added or removed. */
int dsv4_shard_of(const char *name, int n);

#endif
