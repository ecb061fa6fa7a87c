/* backend.c - the ref backend, the actual backend (actual.c), plug-in
 * loading (ABI 1 and 2), the guarded call into a plug-in, and plug-ins
 * hosted in a child process (isolate.c). */
#define _GNU_SOURCE
#include "backend.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "actual.h"
#include "isolate.h"

/* build/libdsv4_hip.so next to the running executable. */
static void hip_library_path(char *buf, size_t len)
{
    const char *env = getenv("DSV4_HIP_LIB");
    if (env && *env) {
        snprintf(buf, len, "%s", env);
        return;
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) {
        snprintf(buf, len, "libdsv4_hip.so");
        return;
    }
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash)
        *slash = '\0';
    snprintf(buf, len, "%s/libdsv4_hip.so", exe);
}

static int open_plugin(const char *path, int device, int is_hip, dsv4_backend *b, dsv4_status *st)
{
    if (is_hip && access(path, R_OK) != 0)
        return dsv4_fail(st, DSV4_ESKIP, "hip backend not built: %s is missing (make hip)", path);
    b->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!b->dl) {
        const char *why = dlerror();
        /* A hip backend whose GPU runtime library is absent is a skip. */
        if (is_hip)
            return dsv4_fail(st, DSV4_ESKIP, "hip backend cannot load here: %s", why ? why : "?");
        return dsv4_fail(st, DSV4_EINPUT, "%s: cannot load plug-in: %s", path, why ? why : "?");
    }
    dsv4_plugin_entry_fn entry;
    void *sym = dlsym(b->dl, "dsv4_plugin_entry");
    memcpy(&entry, &sym, sizeof entry); /* object -> function pointer, as POSIX allows */
    if (!sym)
        return dsv4_fail(st, DSV4_EINPUT, "%s: no dsv4_plugin_entry symbol (see include/dsv4_plugin.h)",
                         path);
    b->plugin = entry();
    if (!b->plugin)
        return dsv4_fail(st, DSV4_EINPUT, "%s: dsv4_plugin_entry returned NULL", path);
    int abi = b->plugin->abi_version;
    if (abi < DSV4_PLUGIN_ABI_OLDEST || abi > DSV4_PLUGIN_ABI_VERSION)
        return dsv4_fail(st, DSV4_EINPUT, "%s: plug-in ABI version %d, this dsv4check speaks %d to %d", path, abi,
                         DSV4_PLUGIN_ABI_OLDEST, DSV4_PLUGIN_ABI_VERSION);
    /* An ABI 1 struct ends at fini: run2 is not read. */
    if (!b->plugin->supports || (!b->plugin->run && !(abi >= 2 && b->plugin->run2)))
        return dsv4_fail(st, DSV4_EINPUT, "%s: plug-in lacks supports() or run()%s", path, abi >= 2 ? "/run2()" : "");
    /* %.255s: a name without its NUL is read no further than b->name holds. */
    snprintf(b->name, sizeof b->name, "%.255s", b->plugin->name ? b->plugin->name : path);
    b->device = device;
    if (b->plugin->init) {
        char err[512] = "";
        int rc = b->plugin->init(device, err, sizeof err);
        err[sizeof err - 1] = '\0'; /* an unterminated message ends here */
        if (rc == DSV4_PLUGIN_ESKIP)
            return dsv4_fail(st, DSV4_ESKIP, "%s: %s", b->name, err[0] ? err : "cannot run here");
        if (rc)
            return dsv4_fail(st, rc == DSV4_PLUGIN_EINPUT ? DSV4_EINPUT : DSV4_ERUNTIME, "%s: init: %s",
                             b->name, err);
        /* init may name the device it picked in the plug-in's name. */
        if (b->plugin->name)
            snprintf(b->name, sizeof b->name, "%.255s", b->plugin->name);
    }
    return DSV4_OK;
}

int dsv4_backend_open(const char *impl, int device, dsv4_backend *b, dsv4_status *st)
{
    memset(b, 0, sizeof *b);
    if (strcmp(impl, "ref") == 0) {
        b->is_ref = 1;
        snprintf(b->name, sizeof b->name, "ref");
        return DSV4_OK;
    }
    if (strncmp(impl, DSV4_ACTUAL_IMPL, strlen(DSV4_ACTUAL_IMPL)) == 0) {
        const char *file = impl + strlen(DSV4_ACTUAL_IMPL);
        snprintf(b->name, sizeof b->name, "actual %s", file);
        return dsv4_actual_open(file, &b->actual, st);
    }
    char path[PATH_MAX];
    int is_hip = strcmp(impl, "hip") == 0;
    if (is_hip)
        hip_library_path(path, sizeof path);
    else
        snprintf(path, sizeof path, "%s", impl);
    if (!is_hip && !strchr(impl, '/') && !strstr(impl, ".so"))
        return dsv4_fail(st, DSV4_EINPUT, "--impl %s: expected ref, hip or a path to a plug-in .so", impl);
    int rc = open_plugin(path, device, is_hip, b, st);
    if (rc)
        dsv4_backend_close(b);
    return rc;
}

void dsv4_backend_close(dsv4_backend *b)
{
    dsv4_actual_close(b->actual);
    b->actual = NULL;
    if (b->iso) {
        dsv4_isolated_stop(b->iso);
        free(b->target);
        b->iso = NULL;
        b->target = NULL;
        return;
    }
    if (b->plugin && b->plugin->fini)
        b->plugin->fini();
    if (b->dl)
        dlclose(b->dl);
    b->dl = NULL;
    b->plugin = NULL;
}

int dsv4_backend_supports(const dsv4_backend *b, const dsv4_op *op, int variant)
{
    if (b->is_ref || b->actual)
        return 1;
    if (b->iso)
        return dsv4_isolated_supports(b->iso, op, variant);
    return b->plugin->supports(op->name, dsv4_op_variant_name(op, variant));
}

int dsv4_backend_provides(const dsv4_backend *b, const dsv4_op *op, int variant, const dsv4_case_id *id,
                          char *why, size_t len)
{
    if (b->actual) {
        if (dsv4_actual_find(b->actual, id->name) >= 0)
            return 1;
        snprintf(why, len, "not provided: %s has no group /%s", dsv4_actual_path(b->actual), id->name);
        return 0;
    }
    if (dsv4_backend_supports(b, op, variant))
        return 1;
    snprintf(why, len, "%s does not implement %s [%s]", b->name, op->name, dsv4_op_variant_name(op, variant));
    return 0;
}

/* Internal tensors and params as the plug-in ABI sees them. */
typedef struct abi_args {
    dsv4_plugin_param params[DSV4_MAX_PARAMS];
    dsv4_plugin_tensor in[DSV4_MAX_TENSORS], out[DSV4_MAX_TENSORS];
    int np, nin, nout;
} abi_args;

static void to_abi_tensor(dsv4_plugin_tensor *p, const dsv4_tensor *t)
{
    p->name = t->name;
    p->dtype = (int)t->dtype;
    p->ndim = t->ndim;
    p->shape = t->shape;
    p->data = t->data;
    p->nbytes = t->nbytes;
}

static void to_abi(const dsv4_opctx *c, const dsv4_tensors *in, dsv4_tensors *out, abi_args *a)
{
    a->np = c->params->n;
    for (int k = 0; k < a->np; k++) {
        const dsv4_param *p = &c->params->p[k];
        a->params[k] = (dsv4_plugin_param){p->name, (int)p->type, p->i, p->f, p->s, p->n, p->list};
    }
    a->nin = in->n;
    for (int k = 0; k < in->n; k++)
        to_abi_tensor(&a->in[k], &in->t[k]);
    a->nout = out->n;
    for (int k = 0; k < out->n; k++)
        to_abi_tensor(&a->out[k], &out->t[k]);
}

static int from_plugin_rc(int rc)
{
    return rc == DSV4_PLUGIN_EINPUT ? DSV4_EINPUT : rc == DSV4_PLUGIN_ESKIP ? DSV4_ESKIP : DSV4_ERUNTIME;
}

/* Every buffer a plug-in is handed - each input and output, and err - is
 * its own copy between two guard regions of at least a page, checked after
 * the call: a kernel (or a host plug-in) writing past either end is caught
 * and named instead of corrupting a neighbour (out-of-bounds accesses have
 * been seen on gfx950).  The inputs it was given are compared with the
 * caller's afterwards: inputs are read-only. */
#define GUARD_BYTE 0xD5
#define PLUGIN_ERR_LEN 512

static size_t guard_len(void)
{
    long page = sysconf(_SC_PAGESIZE);
    return page > 4096 ? (size_t)page : 4096;
}

/* guard | n bytes (a copy of init, or zeroes) | guard; the data at + g. */
static uint8_t *guarded_alloc(size_t n, size_t g, const void *init)
{
    uint8_t *base = malloc(n + 2 * g);
    if (!base)
        return NULL;
    memset(base, GUARD_BYTE, g);
    if (init && n)
        memcpy(base + g, init, n);
    else
        memset(base + g, 0, n);
    memset(base + g + n, GUARD_BYTE, g);
    return base;
}

static int check_guard_region(const uint8_t *r, size_t g, const char *what, const char *where,
                              dsv4_status *st)
{
    for (size_t k = 0; k < g; k++)
        if (r[k] != GUARD_BYTE)
            return dsv4_fail(st, DSV4_ERUNTIME,
                             "%s: guard bytes %s the buffer overwritten (byte %zu of %zu is 0x%02x)", what,
                             where, k, g, r[k]);
    return DSV4_OK;
}

static int check_guards(const uint8_t *base, size_t n, size_t g, const char *what, dsv4_status *st)
{
    int rc = check_guard_region(base, g, what, "before", st);
    return rc ? rc : check_guard_region(base + g + n, g, what, "after", st);
}

/* DSV4_ERUNTIME naming the first element of orig that seen no longer holds. */
static int check_unchanged(const dsv4_tensor *orig, const uint8_t *seen, dsv4_status *st)
{
    if (!orig->nbytes || memcmp(orig->data, seen, orig->nbytes) == 0)
        return DSV4_OK;
    size_t i = 0;
    while (((const uint8_t *)orig->data)[i] == seen[i])
        i++;
    int64_t el = (int64_t)(i / dsv4_dtype_size(orig->dtype));
    dsv4_tensor now = *orig;
    now.data = (void *)seen;
    char idx[96];
    return dsv4_fail(st, DSV4_ERUNTIME,
                     "input '%s' was modified by the implementation (inputs are read-only): first changed "
                     "element %s: %.9g became %.9g",
                     orig->name, dsv4_index_str(orig, el, idx, sizeof idx), dsv4_tensor_get(orig, el),
                     dsv4_tensor_get(&now, el));
}

/* After the call: guards of every output, input and err, then the inputs'
 * contents, then what the plug-in itself returned. */
static int check_call(const dsv4_backend *b, const dsv4_tensors *in, const dsv4_tensors *out,
                      uint8_t *const *inb, uint8_t *const *outb, const uint8_t *errb, size_t g, int prc,
                      dsv4_status *st)
{
    char what[DSV4_NAME_MAX + 16];
    int rc = DSV4_OK;
    for (int k = 0; k < out->n && !rc; k++) {
        snprintf(what, sizeof what, "output '%s'", out->t[k].name);
        rc = check_guards(outb[k], out->t[k].nbytes, g, what, st);
    }
    for (int k = 0; k < in->n && !rc; k++) {
        snprintf(what, sizeof what, "input '%s'", in->t[k].name);
        rc = check_guards(inb[k], in->t[k].nbytes, g, what, st);
    }
    if (!rc)
        rc = check_guards(errb, PLUGIN_ERR_LEN, g, "the err buffer", st);
    for (int k = 0; k < in->n && !rc; k++)
        rc = check_unchanged(&in->t[k], inb[k] + g, st);
    if (!rc && prc) {
        const char *err = (const char *)errb + g;
        rc = dsv4_fail(st, from_plugin_rc(prc), "%s: %s", b->name, err[0] ? err : "run failed");
    }
    return rc;
}

/* The call itself: run2 with the case where the plug-in has it, else run. */
static int call_plugin(const dsv4_backend *b, const dsv4_op *op, const dsv4_opctx *c, const dsv4_case_id *id,
                       abi_args *a, char *err)
{
    const char *variant = dsv4_op_variant_name(op, c->variant);
    if (b->plugin->abi_version >= 2 && b->plugin->run2) {
        const dsv4_plugin_case cs = {sizeof cs, id && id->name ? id->name : "", op->name, variant, c->seed,
                                     a->params, a->np, id ? id->golden : NULL};
        return b->plugin->run2(&cs, a->in, a->nin, a->out, a->nout, err, PLUGIN_ERR_LEN);
    }
    return b->plugin->run(op->name, variant, a->params, a->np, a->in, a->nin, a->out,
                          a->nout, err, PLUGIN_ERR_LEN);
}

static int guarded_run(const dsv4_backend *b, const dsv4_op *op, const dsv4_opctx *c, const dsv4_case_id *id,
                       const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    const size_t g = guard_len();
    abi_args a;
    uint8_t *inb[DSV4_MAX_TENSORS] = {0}, *outb[DSV4_MAX_TENSORS] = {0};
    uint8_t *errb = guarded_alloc(PLUGIN_ERR_LEN, g, NULL);
    int rc = errb ? DSV4_OK : DSV4_ERUNTIME;
    to_abi(c, in, out, &a);
    for (int k = 0; k < in->n && !rc; k++)
        if (!(inb[k] = guarded_alloc(in->t[k].nbytes, g, in->t[k].data)))
            rc = DSV4_ERUNTIME;
        else
            a.in[k].data = inb[k] + g;
    for (int k = 0; k < out->n && !rc; k++)
        if (!(outb[k] = guarded_alloc(out->t[k].nbytes, g, out->t[k].data)))
            rc = DSV4_ERUNTIME;
        else
            a.out[k].data = outb[k] + g;
    if (rc) {
        rc = dsv4_fail(st, DSV4_ERUNTIME, "out of memory for the guarded copies of the tensors");
    } else {
        char *err = (char *)errb + g;
        int prc = call_plugin(b, op, c, id, &a, err);
        err[PLUGIN_ERR_LEN - 1] = '\0'; /* read err no further than its length */
        rc = check_call(b, in, out, inb, outb, errb, g, prc, st);
    }
    for (int k = 0; k < out->n && !rc; k++)
        memcpy(out->t[k].data, outb[k] + g, out->t[k].nbytes);
    for (int k = 0; k < DSV4_MAX_TENSORS; k++)
        free(inb[k]), free(outb[k]);
    free(errb);
    return rc;
}

int dsv4_backend_run(const dsv4_backend *b, const dsv4_op *op, const dsv4_opctx *c, const dsv4_case_id *id,
                     const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    if (b->is_ref)
        return op->reference(c, in, out, st);
    if (b->actual)
        return dsv4_actual_read(b->actual, id->name, op, c->variant, out, st);
    if (b->iso)
        return dsv4_isolated_run(b->iso, op, c, id ? id->name : NULL, id ? id->golden : NULL, in, out, st);
    return guarded_run(b, op, c, id, in, out, st);
}

int dsv4_backend_time(const dsv4_backend *b, const dsv4_op *op, const dsv4_opctx *c,
                      const dsv4_tensors *in, dsv4_tensors *out, int iters, double *ms,
                      dsv4_status *st)
{
    if (b->is_ref || b->actual || b->iso || !b->plugin->time)
        return dsv4_fail(st, DSV4_ESKIP, "%s has no device timer%s", b->name,
                         b->iso ? " in a child process" : "");
    abi_args a;
    to_abi(c, in, out, &a);
    char err[512] = "";
    int rc = b->plugin->time(op->name, dsv4_op_variant_name(op, c->variant), a.params, a.np, a.in, a.nin, a.out,
                             a.nout, iters, ms, err, sizeof err);
    err[sizeof err - 1] = '\0';
    if (rc)
        return dsv4_fail(st, from_plugin_rc(rc), "%s: %s", b->name, err[0] ? err : "timing failed");
    return DSV4_OK;
}

/* ---- a plug-in in a child process (isolate.h) ---- */

/* What the child loads, and its in-process backend there. */
struct dsv4_isolated_target {
    char impl[PATH_MAX];
    int device;
    dsv4_backend inner;
};

static int child_open(void *arg, dsv4_status *st)
{
    struct dsv4_isolated_target *t = arg;
    return dsv4_backend_open(t->impl, t->device, &t->inner, st);
}

static const char *child_name(void *arg) { return ((struct dsv4_isolated_target *)arg)->inner.name; }

static int child_supports(void *arg, const dsv4_op *op, int variant)
{
    return dsv4_backend_supports(&((struct dsv4_isolated_target *)arg)->inner, op, variant);
}

static int child_run(void *arg, const dsv4_op *op, const dsv4_opctx *c, const char *case_name,
                     const char *golden, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    const dsv4_case_id id = {case_name, golden};
    return dsv4_backend_run(&((struct dsv4_isolated_target *)arg)->inner, op, c, &id, in, out, st);
}

static void child_close(void *arg) { dsv4_backend_close(&((struct dsv4_isolated_target *)arg)->inner); }

int dsv4_backend_open_isolated(const char *impl, int device, double timeout_s, dsv4_backend *b,
                               dsv4_status *st)
{
    /* The reference and an actuals file run nothing foreign: no child. */
    if (strcmp(impl, "ref") == 0 || strncmp(impl, DSV4_ACTUAL_IMPL, strlen(DSV4_ACTUAL_IMPL)) == 0)
        return dsv4_backend_open(impl, device, b, st);
    memset(b, 0, sizeof *b);
    b->device = device;
    struct dsv4_isolated_target *t = calloc(1, sizeof *t);
    if (!t)
        return dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
    snprintf(t->impl, sizeof t->impl, "%s", impl);
    t->device = device;
    const dsv4_child_impl ci = {t, child_open, child_name, child_supports, child_run, child_close};
    int rc = dsv4_isolated_start(&ci, impl, timeout_s, &b->iso, st);
    if (rc) {
        free(t);
        return rc;
    }
    b->target = t;
    snprintf(b->name, sizeof b->name, "%s", dsv4_isolated_name(b->iso));
    return DSV4_OK;
}
