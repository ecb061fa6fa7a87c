/* parallel.c - -j N with forked worker processes.
 *
 * Why processes, not threads: the implementation under test is a plug-in
 * whose ABI (dsv4_plugin.h) makes no thread-safety promise, and a GPU
 * runtime must not be initialised before fork(), so each worker opens the
 * backend itself after the fork; HDF5 serialises its calls anyway, and the
 * reference's memory accounting (ref/tensor.c) stays per process.  The
 * plug-in itself runs in a child process of its worker (or of this process
 * at -j 1: isolate.h), so a crash in a kernel is the error of one case; a
 * worker that dies (a harness bug) is reported against its cases.  Workers
 * die with this process (PR_SET_PDEATHSIG), and their children with them.
 *
 * Worker w runs jobs w, w+N, w+2N, ... in order and writes each result
 * (the struct, then its error maps) to its own pipe; the parent reads job
 * i from worker i mod N, so results come back in job order without a
 * queue, and every job runs exactly as it would with -j 1. */
#define _POSIX_C_SOURCE 200809L
#include "parallel.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "isolate.h"

/* All n bytes written from out (when given) or read into in; -1 when the
 * other end is gone. */
static int transfer_all(int fd, const char *out, char *in, size_t n)
{
    for (size_t done = 0; done < n;) {
        ssize_t k = out ? write(fd, out + done, n - done) : read(fd, in + done, n - done);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        done += (size_t)k;
    }
    return 0;
}

static int write_all(int fd, const void *buf, size_t n) { return transfer_all(fd, buf, NULL, n); }
static int read_all(int fd, void *buf, size_t n) { return transfer_all(fd, NULL, buf, n); }

typedef struct open_msg {
    int code;
    char msg[sizeof(((dsv4_status *)0)->msg)];
} open_msg;

static int run_serial(int n, const char *impl, int device, double timeout_s, dsv4_job_fn run,
                      dsv4_done_fn done, void *ctx, dsv4_case_result *rs, dsv4_status *st)
{
    dsv4_backend b;
    int rc = dsv4_backend_open_isolated(impl, device, timeout_s, &b, st);
    if (rc)
        return rc;
    for (int i = 0; i < n; i++) {
        memset(&rs[i], 0, sizeof rs[i]);
        run(ctx, i, &b, &rs[i]);
        done(ctx, i, &rs[i]);
    }
    dsv4_backend_close(&b);
    return DSV4_OK;
}

/* The worker's whole life; it ends with _exit so that the parent's stdio
 * buffers and atexit handlers are not run twice. */
static void worker(int w, int jobs, int n, const char *impl, int device, double timeout_s, dsv4_job_fn run,
                   void *ctx, int fd)
{
    dsv4_backend b;
    dsv4_status st = {0};
    open_msg om;
    memset(&om, 0, sizeof om);
    om.code = dsv4_backend_open_isolated(impl, device, timeout_s, &b, &st);
    snprintf(om.msg, sizeof om.msg, "%s", st.msg);
    if (write_all(fd, &om, sizeof om) || om.code)
        _exit(om.code ? 0 : 1);
    dsv4_case_result *r = malloc(sizeof *r);
    int bad = r == NULL;
    for (int i = w; i < n && !bad; i += jobs) {
        memset(r, 0, sizeof *r);
        run(ctx, i, &b, r);
        bad = write_all(fd, r, sizeof *r) != 0;
        for (int k = 0; k < r->n_outputs && !bad; k++)
            if (r->outputs[k].map)
                bad = write_all(fd, r->outputs[k].map, sizeof *r->outputs[k].map) != 0;
        dsv4_result_free_maps(r);
    }
    free(r);
    dsv4_backend_close(&b);
    close(fd);
    _exit(bad);
}

/* Reads job i's result; a dead worker gives an error result and -1. */
static int collect(int fd, const char *name, const char *why, dsv4_case_result *r)
{
    if (!why && read_all(fd, r, sizeof *r) == 0) {
        int ok = 1;
        for (int k = 0; k < r->n_outputs; k++) {
            if (!r->outputs[k].map)
                continue;
            r->outputs[k].map = ok ? malloc(sizeof *r->outputs[k].map) : NULL;
            if (!r->outputs[k].map || read_all(fd, r->outputs[k].map, sizeof *r->outputs[k].map)) {
                free(r->outputs[k].map);
                r->outputs[k].map = NULL;
                ok = 0;
            }
        }
        if (ok)
            return 0;
    }
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", name);
    r->status = DSV4_ERUNTIME;
    r->verdict = DSV4_FAIL;
    snprintf(r->error, sizeof r->error, "worker process died before reporting this case%s%s",
             why ? ": " : " (a crash in dsv4check itself: the implementation runs apart)", why ? why : "");
    return -1;
}

int dsv4_run_jobs(int n, int jobs, const char *impl, int device, double timeout_s, dsv4_job_fn run,
                  dsv4_done_fn done, dsv4_name_fn name, void *ctx, dsv4_case_result *rs, dsv4_status *st)
{
    if (jobs > n)
        jobs = n;
    if (jobs <= 1)
        return run_serial(n, impl, device, timeout_s, run, done, ctx, rs, st);
    int *fds = calloc((size_t)jobs, sizeof *fds);
    pid_t *pids = calloc((size_t)jobs, sizeof *pids);
    const char **dead = calloc((size_t)jobs, sizeof *dead);
    if (!fds || !pids || !dead) {
        free(fds), free(pids), free(dead);
        return dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
    }
    int started = 0, rc = DSV4_OK;
    pid_t parent = getpid();
    fflush(NULL);
    for (; started < jobs; started++) {
        int p[2];
        if (pipe(p) != 0) {
            rc = dsv4_fail(st, DSV4_ERUNTIME, "-j: pipe: %s", strerror(errno));
            break;
        }
        pid_t pid = fork();
        if (pid < 0) {
            close(p[0]), close(p[1]);
            rc = dsv4_fail(st, DSV4_ERUNTIME, "-j: fork: %s", strerror(errno));
            break;
        }
        if (pid == 0) {
            dsv4_die_with_parent(parent);
            close(p[0]);
            for (int k = 0; k < started; k++)
                close(fds[k]);
            int w = started;
            free(fds), free(pids), free(dead); /* the parent's */
            worker(w, jobs, n, impl, device, timeout_s, run, ctx, p[1]);
        }
        close(p[1]);
        fds[started] = p[0];
        pids[started] = pid;
    }
    /* Every worker opened the backend (or says why not) before any result. */
    for (int w = 0; w < started && !rc; w++) {
        open_msg om;
        if (read_all(fds[w], &om, sizeof om))
            rc = dsv4_fail(st, DSV4_ERUNTIME, "-j: worker %d died while opening %s", w, impl);
        else if (om.code)
            rc = dsv4_fail(st, om.code, "%s", om.msg);
    }
    for (int i = 0; i < n && !rc; i++) {
        int w = i % jobs;
        if (collect(fds[w], name(ctx, i), dead[w], &rs[i]) && !dead[w])
            dead[w] = "it stopped at an earlier case";
        done(ctx, i, &rs[i]);
    }
    for (int w = 0; w < started; w++) {
        close(fds[w]);
        if (rc)
            kill(pids[w], SIGTERM);
        int status;
        while (waitpid(pids[w], &status, 0) < 0 && errno == EINTR)
            ;
    }
    free(fds), free(pids), free(dead);
    return rc;
}

int dsv4_shard_parse(const char *s, int *k, int *n)
{
    char *end;
    errno = 0;
    long a = strtol(s, &end, 10);
    if (errno || end == s || *end != '/')
        return -1;
    const char *q = end + 1;
    long b = strtol(q, &end, 10);
    if (errno || end == q || *end || b < 1 || b > 1024 || a < 1 || a > b)
        return -1;
    *k = (int)a;
    *n = (int)b;
    return 0;
}

int dsv4_shard_of(const char *name, int n)
{
    uint64_t h = 0xCBF29CE484222325ull; /* FNV-1a-64, as the RNG's stream key (README "Inputs") */
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        h = (h ^ *p) * 0x100000001B3ull;
    return (int)(h % (uint64_t)n) + 1;
}
