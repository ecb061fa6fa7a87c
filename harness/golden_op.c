#define _POSIX_C_SOURCE 200809L
/* golden_op.c - a golden checked against its op, after the file itself
 * has been read (golden_read.c): everything it holds must be what the op
 * would have made of its parameters, so that no edited attribute, extra
 * tensor or parameter that disagrees with a shape reaches a comparison. */
#include "golden_h5.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runner.h"

static int check_params(const char *path, const dsv4_op *op, dsv4_params *ps, dsv4_status *st)
{
    int rc = dsv4_golden_params(op, ps, path, st);
    for (int k = 0; !rc && k < ps->n; k++)
        if (ps->p[k].type == DSV4_P_FLOAT && !isfinite(ps->p[k].f))
            rc = dsv4_fail(st, DSV4_EINPUT, "%s:/params/%s is %g: must be finite", path, ps->p[k].name,
                           ps->p[k].f);
    return rc;
}

static int check_input_names(const char *path, const dsv4_op *op, const dsv4_tensors *in, dsv4_status *st)
{
    for (int k = 0; k < in->n; k++)
        if (!dsv4_op_input(op, in->t[k].name))
            return dsv4_fail(st, DSV4_EINPUT, "%s:/inputs/%s: op %s has no input '%s' (an extra tensor)", path,
                             in->t[k].name, op->name, in->t[k].name);
    return DSV4_OK;
}

/* The outputs must be exactly those the op allocates for these inputs,
 * each in its golden dtype, with output_dtype naming the kernel's dtype
 * where the two differ (dsv4_reference_outputs makes them so). */
static int check_outputs(const char *path, const dsv4_op *op, const dsv4_opctx *ctx, const dsv4_golden *g,
                         dsv4_status *st)
{
    dsv4_tensors kern = {0};
    int rc = op->alloc_outputs(ctx, &g->inputs, &kern, st);
    if (rc)
        rc = dsv4_status_prefix(st, "%s: outputs", path);
    for (int k = 0; !rc && k < kern.n; k++) {
        const dsv4_tensor *t = &kern.t[k], *e = dsv4_tensors_get(&g->outputs, t->name);
        const dsv4_io_spec *io = dsv4_op_output(op, t->name);
        dsv4_dtype gdt = io && io->golden_dtype != DSV4_DT_NONE ? io->golden_dtype : t->dtype;
        dsv4_dtype odt = gdt != t->dtype ? t->dtype : DSV4_DT_NONE;
        char a[96], b[96];
        if (!e)
            rc = dsv4_fail(st, DSV4_EINPUT, "%s:/outputs/%s is missing", path, t->name);
        else if (e->dtype != gdt)
            rc = dsv4_fail(st, DSV4_EINPUT, "%s:/outputs/%s: dtype %s, but op %s stores %s", path, t->name,
                           dsv4_dtype_name(e->dtype), op->name, dsv4_dtype_name(gdt));
        else if (e->output_dtype != odt)
            rc = dsv4_fail(st, DSV4_EINPUT, "%s:/outputs/%s: output_dtype %s, but op %s produces %s here%s", path,
                           t->name, e->output_dtype == DSV4_DT_NONE ? "(none)" : dsv4_dtype_name(e->output_dtype),
                           op->name, dsv4_dtype_name(t->dtype),
                           odt == DSV4_DT_NONE ? " (compared exactly: no output_dtype)" : "");
        else if (!dsv4_tensor_same_shape(e, t))
            rc = dsv4_fail(st, DSV4_EINPUT, "%s:/outputs/%s has shape %s; these inputs give %s", path, t->name,
                           dsv4_shape_str(e, a, sizeof a), dsv4_shape_str(t, b, sizeof b));
    }
    for (int k = 0; !rc && k < g->outputs.n; k++)
        if (!dsv4_tensors_get(&kern, g->outputs.t[k].name))
            rc = dsv4_fail(st, DSV4_EINPUT, "%s:/outputs/%s: op %s has no such output for these inputs (an "
                           "extra tensor)", path, g->outputs.t[k].name, op->name);
    dsv4_tensors_free(&kern);
    return rc;
}

/* Whether the file holds every generator parameter without a default:
 * then the generator can rebuild the inputs' shapes from /params. */
static int has_generator_params(const dsv4_op *op, const dsv4_params *file_params)
{
    for (const dsv4_param_spec *spec = dsv4_op_params(op); spec->name; spec++)
        if (spec->gen && !spec->def && !dsv4_params_find(file_params, spec->name))
            return 0;
    return 1;
}

/* The parameters validate() does not read (the GEMM's M, N, K, ...) still
 * describe the tensors: the generator, run on /params and the seed, makes
 * inputs of the file's names, dtypes and shapes. */
static int check_generated_shapes(const char *path, const dsv4_op *op, const dsv4_opctx *ctx, const dsv4_golden *g,
                                  dsv4_status *st)
{
    dsv4_tensors gen = {0};
    dsv4_status loc = {0, ""};
    int rc = op->generate(ctx, &gen, &loc);
    if (rc)
        rc = dsv4_fail(st, rc, "%s: /params do not describe inputs the generator can make: %s", path, loc.msg);
    for (int k = 0; !rc && k < gen.n; k++) {
        const dsv4_tensor *want = &gen.t[k], *have = dsv4_tensors_get(&g->inputs, want->name);
        char a[96], b[96];
        if (!have)
            rc = dsv4_fail(st, DSV4_EINPUT, "%s: /params give an input '%s' the file lacks", path, want->name);
        else if (have->dtype != want->dtype || !dsv4_tensor_same_shape(have, want))
            rc = dsv4_fail(st, DSV4_EINPUT, "%s:/inputs/%s is %s %s, but /params give %s %s: a parameter "
                           "disagrees with the tensors", path, want->name, dsv4_dtype_name(have->dtype),
                           dsv4_shape_str(have, a, sizeof a), dsv4_dtype_name(want->dtype),
                           dsv4_shape_str(want, b, sizeof b));
    }
    for (int k = 0; !rc && k < g->inputs.n; k++)
        if (!dsv4_tensors_get(&gen, g->inputs.t[k].name))
            rc = dsv4_fail(st, DSV4_EINPUT, "%s:/inputs/%s: /params give no such input (an extra tensor)", path,
                           g->inputs.t[k].name);
    dsv4_tensors_free(&gen);
    return rc;
}

static void write_all(int fd, const void *buf, size_t n)
{
    for (const char *p = buf; n > 0;) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        p += w, n -= (size_t)w;
    }
}

/* The generators were written for case files; a golden's /params are
 * anyone's.  So the generator runs in a child process: one that crashes on
 * parameters outside the range it was written for makes a refused golden,
 * not a crashed reader.  (The child touches no HDF5, GPU or stdio state and
 * leaves with _exit.) */
static int check_generated_shapes_apart(const char *path, const dsv4_op *op, const dsv4_opctx *ctx,
                                        const dsv4_golden *g, dsv4_status *st)
{
    int fds[2];
    if (pipe(fds) != 0)
        return dsv4_fail(st, DSV4_ERUNTIME, "%s: cannot check /params: pipe: %s", path, strerror(errno));
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(fds[0]);
        close(fds[1]);
        return dsv4_fail(st, DSV4_ERUNTIME, "%s: cannot check /params: fork: %s", path, strerror(e));
    }
    if (pid == 0) {
        close(fds[0]);
        dsv4_status cst = {0, ""};
        int rc = check_generated_shapes(path, op, ctx, g, &cst);
        write_all(fds[1], &rc, sizeof rc);
        write_all(fds[1], cst.msg, strnlen(cst.msg, sizeof cst.msg));
        _exit(0);
    }
    close(fds[1]);
    char buf[sizeof(int) + sizeof st->msg];
    size_t got = 0;
    while (got < sizeof buf) {
        ssize_t r = read(fds[0], buf + got, sizeof buf - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fds[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || got < sizeof(int))
        return dsv4_fail(st, DSV4_EINPUT, "%s: the input generator of %s failed on these /params (%s %d): a "
                         "parameter is outside the range it was written for", path, op->name,
                         WIFSIGNALED(status) ? "signal" : "exit status",
                         WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    int rc;
    memcpy(&rc, buf, sizeof rc);
    return rc ? dsv4_fail(st, rc, "%.*s", (int)(got - sizeof rc), buf + sizeof rc) : DSV4_OK;
}

int dsv4_golden_check_op(const char *path, const dsv4_golden *g, dsv4_status *st)
{
    const dsv4_op *op = dsv4_op_find(g->op);
    if (!op)
        return dsv4_fail(st, DSV4_EINPUT, "%s: unknown op '%s' (see `dsv4check list`)", path, g->op);
    int variant = dsv4_op_variant(op, g->variant);
    if (variant < 0)
        return dsv4_fail(st, DSV4_EINPUT, "%s: op %s has no variant '%s'", path, g->op, g->variant);
    dsv4_params *ps = malloc(sizeof *ps);
    if (!ps)
        return dsv4_fail(st, DSV4_ERUNTIME, "%s: out of memory", path);
    *ps = g->params;
    int rc = check_params(path, op, ps, st);
    if (!rc)
        rc = check_input_names(path, op, &g->inputs, st);
    dsv4_opctx ctx = dsv4_opctx_make(op, ps, variant, g->seed);
    if (!rc && (rc = op->validate(&ctx, &g->inputs, st)))
        dsv4_status_prefix(st, "%s: inputs", path);
    if (!rc)
        rc = check_outputs(path, op, &ctx, g, st);
    if (!rc && has_generator_params(op, &g->params))
        rc = check_generated_shapes_apart(path, op, &ctx, g, st);
    free(ps);
    return rc;
}
