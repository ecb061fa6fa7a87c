/* fixture_plugin.c - a tiny plug-in that tests/test_hip.c builds with the
 * system C compiler to exercise the loader and the host-side output guards
 * (harness/backend.c).  -DMODE= picks what it gets wrong:
 *   1 (WRONG_ABI)  abi_version is DSV4_PLUGIN_ABI_VERSION + 1;
 *   2 (SKIP)       init answers DSV4_PLUGIN_ESKIP, as a GPU plug-in on a
 *                  machine without a GPU;
 *   3 (OVERRUN)    run writes one int32 past the end of its last output;
 *   4 (UNDERRUN)   run writes one byte before the start of its first output. */
#include <stdio.h>
#include <string.h>

#include "../include/dsv4_plugin.h"

#ifndef MODE
#error "build with -DMODE=1..4"
#endif

static int fx_init(int device, char *err, size_t errlen)
{
    (void)device;
    if (MODE == 2) {
        snprintf(err, errlen, "fixture: no device here");
        return DSV4_PLUGIN_ESKIP;
    }
    return DSV4_PLUGIN_OK;
}

static int fx_supports(const char *op, const char *variant)
{
    return strcmp(op, "combine_topk_swa_indices") == 0 && strcmp(variant, "default") == 0;
}

static int fx_run(const char *op, const char *variant, const dsv4_plugin_param *params, int nparams,
                  const dsv4_plugin_tensor *inputs, int ninputs, dsv4_plugin_tensor *outputs, int noutputs,
                  char *err, size_t errlen)
{
    (void)op, (void)variant, (void)params, (void)nparams, (void)inputs, (void)ninputs;
    if (noutputs < 1) {
        snprintf(err, errlen, "fixture: no outputs");
        return DSV4_PLUGIN_EINPUT;
    }
    if (MODE == 3) {
        dsv4_plugin_tensor *t = &outputs[noutputs - 1];
        int v = 7;
        memcpy((char *)t->data + t->nbytes, &v, sizeof v);
    } else if (MODE == 4) {
        ((char *)outputs[0].data)[-1] = 0;
    }
    return DSV4_PLUGIN_OK;
}

static void fx_fini(void) {}

static const dsv4_plugin fixture = {
    DSV4_PLUGIN_ABI_VERSION + (MODE == 1), "fixture", fx_init, fx_supports, fx_run, NULL, fx_fini, NULL,
};

const dsv4_plugin *dsv4_plugin_entry(void)
{
    return &fixture;
}
