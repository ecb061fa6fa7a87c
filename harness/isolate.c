/* isolate.c - the child process that hosts an implementation under test,
 * and the parent's side of it: a socket carries one request per run (op,
 * variant, params, seed, inputs, initial outputs) and one reply (code,
 * message, outputs).  Every wait of the parent has a deadline, so a child
 * that hangs is killed, and a child that ends is reaped and described. */
#define _GNU_SOURCE
#include "isolate.h"

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WIRE_MAGIC 0x64737634u /* "dsv4" */
#define NAME_LEN 256
#define CASE_LEN 192   /* a case name with its NUL (dsv4_case.name) */
#define GOLDEN_LEN 512 /* a golden path with its NUL (DSV4_PATH_MAX) */

typedef struct wire_hello {
    int32_t code;     /* DSV4_OK or the implementation's refusal */
    int32_t nsupport; /* bytes of the supports table that follow */
    char name[NAME_LEN];
    char msg[sizeof(((dsv4_status *)0)->msg)];
} wire_hello;

typedef struct wire_request {
    uint32_t magic;
    int32_t op; /* registry index (parent and child share the registry) */
    int32_t variant;
    int32_t nin, nout;
    uint64_t seed;
    dsv4_params params;
    int32_t has_case, has_golden; /* 0: NULL */
    int32_t zeroed_input, zeroed_sides; /* dsv4_guard_fill (sides 0: none) */
    char case_name[CASE_LEN];
    char golden[GOLDEN_LEN];
} wire_request;

typedef struct wire_tensor {
    char name[DSV4_NAME_MAX];
    int32_t dtype, output_dtype, ndim;
    int64_t shape[DSV4_MAX_DIMS];
    uint64_t nbytes;
} wire_tensor;

typedef struct wire_reply {
    int32_t code;
    char msg[sizeof(((dsv4_status *)0)->msg)];
} wire_reply;

struct dsv4_isolated {
    dsv4_child_impl impl;
    char label[NAME_LEN];
    char name[NAME_LEN];
    double timeout_s;
    pid_t pid;         /* 0: no child running */
    int fd;
    unsigned char *support; /* one byte per (op, variant), in registry order */
    int nsupport;
    char broken[700];  /* non-empty: no child can be started; every run says why */
};

/* ---- I/O with a deadline ------------------------------------------------ */

enum { IO_OK = 0, IO_CLOSED = -1, IO_TIMEOUT = -2 };

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Waits for fd to be readable (or writable); deadline 0 = no deadline. */
static int wait_fd(int fd, short events, double deadline)
{
    for (;;) {
        int ms = -1;
        if (deadline > 0) {
            double left = deadline - now_s();
            if (left <= 0)
                return IO_TIMEOUT;
            ms = left > 1e6 ? 1000000000 : (int)ceil(left * 1000);
        }
        struct pollfd p = {fd, events, 0};
        int r = poll(&p, 1, ms);
        if (r > 0)
            return IO_OK;
        if (r < 0 && errno != EINTR)
            return IO_CLOSED;
    }
}

/* All n bytes sent from out (when given) or received into in over fd by
 * deadline.  MSG_NOSIGNAL: a dead peer is an error here, not a SIGPIPE. */
static int transfer_all(int fd, const char *out, char *in, size_t n, double deadline)
{
    for (size_t done = 0; done < n;) {
        int w = wait_fd(fd, out ? POLLOUT : POLLIN, deadline);
        if (w)
            return w;
        ssize_t k = out ? send(fd, out + done, n - done, MSG_NOSIGNAL) : recv(fd, in + done, n - done, 0);
        if (k < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (k <= 0)
            return IO_CLOSED;
        done += (size_t)k;
    }
    return IO_OK;
}

static int send_all(int fd, const void *buf, size_t n, double deadline)
{
    return transfer_all(fd, buf, NULL, n, deadline);
}
static int recv_all(int fd, void *buf, size_t n, double deadline) { return transfer_all(fd, NULL, buf, n, deadline); }

/* ---- the child ---------------------------------------------------------- */

void dsv4_die_with_parent(pid_t parent)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) /* it died before the line above */
        _exit(127);
}

/* The child starts with the signal handlers exec would leave it: a crash
 * of the implementation ends it by its signal, whatever handlers (a
 * sanitizer's, say) the harness installed. */
static void default_signal_handlers(void)
{
    for (int sig = 1; sig < NSIG; sig++) {
        struct sigaction sa;
        if (sig == SIGKILL || sig == SIGSTOP || sigaction(sig, NULL, &sa) != 0)
            continue;
        int handled = (sa.sa_flags & SA_SIGINFO) || (sa.sa_handler != SIG_IGN && sa.sa_handler != SIG_DFL);
        if (handled)
            signal(sig, SIG_DFL);
    }
}

/* Only the socket (and stdio) stay open in the child: a pipe of the parent
 * held open here would hide the death of a -j worker from its parent. */
static void close_other_fds(int keep)
{
    if (keep < 3) /* stdio was closed: leave everything as it is */
        return;
    if (keep > 3)
        close_range(3, (unsigned)keep - 1, 0);
    if (close_range((unsigned)keep + 1, ~0u, 0) != 0)
        for (int fd = keep + 1; fd < 4096; fd++)
            close(fd);
}

static int op_index(const dsv4_op *op)
{
    for (int i = 0; i < dsv4_op_count(); i++)
        if (dsv4_op_at(i) == op)
            return i;
    return -1;
}

static int support_count(void)
{
    int n = 0;
    for (int i = 0; i < dsv4_op_count(); i++)
        n += dsv4_op_variant_count(dsv4_op_at(i));
    return n;
}

static size_t page_round(size_t n)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    return (n + page - 1) / page * page;
}

/* The child's copy of one request; inputs live in read-only mappings, so
 * that the copy the implementation's inputs are checked against is safe
 * from stray writes. */
typedef struct child_case {
    wire_request rq;
    dsv4_tensors in, out;
    size_t in_map[DSV4_MAX_TENSORS];
} child_case;

static void child_case_free(child_case *cc)
{
    for (int k = 0; k < cc->in.n; k++)
        if (cc->in.t[k].data)
            munmap(cc->in.t[k].data, cc->in_map[k]);
    for (int k = 0; k < cc->out.n; k++)
        free(cc->out.t[k].data);
    cc->in.n = cc->out.n = 0;
}

static int recv_tensor(int fd, dsv4_tensor *t, int input, size_t *mapped)
{
    wire_tensor w;
    if (recv_all(fd, &w, sizeof w, 0))
        return -1;
    if (w.ndim < 0 || w.ndim > DSV4_MAX_DIMS || w.nbytes > ((uint64_t)1 << 46))
        return -1;
    memset(t, 0, sizeof *t);
    memcpy(t->name, w.name, sizeof t->name);
    t->name[sizeof t->name - 1] = '\0';
    t->dtype = (dsv4_dtype)w.dtype;
    t->output_dtype = (dsv4_dtype)w.output_dtype;
    t->ndim = w.ndim;
    memcpy(t->shape, w.shape, sizeof t->shape);
    t->nbytes = (size_t)w.nbytes;
    if (input) {
        *mapped = page_round(t->nbytes ? t->nbytes : 1);
        void *p = mmap(NULL, *mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        t->data = p == MAP_FAILED ? NULL : p;
    } else {
        t->data = malloc(t->nbytes ? t->nbytes : 1);
    }
    if (!t->data || recv_all(fd, t->data, t->nbytes, 0))
        return -1;
    if (input)
        mprotect(t->data, *mapped, PROT_READ);
    return 0;
}

static int recv_case(int fd, child_case *cc)
{
    if (recv_all(fd, &cc->rq, sizeof cc->rq, 0) || cc->rq.magic != WIRE_MAGIC || cc->rq.op < 0 ||
        cc->rq.op >= dsv4_op_count() || cc->rq.variant < 0 ||
        cc->rq.variant >= dsv4_op_variant_count(dsv4_op_at(cc->rq.op)) || cc->rq.nin < 0 ||
        cc->rq.nin > DSV4_MAX_TENSORS || cc->rq.nout < 0 || cc->rq.nout > DSV4_MAX_TENSORS ||
        cc->rq.params.n < 0 || cc->rq.params.n > DSV4_MAX_PARAMS)
        return -1;
    /* n counts a tensor before its data arrives: child_case_free frees it. */
    for (int k = 0; k < cc->rq.nin; k++)
        if ((cc->in.n = k + 1, recv_tensor(fd, &cc->in.t[k], 1, &cc->in_map[k])))
            return -1;
    for (int k = 0; k < cc->rq.nout; k++)
        if ((cc->out.n = k + 1, recv_tensor(fd, &cc->out.t[k], 0, NULL)))
            return -1;
    return 0;
}

static int send_hello(int fd, const dsv4_child_impl *impl, int code, const dsv4_status *st)
{
    wire_hello h;
    memset(&h, 0, sizeof h);
    h.code = code;
    snprintf(h.msg, sizeof h.msg, "%s", st->msg);
    unsigned char *table = NULL;
    if (!code) {
        snprintf(h.name, sizeof h.name, "%s", impl->name(impl->arg));
        h.nsupport = support_count();
        table = calloc((size_t)h.nsupport + 1, 1);
        if (!table)
            return -1;
        for (int i = 0, j = 0; i < dsv4_op_count(); i++)
            for (int v = 0; v < dsv4_op_variant_count(dsv4_op_at(i)); v++)
                table[j++] = impl->supports(impl->arg, dsv4_op_at(i), v) != 0;
    }
    int bad = send_all(fd, &h, sizeof h, 0) || (table && send_all(fd, table, (size_t)h.nsupport, 0));
    free(table);
    return bad ? -1 : 0;
}

/* The child's whole life: load, report, serve runs until the parent closes
 * the socket.  It ends with _exit: the parent's stdio buffers and atexit
 * handlers are the parent's. */
static void child_main(int fd, const dsv4_child_impl *impl)
{
    dsv4_status st = {0};
    int code = impl->open(impl->arg, &st);
    if (send_hello(fd, impl, code, &st) || code)
        _exit(0);
    child_case *cc = calloc(1, sizeof *cc);
    while (cc && recv_case(fd, cc) == 0) {
        const dsv4_op *op = dsv4_op_at(cc->rq.op);
        dsv4_opctx ctx = dsv4_opctx_make(op, &cc->rq.params, cc->rq.variant, cc->rq.seed);
        wire_reply rp;
        memset(&rp, 0, sizeof rp);
        dsv4_status_clear(&st);
        cc->rq.case_name[CASE_LEN - 1] = cc->rq.golden[GOLDEN_LEN - 1] = '\0';
        const dsv4_guard_fill fill = {cc->rq.zeroed_input, cc->rq.zeroed_sides};
        rp.code = impl->run(impl->arg, op, &ctx, cc->rq.has_case ? cc->rq.case_name : NULL,
                            cc->rq.has_golden ? cc->rq.golden : NULL, &fill, &cc->in, &cc->out, &st);
        snprintf(rp.msg, sizeof rp.msg, "%s", st.msg);
        int bad = send_all(fd, &rp, sizeof rp, 0) != IO_OK;
        for (int k = 0; !bad && !rp.code && k < cc->out.n; k++)
            bad = send_all(fd, cc->out.t[k].data, cc->out.t[k].nbytes, 0) != IO_OK;
        child_case_free(cc);
        if (bad)
            break;
    }
    if (cc)
        child_case_free(cc);
    free(cc);
    impl->close(impl->arg);
    _exit(0);
}

/* ---- the parent --------------------------------------------------------- */

/* Reaps the child; one that outlives grace_s (it closed its socket but runs
 * on) is killed.  Describes how it ended into buf. */
static void reap(pid_t pid, double grace_s, char *buf, size_t len)
{
    int status = 0;
    double until = now_s() + grace_s;
    pid_t r;
    while ((r = waitpid(pid, &status, WNOHANG)) == 0 && now_s() < until) {
        struct timespec ten_ms = {0, 10000000};
        nanosleep(&ten_ms, NULL);
    }
    if (r == 0) {
        kill(pid, SIGKILL);
        while ((r = waitpid(pid, &status, 0)) < 0 && errno == EINTR)
            ;
    }
    if (r < 0)
        snprintf(buf, len, "ended (waitpid: %s)", strerror(errno));
    else if (WIFEXITED(status))
        snprintf(buf, len, "exited with status %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(buf, len, "was killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
    else
        snprintf(buf, len, "ended (wait status 0x%x)", (unsigned)status);
}

/* The child is gone or must go: kill it when timed_out, reap it, and say
 * how it ended ("exited with status 0", "timed out after 2 s ..."). */
static void end_child(dsv4_isolated *x, int timed_out, char *how, size_t len)
{
    if (timed_out)
        kill(x->pid, SIGKILL);
    char ended[160];
    reap(x->pid, timed_out ? 0 : 2.0, ended, sizeof ended);
    if (timed_out)
        snprintf(how, len, "timed out after %g s (--timeout) and was killed", x->timeout_s);
    else
        snprintf(how, len, "%s", ended);
    close(x->fd);
    x->fd = -1;
    x->pid = 0;
}

static double deadline_of(const dsv4_isolated *x) { return now_s() + x->timeout_s; }

/* Forks a child and reads its hello.  DSV4_OK (x->broken set when the
 * child did not report), or the implementation's refusal. */
static int start_child(dsv4_isolated *x, dsv4_status *st)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        snprintf(x->broken, sizeof x->broken, "%s: cannot start its process: socketpair: %s", x->label,
                 strerror(errno));
        return DSV4_OK;
    }
    fflush(NULL); /* an exit() in the child must not write our buffers again */
    pid_t parent = getpid(), pid = fork();
    if (pid < 0) {
        close(sv[0]), close(sv[1]);
        snprintf(x->broken, sizeof x->broken, "%s: cannot start its process: fork: %s", x->label,
                 strerror(errno));
        return DSV4_OK;
    }
    if (pid == 0) {
        dsv4_die_with_parent(parent);
        default_signal_handlers();
        close(sv[0]);
        close_other_fds(sv[1]);
        child_main(sv[1], &x->impl);
    }
    close(sv[1]);
    x->pid = pid;
    x->fd = sv[0];
    double deadline = deadline_of(x);
    wire_hello h;
    int io = recv_all(x->fd, &h, sizeof h, deadline);
    unsigned char *table = NULL;
    if (!io && !h.code) {
        table = malloc((size_t)(h.nsupport > 0 ? h.nsupport : 1));
        if (h.nsupport != support_count() || !table)
            io = IO_CLOSED;
        else
            io = recv_all(x->fd, table, (size_t)h.nsupport, deadline);
    }
    if (io) {
        char how[300];
        free(table);
        end_child(x, io == IO_TIMEOUT, how, sizeof how);
        snprintf(x->broken, sizeof x->broken,
                 "%s: the implementation's process %s while loading (in a constructor, "
                 "dsv4_plugin_entry, init or supports)",
                 x->label, how);
        return DSV4_OK;
    }
    h.msg[sizeof h.msg - 1] = '\0';
    h.name[sizeof h.name - 1] = '\0';
    if (h.code) {
        char ended[160];
        close(x->fd);
        x->fd = -1;
        reap(x->pid, 2.0, ended, sizeof ended);
        x->pid = 0;
        return dsv4_fail(st, h.code, "%s", h.msg[0] ? h.msg : "the implementation refused to load");
    }
    snprintf(x->name, sizeof x->name, "%s", h.name);
    free(x->support);
    x->support = table;
    x->nsupport = h.nsupport;
    return DSV4_OK;
}

int dsv4_isolated_start(const dsv4_child_impl *impl, const char *label, double timeout_s,
                        dsv4_isolated **out, dsv4_status *st)
{
    *out = NULL;
    dsv4_isolated *x = calloc(1, sizeof *x);
    if (!x)
        return dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
    x->impl = *impl;
    x->fd = -1;
    x->timeout_s = timeout_s > 0 ? timeout_s : 600;
    snprintf(x->label, sizeof x->label, "%s", label);
    snprintf(x->name, sizeof x->name, "%s", label);
    int rc = start_child(x, st);
    if (rc) {
        free(x->support);
        free(x);
        return rc;
    }
    *out = x;
    return DSV4_OK;
}

const char *dsv4_isolated_name(const dsv4_isolated *x) { return x->name; }

int dsv4_isolated_supports(const dsv4_isolated *x, const dsv4_op *op, int variant)
{
    if (!x->support)
        return 1;
    for (int i = 0, j = 0; i < dsv4_op_count(); i++) {
        const dsv4_op *o = dsv4_op_at(i);
        if (o == op)
            return variant >= 0 && variant < dsv4_op_variant_count(o) && x->support[j + variant];
        j += dsv4_op_variant_count(o);
    }
    return 0;
}

static int send_tensor(int fd, const dsv4_tensor *t, double deadline)
{
    wire_tensor w;
    memset(&w, 0, sizeof w);
    memcpy(w.name, t->name, sizeof w.name);
    w.dtype = t->dtype;
    w.output_dtype = t->output_dtype;
    w.ndim = t->ndim;
    memcpy(w.shape, t->shape, sizeof w.shape);
    w.nbytes = t->nbytes;
    int io = send_all(fd, &w, sizeof w, deadline);
    return io ? io : send_all(fd, t->data, t->nbytes, deadline);
}

static int exchange(dsv4_isolated *x, const dsv4_op *op, const dsv4_opctx *c, const char *case_name,
                    const char *golden, const dsv4_guard_fill *fill, const dsv4_tensors *in, dsv4_tensors *out,
                    wire_reply *rp)
{
    double deadline = deadline_of(x);
    wire_request *rq = calloc(1, sizeof *rq);
    if (!rq)
        return IO_CLOSED;
    rq->magic = WIRE_MAGIC;
    rq->op = op_index(op);
    rq->variant = c->variant;
    rq->nin = in->n;
    rq->nout = out->n;
    rq->seed = c->seed;
    rq->params = *c->params;
    rq->has_case = case_name != NULL;
    rq->has_golden = golden != NULL;
    rq->zeroed_input = fill ? fill->input : 0;
    rq->zeroed_sides = fill ? fill->sides : 0;
    snprintf(rq->case_name, sizeof rq->case_name, "%s", case_name ? case_name : "");
    snprintf(rq->golden, sizeof rq->golden, "%s", golden ? golden : "");
    int io = send_all(x->fd, rq, sizeof *rq, deadline);
    free(rq);
    for (int k = 0; !io && k < in->n; k++)
        io = send_tensor(x->fd, &in->t[k], deadline);
    for (int k = 0; !io && k < out->n; k++)
        io = send_tensor(x->fd, &out->t[k], deadline);
    if (!io)
        io = recv_all(x->fd, rp, sizeof *rp, deadline);
    for (int k = 0; !io && !rp->code && k < out->n; k++)
        io = recv_all(x->fd, out->t[k].data, out->t[k].nbytes, deadline);
    return io;
}

int dsv4_isolated_run(dsv4_isolated *x, const dsv4_op *op, const dsv4_opctx *c, const char *case_name,
                      const char *golden, const dsv4_guard_fill *fill, const dsv4_tensors *in, dsv4_tensors *out,
                      dsv4_status *st)
{
    if (!x->broken[0] && !x->pid) { /* the last child died: a fresh one */
        dsv4_status why = {0};
        int rc = start_child(x, &why);
        if (rc)
            snprintf(x->broken, sizeof x->broken, "%s: cannot restart: %s", x->name, why.msg);
    }
    if (x->broken[0])
        return dsv4_fail(st, DSV4_ERUNTIME, "%s", x->broken);
    wire_reply rp;
    int io = exchange(x, op, c, case_name, golden, fill, in, out, &rp);
    if (io) {
        char how[300];
        end_child(x, io == IO_TIMEOUT, how, sizeof how);
        return dsv4_fail(st, DSV4_ERUNTIME, "%s: the implementation's process %s while running %s [%s]",
                         x->name, how, op->name, dsv4_op_variant_name(op, c->variant));
    }
    rp.msg[sizeof rp.msg - 1] = '\0';
    if (rp.code)
        return dsv4_fail(st, rp.code, "%s", rp.msg[0] ? rp.msg : "run failed");
    return DSV4_OK;
}

void dsv4_isolated_stop(dsv4_isolated *x)
{
    if (!x)
        return;
    if (x->pid) {
        char ended[160];
        close(x->fd); /* the child closes the implementation and exits */
        reap(x->pid, 5.0, ended, sizeof ended);
    }
    free(x->support);
    free(x);
}
