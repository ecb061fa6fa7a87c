/* paged_mxfp4_mqa_logits.cpp - logits[r, j] = sum_h relu(q_h . k_j) w_h over
 * the paged MXFP4 cache, below each row's end (docs/semantics/indexer.md
 * Q6.1-Q6.2).  One launch of indexer_logits.h's kernel.  Both variants: the
 * kernel computes the fp32 model of Q6.2 (two chained K = 64 MFMA roundings,
 * the fixed FMA head fold), which is the faithful variant's reference and
 * lies inside the default (ideal) variant's (128 + H + 2) u bound; columns
 * past a row end keep the launcher's -inf pre-fill. */
#include "indexer_logits.h"

namespace {

using namespace idxr;

const char *const variants[] = {"default", "mode=faithful", NULL};

int lgop_check(const dsv4_hip_call *c, char *err, size_t errlen)
{
    lg_shape s;
    int rc = lg_check(c, &s, err, errlen);
    if (rc)
        return rc;
    /* the 32x32 MFMA fold (docs/semantics/indexer.md Q6.2 step 3) */
    if (c->variant == 1 && s.heads != 32 && s.heads != 64)
        return IFAIL("%s (mode=faithful): %lld heads; the fold is defined for 32 or 64", c->op, (long long)s.heads);
    return DSV4_PLUGIN_OK;
}

hipError_t lgop_launch(const dsv4_hip_call *c, hipStream_t stream)
{
    lg_shape s;
    char err[160];
    if (lg_shape_of(c, &s, err, sizeof err))
        return hipErrorInvalidValue;
    const lg_args a = lg_make_args(c, s);
    return launch_logits(a, (float *)c->dout[s.logits], a.width, stream);
}

} // namespace

dsv4_hip_kernel dsv4_hip_paged_mxfp4_mqa_logits = {"paged_mxfp4_mqa_logits", variants, lgop_check, lgop_launch};
