/* backend.c - the ref backend and plug-in loading. */
#define _GNU_SOURCE
#include "backend.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
    if (b->plugin->abi_version != DSV4_PLUGIN_ABI_VERSION)
        return dsv4_fail(st, DSV4_EINPUT, "%s: plug-in ABI version %d, this dsv4check speaks %d", path,
                         b->plugin->abi_version, DSV4_PLUGIN_ABI_VERSION);
    if (!b->plugin->supports || !b->plugin->run)
        return dsv4_fail(st, DSV4_EINPUT, "%s: plug-in lacks supports() or run()", path);
    snprintf(b->name, sizeof b->name, "%s", b->plugin->name ? b->plugin->name : path);
    b->device = device;
    if (b->plugin->init) {
        char err[512] = "";
        int rc = b->plugin->init(device, err, sizeof err);
        if (rc == DSV4_PLUGIN_ESKIP)
            return dsv4_fail(st, DSV4_ESKIP, "%s: %s", b->name, err[0] ? err : "cannot run here");
        if (rc)
            return dsv4_fail(st, rc == DSV4_PLUGIN_EINPUT ? DSV4_EINPUT : DSV4_ERUNTIME, "%s: init: %s",
                             b->name, err);
        /* init may name the device it picked in the plug-in's name. */
        if (b->plugin->name)
            snprintf(b->name, sizeof b->name, "%s", b->plugin->name);
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
    if (b->plugin && b->plugin->fini)
        b->plugin->fini();
    if (b->dl)
        dlclose(b->dl);
    b->dl = NULL;
    b->plugin = NULL;
}

int dsv4_backend_supports(const dsv4_backend *b, const dsv4_op *op, int variant)
{
    if (b->is_ref)
        return 1;
    return b->plugin->supports(op->name, dsv4_op_variant_name(op, variant));
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

/* Guard regions around every output handed to a plug-in: a kernel (or a
 * host plug-in) writing past either end is caught and named, instead of
 * silently corrupting a neighbour (design.md 8; the seeds report an
 * out-of-bounds access on gfx950). */
#define GUARD_BYTES 256
#define GUARD_BYTE 0xD5

static int check_guard(const uint8_t *g, const char *name, const char *where, dsv4_status *st)
{
    for (int k = 0; k < GUARD_BYTES; k++)
        if (g[k] != GUARD_BYTE)
            return dsv4_fail(st, DSV4_ERUNTIME,
                             "output '%s': guard bytes %s the buffer overwritten (byte %d of %d is 0x%02x)",
                             name, where, k, GUARD_BYTES, g[k]);
    return DSV4_OK;
}

int dsv4_backend_run(const dsv4_backend *b, const dsv4_op *op, const dsv4_opctx *c,
                     const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st)
{
    if (b->is_ref)
        return op->reference(c, in, out, st);
    abi_args a;
    uint8_t *guarded[DSV4_MAX_TENSORS] = {0};
    int rc = DSV4_OK;
    to_abi(c, in, out, &a);
    for (int k = 0; k < out->n && !rc; k++) {
        guarded[k] = malloc(out->t[k].nbytes + 2 * GUARD_BYTES);
        if (!guarded[k]) {
            rc = dsv4_fail(st, DSV4_ERUNTIME, "out of memory for output guards");
            break;
        }
        memset(guarded[k], GUARD_BYTE, GUARD_BYTES);
        memcpy(guarded[k] + GUARD_BYTES, out->t[k].data, out->t[k].nbytes);
        memset(guarded[k] + GUARD_BYTES + out->t[k].nbytes, GUARD_BYTE, GUARD_BYTES);
        a.out[k].data = guarded[k] + GUARD_BYTES;
    }
    if (!rc) {
        char err[512] = "";
        int prc = b->plugin->run(op->name, dsv4_op_variant_name(op, c->variant), a.params, a.np, a.in, a.nin,
                                 a.out, a.nout, err, sizeof err);
        if (prc)
            rc = dsv4_fail(st, from_plugin_rc(prc), "%s: %s", b->name, err[0] ? err : "run failed");
    }
    for (int k = 0; k < out->n && !rc; k++) {
        const uint8_t *g = guarded[k];
        if ((rc = check_guard(g, out->t[k].name, "before", st)) ||
            (rc = check_guard(g + GUARD_BYTES + out->t[k].nbytes, out->t[k].name, "after", st)))
            break;
        memcpy(out->t[k].data, g + GUARD_BYTES, out->t[k].nbytes);
    }
    for (int k = 0; k < out->n; k++)
        free(guarded[k]);
    return rc;
}

int dsv4_backend_time(const dsv4_backend *b, const dsv4_op *op, const dsv4_opctx *c,
                      const dsv4_tensors *in, dsv4_tensors *out, int iters, double *ms,
                      dsv4_status *st)
{
    if (b->is_ref || !b->plugin->time)
        return dsv4_fail(st, DSV4_ESKIP, "%s has no device timer", b->name);
    abi_args a;
    to_abi(c, in, out, &a);
    char err[512] = "";
    int rc = b->plugin->time(op->name, dsv4_op_variant_name(op, c->variant), a.params, a.np, a.in, a.nin, a.out,
                             a.nout, iters, ms, err, sizeof err);
    if (rc)
        return dsv4_fail(st, from_plugin_rc(rc), "%s: %s", b->name, err[0] ? err : "timing failed");
    return DSV4_OK;
}
