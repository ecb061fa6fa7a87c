/* hostile.c - plug-ins that misbehave, one way each, for the isolation and
 * protected-input tests (tests/test_integrity.c, tests/test_badinput.c).
 * The Makefile builds build/tests/plugins/libhostile_<mode>.so with
 * -DHOSTILE_MODE_<mode>:
 *   exit       run() calls exit(0)
 *   _exit      run() calls _exit(0)
 *   abort      run() calls abort()
 *   segv       run() writes to a page it mapped PROT_NONE (SIGSEGV)
 *   hang       run() never returns
 *   ctor_exit  a constructor calls exit(0) while the library loads
 *   gemm       a GEMM that zeroes its output and zeroes its x_scale input
 *              (with the zeroed input, an all-zero output would be right)
 *   overrun    run() writes 512 bytes past the end of its first output
 *   errstr     run() fails with an err message that fills all of errlen
 *              and has no terminating NUL
 * Every mode but gemm provides combine_topk_swa_indices [default]; gemm
 * provides every variant of gemm_a8w8_blockscale.  With DSV4_HOSTILE_PIDDIR
 * set, run() first writes "<pid> <parent pid>" to a file named after its
 * pid there (the signal tests look for the processes). */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../../include/dsv4_plugin.h"

#if defined(HOSTILE_MODE_exit)
#define MODE "exit"
#elif defined(HOSTILE_MODE__exit)
#define MODE "_exit"
#elif defined(HOSTILE_MODE_abort)
#define MODE "abort"
#elif defined(HOSTILE_MODE_segv)
#define MODE "segv"
#elif defined(HOSTILE_MODE_hang)
#define MODE "hang"
#elif defined(HOSTILE_MODE_ctor_exit)
#define MODE "ctor_exit"
#elif defined(HOSTILE_MODE_gemm)
#define MODE "gemm"
#elif defined(HOSTILE_MODE_overrun)
#define MODE "overrun"
#elif defined(HOSTILE_MODE_errstr)
#define MODE "errstr"
#else
#error "build with -DHOSTILE_MODE_<mode> (see the list above)"
#endif

#ifdef HOSTILE_MODE_ctor_exit
__attribute__((constructor)) static void exit_while_loading(void) { exit(0); }
#endif

static int hostile_supports(const char *op, const char *variant)
{
#ifdef HOSTILE_MODE_gemm
    (void)variant;
    return strcmp(op, "gemm_a8w8_blockscale") == 0;
#else
    return strcmp(op, "combine_topk_swa_indices") == 0 && strcmp(variant, "default") == 0;
#endif
}

static void record_pid(void)
{
    const char *dir = getenv("DSV4_HOSTILE_PIDDIR");
    if (!dir)
        return;
    char path[512];
    snprintf(path, sizeof path, "%s/%ld", dir, (long)getpid());
    FILE *f = fopen(path, "w");
    if (f) {
        fprintf(f, "%ld %ld\n", (long)getpid(), (long)getppid());
        fclose(f);
    }
}

static dsv4_plugin_tensor *find(dsv4_plugin_tensor *ts, int n, const char *name)
{
    for (int k = 0; k < n; k++)
        if (strcmp(ts[k].name, name) == 0)
            return &ts[k];
    return NULL;
}

static int hostile_run(const char *op, const char *variant, const dsv4_plugin_param *params, int nparams,
                       const dsv4_plugin_tensor *inputs, int ninputs, dsv4_plugin_tensor *outputs,
                       int noutputs, char *err, size_t errlen)
{
    (void)op, (void)variant, (void)params, (void)nparams, (void)inputs, (void)ninputs, (void)outputs, (void)find;
    record_pid();
    if (noutputs < 1) {
        snprintf(err, errlen, "no outputs");
        return DSV4_PLUGIN_EINPUT;
    }
#if defined(HOSTILE_MODE_exit)
    exit(0);
#elif defined(HOSTILE_MODE__exit)
    _exit(0);
#elif defined(HOSTILE_MODE_abort)
    abort();
#elif defined(HOSTILE_MODE_segv)
    volatile char *page = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (page != MAP_FAILED)
        page[0] = 1;
    raise(SIGSEGV);
#elif defined(HOSTILE_MODE_hang)
    for (;;)
        pause();
#elif defined(HOSTILE_MODE_gemm)
    /* Inputs are const in the ABI; the cast is the hostile part. */
    dsv4_plugin_tensor *x_scale = find((dsv4_plugin_tensor *)inputs, ninputs, "x_scale");
    if (x_scale)
        memset(x_scale->data, 0, x_scale->nbytes);
    for (int k = 0; k < noutputs; k++)
        memset(outputs[k].data, 0, outputs[k].nbytes);
#elif defined(HOSTILE_MODE_overrun)
    memset((char *)outputs[0].data + outputs[0].nbytes, 0x11, 512);
#elif defined(HOSTILE_MODE_errstr)
    memset(err, 'E', errlen);
    return DSV4_PLUGIN_ERUNTIME;
#endif
    return DSV4_PLUGIN_OK;
}

static const dsv4_plugin hostile = {
    DSV4_PLUGIN_ABI_VERSION, "hostile-" MODE, NULL, hostile_supports, hostile_run, NULL, NULL, NULL,
};

const dsv4_plugin *dsv4_plugin_entry(void);
const dsv4_plugin *dsv4_plugin_entry(void) { return &hostile; }
