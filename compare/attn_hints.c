/* attn_hints.c - see attn_hints.h.  The sink factors follow from
 * docs/semantics/attention.md A8.1: with Z = sum_i e^{s_i - m} and E = e^{sink - m},
 * expected = N / (Z + E) and w = E / (Z + E).  Dropping the sink gives
 * N / Z = expected / (1 - w); counting it twice gives N / (Z + 2E) =
 * expected / (1 + w). */
#define _POSIX_C_SOURCE 200809L
#include "attn_hints.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* A factor is recognised when it is within 1% of its distance from 1 (and
 * 2^-12 absolute: the least-squares ratio of a bf16-rounded row over 512
 * lanes is far closer; 1 - w and 1/(1 + w) differ by w^2/(1 + w)). */
static int factor_matches(double r, double f)
{
    return fabs(r - f) <= 0.01 * fabs(f - 1.0) + 0x1p-12;
}

dsv4_attn_row_kind dsv4_attn_classify_row(const dsv4_tensor *expected, const dsv4_tensor *actual,
                                          const dsv4_attn_rows *rows, int64_t t, int64_t h,
                                          double *ratio)
{
    const int64_t base = (t * rows->H + h) * rows->D;
    double see = 0, sae = 0, emax = 0;
    int any_nonzero = 0;
    *ratio = 1.0;
    for (int64_t d = 0; d < rows->D; d++) {
        double e = dsv4_tensor_get(expected, base + d), a = dsv4_tensor_get(actual, base + d);
        if (isnan(a) || isnan(e))
            return DSV4_ROW_OTHER;
        any_nonzero |= a != 0;
        see += e * e;
        sae += a * e;
        emax = fabs(e) > emax ? fabs(e) : emax;
    }
    if (rows->nvalid && rows->nvalid[t] == 0)
        return any_nonzero ? DSV4_ROW_NOT_ZERO : DSV4_ROW_OK;
    if (see == 0)
        return any_nonzero ? DSV4_ROW_OTHER : DSV4_ROW_OK;
    const double r = sae / see;
    double resid = 0;
    for (int64_t d = 0; d < rows->D; d++) {
        double e = dsv4_tensor_get(expected, base + d), a = dsv4_tensor_get(actual, base + d);
        resid = fmax(resid, fabs(a - r * e));
    }
    *ratio = r;
    /* A scaled row: the residual after scaling is at bf16 rounding level. */
    if (resid > 0x1p-6 * fmax(fabs(r), 1.0) * emax)
        return resid > 0x1p-6 * emax ? DSV4_ROW_OTHER : DSV4_ROW_OK;
    if (fabs(r - 1.0) <= 0x1p-7)
        return DSV4_ROW_OK;
    const double w = rows->sink_w ? rows->sink_w[t * rows->H + h] : 0;
    /* Either side may carry the mistake: actual without the sink is
     * expected/(1-w); expected (a golden) without it makes actual =
     * expected*(1-w); likewise 1/(1+w) and (1+w) for a doubled sink. */
    if (w > 0x1p-6 && w < 1.0 && (factor_matches(r, 1.0 / (1.0 - w)) || factor_matches(r, 1.0 - w)))
        return DSV4_ROW_SINK_IGNORED;
    if (w > 0x1p-6 && (factor_matches(r, 1.0 / (1.0 + w)) || factor_matches(r, 1.0 + w)))
        return DSV4_ROW_SINK_TWICE;
    return DSV4_ROW_SCALED;
}

typedef struct row_census {
    int64_t n[DSV4_ROW_OTHER + 1];
    int64_t first_t[DSV4_ROW_OTHER + 1], first_h[DSV4_ROW_OTHER + 1];
    double first_r[DSV4_ROW_OTHER + 1];
    int64_t heads_seen, one_head, tokens_seen, one_token; /* for scaled rows */
    double r0;
    int same_r;
} row_census;

static void note(row_census *c, dsv4_attn_row_kind k, int64_t t, int64_t h, double r)
{
    if (c->n[k]++ == 0) {
        c->first_t[k] = t;
        c->first_h[k] = h;
        c->first_r[k] = r;
    }
    if (k == DSV4_ROW_OK || k == DSV4_ROW_NOT_ZERO || k == DSV4_ROW_OTHER)
        return;
    int64_t scaled = c->n[DSV4_ROW_SCALED] + c->n[DSV4_ROW_SINK_IGNORED] + c->n[DSV4_ROW_SINK_TWICE];
    if (scaled == 1) {
        c->one_head = h, c->one_token = t, c->r0 = r, c->same_r = 1;
        c->heads_seen = c->tokens_seen = 1;
    } else {
        c->heads_seen += h != c->one_head ? 1 : 0;
        c->tokens_seen += t != c->one_token ? 1 : 0;
        c->same_r &= fabs(r - c->r0) <= 0x1p-7 * fabs(c->r0);
    }
}

void dsv4_attn_hint(const dsv4_tensor *expected, const dsv4_tensor *actual, const dsv4_attn_rows *rows,
                    dsv4_cmp_result *res)
{
    row_census c;
    memset(&c, 0, sizeof c);
    for (int64_t t = 0; t < rows->T; t++)
        for (int64_t h = 0; h < rows->H; h++) {
            double r;
            dsv4_attn_row_kind k = dsv4_attn_classify_row(expected, actual, rows, t, h, &r);
            note(&c, k, t, h, r);
        }
    const int64_t bad = rows->T * rows->H - c.n[DSV4_ROW_OK];
    if (bad == 0)
        return;
    char *hint = res->hint;
    const size_t len = sizeof res->hint;
    if (c.n[DSV4_ROW_NOT_ZERO]) {
        snprintf(hint, len,
                 "%" PRId64 " (token, head) rows with no valid key are not exactly 0 (first: token %" PRId64
                 ", head %" PRId64 "): an empty key list must give 0, not the sink or stale data",
                 c.n[DSV4_ROW_NOT_ZERO], c.first_t[DSV4_ROW_NOT_ZERO], c.first_h[DSV4_ROW_NOT_ZERO]);
        return;
    }
    const dsv4_attn_row_kind sinks[2] = {DSV4_ROW_SINK_IGNORED, DSV4_ROW_SINK_TWICE};
    for (int s = 0; s < 2; s++) {
        dsv4_attn_row_kind k = sinks[s];
        if (c.n[k] && c.n[k] * 10 >= bad * 9) {
            int64_t t = c.first_t[k], h = c.first_h[k];
            snprintf(hint, len,
                     "%" PRId64 " of %" PRId64 " differing rows are expected x %s (first: token %" PRId64
                     ", head %" PRId64 ", factor %.4g, sink weight %.4g): the attention sink is %s",
                     c.n[k], bad, k == DSV4_ROW_SINK_IGNORED ? "(1 - w_sink)^+-1" : "(1 + w_sink)^-+1", t, h,
                     c.first_r[k], rows->sink_w ? rows->sink_w[t * rows->H + h] : 0.0,
                     k == DSV4_ROW_SINK_IGNORED ? "ignored (missing from the denominator) on one side"
                                                : "counted twice in the denominator on one side");
            return;
        }
    }
    const int64_t scaled = c.n[DSV4_ROW_SCALED] + c.n[DSV4_ROW_SINK_IGNORED] + c.n[DSV4_ROW_SINK_TWICE];
    if (scaled && scaled * 10 >= bad * 9) {
        char who[96];
        if (c.heads_seen == 1)
            snprintf(who, sizeof who, "only head %" PRId64 " (%" PRId64 " tokens, first token %" PRId64 ")",
                     c.one_head, scaled, c.one_token);
        else if (c.tokens_seen == 1)
            snprintf(who, sizeof who, "only token %" PRId64 " (%" PRId64 " heads, first head %" PRId64 ")",
                     c.one_token, scaled, c.one_head);
        else
            snprintf(who, sizeof who, "%" PRId64 " rows (first: token %" PRId64 ", head %" PRId64 ")", scaled,
                     c.one_token, c.one_head);
        if (c.same_r)
            snprintf(hint, len,
                     "%s: whole rows = expected x %.4g, not a sink factor 1/(1-+w): a per-head/row "
                     "scale (softmax scale, normalisation, 0.5x/2x fp8 mix-up)",
                     who, c.r0);
        else
            snprintf(hint, len,
                     "%s: whole rows scaled by a per-row constant (first x %.4g), not a sink "
                     "factor: wrong softmax denominator or normalisation",
                     who, c.r0);
    }
}
