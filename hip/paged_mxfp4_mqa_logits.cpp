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

/* This file's name for the logits shape: dsv4_hip_check_shape finds the
 * functions below through it. */
struct pl_shape : lg_shape {};

int shape_of(const dsv4_hip_call *c, pl_shape *s, char *err, size_t errlen)
{
    return lg_shape_of(c, s, err, errlen);
}

int check_shape(const dsv4_hip_call *c, const pl_shape &s, char *err, size_t errlen)
{
    const int rc = lg_check(c, s, err, errlen);
    if (rc)
        return rc;
    /* the 32x32 MFMA fold (docs/semantics/indexer.md Q6.2 step 3) */
    if (c->variant == 1 && s.heads != 32 && s.heads != 64)
        return IFAIL("%s (mode=faithful): %lld heads; the fold is defined for 32 or 64", c->op, (long long)s.heads);
    return DSV4_PLUGIN_OK;
}

hipError_t launch_shape(const dsv4_hip_call *c, const pl_shape &s, hipStream_t stream)
{
    const lg_args a = lg_make_args(c, s);
    return launch_logits(a, (float *)c->dout[s.logits], a.width, stream);
}

} // namespace

DSV4_HIP_SHAPE_KERNEL(paged_mxfp4_mqa_logits, variants, pl_shape);
