/* plugin_chain.c - the reference as a plug-in, for the chain tests
 * (tests/test_chain.c): every op, or the ones listed in -DCHAIN_OPS="a,b",
 * computed by the op's own reference through the registry and rounded to
 * the kernel dtypes, as the built-in ref does.  -DCHAIN_BUG= plants one
 * bug in one op:
 *   1  fused_qnorm_rope_kv_insert rotates at position + 1 (q and the
 *      inserted kv: an off-by-one position in the fused kernel);
 *   2  rocm_inv_rope_einsum leaves the last token's row unwritten (0);
 *   3  combine_topk_swa_indices shifts the last window entry of every row
 *      by one (its newest key is the next row).
 * Built by the Makefile; the reference functions come from the dsv4check
 * that loads it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../include/dsv4_plugin.h"
#include "../harness/runner.h"

#ifndef CHAIN_BUG
#define CHAIN_BUG 0
#endif

static int cp_init(int device, char *err, size_t errlen)
{
    (void)device, (void)err, (void)errlen;
    return DSV4_PLUGIN_OK;
}

static int cp_supports(const char *op, const char *variant)
{
    (void)variant;
    if (!dsv4_op_find(op))
        return 0;
#ifdef CHAIN_OPS
    const char *list = CHAIN_OPS;
    const size_t n = strlen(op);
    for (const char *p = list; (p = strstr(p, op)) != NULL; p += n)
        if ((p == list || p[-1] == ',') && (p[n] == ',' || p[n] == '\0'))
            return 1;
    return 0;
#else
    return 1;
#endif
}

static int to_params(const dsv4_plugin_param *pp, int np, dsv4_params *ps)
{
    ps->n = 0;
    for (int k = 0; k < np && k < DSV4_MAX_PARAMS; k++) {
        dsv4_param *p = &ps->p[ps->n++];
        memset(p, 0, sizeof *p);
        snprintf(p->name, sizeof p->name, "%s", pp[k].name);
        p->type = (dsv4_ptype)pp[k].kind;
        p->i = pp[k].i;
        p->f = pp[k].f;
        if (pp[k].s)
            snprintf(p->s, sizeof p->s, "%s", pp[k].s);
        p->n = pp[k].n < DSV4_PARAM_LIST_MAX ? pp[k].n : DSV4_PARAM_LIST_MAX;
        for (int i = 0; i < p->n; i++)
            p->list[i] = pp[k].list[i];
    }
    return np <= DSV4_MAX_PARAMS;
}

static void to_tensor(dsv4_tensor *t, const dsv4_plugin_tensor *p)
{
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", p->name);
    t->dtype = (dsv4_dtype)p->dtype;
    t->output_dtype = DSV4_DT_NONE;
    t->ndim = p->ndim;
    for (int d = 0; d < p->ndim && d < DSV4_MAX_DIMS; d++)
        t->shape[d] = p->shape[d];
    t->data = p->data;
    t->nbytes = p->nbytes;
}

/* Bug 1: the positions as the buggy kernel reads them (a private copy). */
static int64_t *shifted_positions(dsv4_tensors *in, const dsv4_params *ps)
{
    dsv4_tensor *pos = dsv4_tensors_find(in, "positions");
    const dsv4_tensor *cs = dsv4_tensors_get(in, "cos_sin_cache");
    const int64_t n = pos ? pos->shape[0] : 0;
    int64_t *p = pos ? malloc((size_t)(n + 1) * sizeof *p) : NULL;
    (void)ps;
    if (!p)
        return NULL;
    for (int64_t i = 0; i < n; i++) {
        p[i] = ((const int64_t *)pos->data)[i] + 1;
        if (cs && p[i] >= cs->shape[0])
            p[i] = cs->shape[0] - 1;
    }
    pos->data = p;
    return p;
}

static void plant_after(const char *op, dsv4_plugin_tensor *out, int nout)
{
    for (int k = 0; k < nout; k++) {
        dsv4_plugin_tensor *t = &out[k];
        if (CHAIN_BUG == 2 && !strcmp(op, "rocm_inv_rope_einsum") && !strcmp(t->name, "out") && t->ndim == 2 &&
            t->shape[0] > 0)
            memset((char *)t->data + (size_t)(t->shape[0] - 1) * (size_t)t->shape[1] * 2, 0, (size_t)t->shape[1] * 2);
        if (CHAIN_BUG == 3 && !strcmp(op, "combine_topk_swa_indices") && !strcmp(t->name, "combined_indices")) {
            const dsv4_plugin_tensor *lens = NULL;
            for (int j = 0; j < nout; j++)
                if (!strcmp(out[j].name, "combined_lens"))
                    lens = &out[j];
            for (int64_t r = 0; lens && r < t->shape[0]; r++) {
                const int32_t len = ((const int32_t *)lens->data)[r];
                if (len > 0 && len <= t->shape[1])
                    ((int32_t *)t->data)[r * t->shape[1] + len - 1] += 1;
            }
        }
    }
}

static int cp_run(const char *opname, const char *variant, const dsv4_plugin_param *params, int nparams,
                  const dsv4_plugin_tensor *inputs, int ninputs, dsv4_plugin_tensor *outputs, int noutputs, char *err,
                  size_t errlen)
{
    const dsv4_op *op = dsv4_op_find(opname);
    const int v = op ? dsv4_op_variant(op, variant) : -1;
    dsv4_params *ps = calloc(1, sizeof *ps);
    dsv4_tensors *in = calloc(1, sizeof *in), *exp = calloc(1, sizeof *exp);
    int rc = DSV4_PLUGIN_OK;
    if (v < 0 || !ps || !in || !exp || ninputs > DSV4_MAX_TENSORS || !to_params(params, nparams, ps)) {
        snprintf(err, errlen, "chain plug-in: cannot take %s [%s]", opname, variant);
        rc = DSV4_PLUGIN_EINPUT;
    }
    int64_t *shifted = NULL;
    if (!rc) {
        for (int k = 0; k < ninputs; k++)
            to_tensor(&in->t[k], &inputs[k]);
        in->n = ninputs; /* borrowed storage: never freed here */
        if (CHAIN_BUG == 1 && !strcmp(opname, "fused_qnorm_rope_kv_insert"))
            shifted = shifted_positions(in, ps);
        const dsv4_opctx c = dsv4_opctx_make(op, ps, v, 0);
        dsv4_status st = {0};
        if (dsv4_reference_outputs(op, &c, in, exp, &st)) {
            snprintf(err, errlen, "chain plug-in: %s", st.msg);
            rc = DSV4_PLUGIN_ERUNTIME;
        }
    }
    for (int k = 0; !rc && k < noutputs; k++) {
        dsv4_tensor o;
        to_tensor(&o, &outputs[k]);
        const dsv4_tensor *e = dsv4_tensors_get(exp, o.name);
        if (!e) {
            snprintf(err, errlen, "chain plug-in: the reference made no '%s'", o.name);
            rc = DSV4_PLUGIN_ERUNTIME;
        } else if (e->dtype == o.dtype) {
            memcpy(o.data, e->data, o.nbytes < e->nbytes ? o.nbytes : e->nbytes);
        } else {
            for (int64_t i = 0; i < dsv4_tensor_numel(&o); i++)
                dsv4_tensor_set(&o, i, dsv4_tensor_get(e, i));
        }
    }
    if (!rc)
        plant_after(opname, outputs, noutputs);
    free(shifted);
    if (exp)
        dsv4_tensors_free(exp);
    free(exp), free(in), free(ps);
    return rc;
}

static void cp_fini(void) {}

static const dsv4_plugin chain_plugin = {DSV4_PLUGIN_ABI_VERSION, "chain-ref", cp_init, cp_supports, cp_run, NULL,
                                         cp_fini, NULL};

const dsv4_plugin *dsv4_plugin_entry(void) { return &chain_plugin; }
