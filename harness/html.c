/* html.c - one self-contained page: summary table; per failing case the
 * message, the commands that reproduce it, and per failing output the
 * metrics, an error heatmap (rows x column blocks, colour = error in units
 * of the tolerance, or the fraction of differing elements for exact
 * outputs), an error histogram and the worst mismatches. */
#define _POSIX_C_SOURCE 200809L
#include "html.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "version.h"

#define HTML_MAX_DETAILED 40

static const char css[] =
    "body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;margin:24px 32px;color:#1d2430;"
    "background:#fafbfc}h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 8px;"
    "border-bottom:1px solid #d0d7de;padding-bottom:4px}h3{font-size:15px;margin:18px 0 6px}"
    "code,pre{font:12.5px ui-monospace,Menlo,Consolas,monospace}pre{background:#f0f3f6;padding:8px 10px;"
    "border-radius:6px;white-space:pre-wrap;word-break:break-all;margin:4px 0}"
    "table{border-collapse:collapse;margin:6px 0}td,th{padding:3px 10px;border-bottom:1px solid #e3e7eb;"
    "text-align:left;vertical-align:top}th{background:#eef1f4;font-weight:600}"
    ".b{display:inline-block;padding:0 7px;border-radius:10px;font-weight:600;font-size:12px}"
    ".PASS{background:#dcf5e3;color:#116329}.FAIL,.ERROR,.BAD-INPUT{background:#ffe0e0;color:#a40e26}"
    ".SKIP{background:#eceff1;color:#57606a}.WARN{background:#fff3c4;color:#7a4d00}"
    ".case{background:#fff;border:1px solid #d0d7de;border-radius:8px;padding:6px 16px 12px;margin:14px 0}"
    ".meta{color:#57606a}.figs{display:flex;flex-wrap:wrap;gap:24px;align-items:flex-start}"
    ".num{text-align:right;font-variant-numeric:tabular-nums}";

/* Float: error/bound on a log scale, green below 1, orange to dark red
 * above.  Exact: the fraction of differing elements. */
static void cell_colour(const dsv4_errmap *m, float v, char *buf, size_t len)
{
    if (v < 0) {
        snprintf(buf, len, "#e6e8eb");
        return;
    }
    double t;
    int r, g, b;
    if (m->exact) {
        if (v == 0) {
            snprintf(buf, len, "#d9f2df");
            return;
        }
        t = 0.25 + 0.75 * v;
        r = (int)(255 - 72 * t), g = (int)(205 - 177 * t), b = (int)(210 - 182 * t);
    } else if (v <= 1) {
        t = v == 0 ? 0 : fmin(1, fmax(0, (log2(v) + 8) / 8)); /* 2^-8 .. 1 */
        r = (int)(225 - 120 * t), g = (int)(245 - 45 * t), b = (int)(228 - 120 * t);
    } else {
        t = fmin(1, log2(v) / 8); /* 1 .. 256 tolerances */
        r = (int)(253 - 70 * t), g = (int)(174 - 146 * t), b = (int)(97 - 69 * t);
    }
    snprintf(buf, len, "#%02x%02x%02x", r, g, b);
}

static void heatmap(FILE *f, const dsv4_errmap *m, const char *output)
{
    int cw = m->cols ? 560 / m->cols : 8, ch = m->rows ? 320 / m->rows : 8;
    cw = cw < 6 ? 6 : cw > 28 ? 28 : cw;
    ch = ch < 6 ? 6 : ch > 22 ? 22 : ch;
    int W = 60 + m->cols * cw + 10, H = 30 + m->rows * ch + 40;
    fprintf(f, "<figure style=\"margin:0\"><svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
               "role=\"img\" aria-label=\"error heatmap of ", W, H);
    dsv4_xml_escape_then(f, output, "\" font-family=\"sans-serif\" font-size=\"11\">\n");
    fprintf(f, "<text x=\"60\" y=\"14\">columns 0..%lld (%lld per block)</text>\n", (long long)m->ncols - 1,
            (long long)m->col_step);
    fprintf(f, "<text x=\"12\" y=\"%d\" transform=\"rotate(-90 12 %d)\" text-anchor=\"middle\">rows 0..%lld (%lld per "
               "block)</text>\n",
            30 + m->rows * ch / 2, 30 + m->rows * ch / 2, (long long)m->nrows - 1, (long long)m->row_step);
    for (int i = 0; i < m->rows; i++)
        for (int j = 0; j < m->cols; j++) {
            float v = m->cell[i * DSV4_MAP_COLS + j];
            char col[16];
            cell_colour(m, v, col, sizeof col);
            long long r0 = (long long)i * m->row_step, c0 = (long long)j * m->col_step;
            long long r1 = r0 + m->row_step - 1, c1 = c0 + m->col_step - 1;
            if (r1 >= m->nrows) r1 = m->nrows - 1;
            if (c1 >= m->ncols) c1 = m->ncols - 1;
            fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\" stroke=\"#fff\" "
                       "stroke-width=\"0.5\"><title>rows %lld-%lld, columns %lld-%lld: ",
                    60 + j * cw, 24 + i * ch, cw, ch, col, r0, r1, c0, c1);
            if (v < 0)
                fprintf(f, "not compared");
            else if (m->exact)
                fprintf(f, "%.3g%% differ", 100.0 * v);
            else
                fprintf(f, "max error %.3g x tolerance", (double)v);
            fprintf(f, "</title></rect>\n");
        }
    /* legend */
    int ly = 30 + m->rows * ch + 8;
    static const float ex[] = {0, 0.05f, 0.3f, 1}, fl[] = {0, 0.01f, 0.25f, 1, 4, 64};
    const float *lv = m->exact ? ex : fl;
    int nl = m->exact ? 4 : 6;
    for (int k = 0; k < nl; k++) {
        char col[16];
        cell_colour(m, lv[k], col, sizeof col);
        fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"14\" height=\"12\" fill=\"%s\"/>", 60 + k * 78, ly, col);
        if (m->exact)
            fprintf(f, "<text x=\"%d\" y=\"%d\">%g%%</text>\n", 78 + k * 78, ly + 10, 100.0 * lv[k]);
        else
            fprintf(f, "<text x=\"%d\" y=\"%d\">%g&#215;tol</text>\n", 78 + k * 78, ly + 10, (double)lv[k]);
    }
    fprintf(f, "</svg><figcaption class=\"meta\">%s</figcaption></figure>\n",
            m->exact ? "heatmap: fraction of differing elements per block (grey: not compared)"
                     : "heatmap: max |actual - expected| / bound per block (green &lt; 1 passes; grey: not "
                       "compared)");
}

static void hist_label(const dsv4_errmap *m, int k, char *buf, size_t len)
{
    if (m->exact) {
        if (k == 0) snprintf(buf, len, "equal");
        else if (k == 1) snprintf(buf, len, "&lt;2");
        else if (k == DSV4_HIST_BINS - 1) snprintf(buf, len, "&#8805;2^%d", k - 1);
        else snprintf(buf, len, "2^%d", k - 1);
    } else {
        if (k == 0) snprintf(buf, len, "0");
        else if (k == 1) snprintf(buf, len, "&lt;2^-7");
        else if (k == DSV4_HIST_BINS - 1) snprintf(buf, len, "&#8805;2^7");
        else snprintf(buf, len, "2^%d", k - 8);
    }
}

static void histogram(FILE *f, const dsv4_errmap *m, const char *output)
{
    int64_t top = 1;
    for (int k = 0; k < DSV4_HIST_BINS; k++)
        if (m->hist[k] > top)
            top = m->hist[k];
    const int bw = 30, H = 160, W = 50 + DSV4_HIST_BINS * bw + 10;
    fprintf(f, "<figure style=\"margin:0\"><svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
               "role=\"img\" aria-label=\"error histogram of ", W, H + 60);
    dsv4_xml_escape_then(f, output, "\" font-family=\"sans-serif\" font-size=\"10\">\n");
    fprintf(f, "<line x1=\"48\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#57606a\"/>\n", H + 10, W - 8, H + 10);
    for (int k = 0; k < DSV4_HIST_BINS; k++) {
        double h = m->hist[k] ? (double)(H - 20) * log1p((double)m->hist[k]) / log1p((double)top) : 0;
        int bad = m->exact ? k > 0 : k >= 8;
        int x = 50 + k * bw;
        char lab[32];
        hist_label(m, k, lab, sizeof lab);
        fprintf(f, "<rect x=\"%d\" y=\"%.1f\" width=\"%d\" height=\"%.1f\" fill=\"%s\"><title>%s: %lld "
                   "elements</title></rect>\n",
                x + 2, H + 10 - h, bw - 4, h, bad ? "#d1242f" : "#4ac26b", lab, (long long)m->hist[k]);
        if (m->hist[k])
            fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"middle\">%lld</text>\n", x + bw / 2, H + 6 - h,
                    (long long)m->hist[k]);
        fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\" transform=\"rotate(-50 %d %d)\">%s</text>\n",
                x + bw / 2 + 3, H + 24, x + bw / 2 + 3, H + 24, lab);
    }
    fprintf(f, "<text x=\"4\" y=\"14\">elements (log scale)</text>\n</svg><figcaption class=\"meta\">%s</figcaption>"
               "</figure>\n",
            m->exact ? "histogram of |actual - expected| (red: differs)"
                     : "histogram of error / bound (red: over the tolerance)");
}

static void mismatch_row(FILE *f, const char *label, const dsv4_mismatch *m)
{
    fprintf(f, "<tr><td>%s</td><td><code>", label);
    dsv4_xml_escape(f, m->index);
    fprintf(f, "</code></td><td class=\"num\">%.9g</td><td class=\"num\">%.9g</td><td class=\"num\">%.3g</td>"
               "<td class=\"num\">%.3g</td><td class=\"num\">%.3g</td><td>",
            m->expected, m->actual, m->abs_err, m->ulp_err, m->tol);
    dsv4_xml_escape_then(f, m->where, "</td></tr>\n");
}

/* A table of mismatches: lead (when given) labelled lead_label, then the
 * n of list, the first of them labelled list_label. */
static void mismatch_table(FILE *f, const dsv4_mismatch *lead, const char *lead_label, const dsv4_mismatch *list, int n,
                           const char *list_label)
{
    fprintf(f, "<table><tr><th></th><th>index</th><th>expected</th><th>actual</th><th>abs</th><th>ulp</th>"
               "<th>bound</th><th>where</th></tr>\n");
    if (lead)
        mismatch_row(f, lead_label, lead);
    for (int j = 0; j < n; j++)
        mismatch_row(f, j ? "" : list_label, &list[j]);
    fprintf(f, "</table>\n");
}

/* The split by lane (docs/semantics/numerics.md A16), when the case has
 * lanes touched by NaN/Inf inputs. */
static void special_paragraph(FILE *f, const dsv4_case_result *r, const dsv4_output_result *o)
{
    const dsv4_special_split *s = &o->special;
    fprintf(f, "<p>Special lanes (touched by NaN/Inf inputs): %lld of %lld; mismatches: %lld in finite lanes, "
               "%lld in lanes touched by NaN/Inf inputs (--special=%s%s).</p>\n",
            (long long)s->lanes, (long long)o->cmp.count, (long long)s->finite_bad, (long long)s->special_bad,
            dsv4_special_mode_name(r->special.mode),
            r->special.mode == DSV4_SPECIAL_SEPARATE ? ": the verdict is the finite lanes'" : "");
    if (!s->n_listed && !s->has_finite_first)
        return;
    mismatch_table(f, s->has_finite_first ? &s->finite_first : NULL, "first finite", s->listed, s->n_listed,
                   "special");
}

static void output_section(FILE *f, const dsv4_case_result *r, const dsv4_output_result *o)
{
    const dsv4_cmp_result *c = &o->cmp;
    fprintf(f, "<h3>output <code>");
    dsv4_xml_escape(f, c->output);
    fprintf(f, "</code> <span class=\"b %s\">%s</span></h3>\n<p>", c->verdict == DSV4_FAIL ? "FAIL" : "WARN",
            dsv4_verdict_name(c->verdict));
    dsv4_xml_escape(f, c->message);
    fprintf(f, "<br><span class=\"meta\">policy (%s): ", dsv4_cmp_kind_name(o->pol.kind));
    dsv4_xml_escape_then(f, o->pol.rule, "</span>");
    if (c->hint[0]) {
        fprintf(f, "<br><b>hint:</b> ");
        dsv4_xml_escape(f, c->hint);
    }
    fprintf(f, "</p>\n<table><tr><th>compared</th><th>mismatches</th><th>max abs</th><th>max rel</th>"
               "<th>max ulp</th><th>worst err/bound</th><th>nmse</th><th>cosine</th><th>NaN exp/act</th>"
               "<th>Inf exp/act</th></tr>\n<tr class=\"num\"><td>%lld</td><td>%lld</td><td>%.3g</td><td>%.3g</td>"
               "<td>%.3g</td><td>%.3g</td><td>%.3g</td><td>%.6g</td><td>%lld/%lld</td><td>%lld/%lld</td></tr>"
               "</table>\n",
            (long long)c->compared, (long long)c->bad, c->max_abs, c->max_rel, c->max_ulp, c->worst_ratio, c->nmse,
            c->cosine, (long long)c->nan_expected, (long long)c->nan_actual, (long long)c->inf_expected,
            (long long)c->inf_actual);
    if (o->map) {
        fprintf(f, "<div class=\"figs\">\n");
        heatmap(f, o->map, c->output);
        histogram(f, o->map, c->output);
        fprintf(f, "</div>\n");
    }
    if (c->has_worst || c->n_first) {
        mismatch_table(f, c->has_worst ? &c->worst : NULL, "worst", c->first, c->n_first, "first");
    }
    if (r->special.has_lanes)
        special_paragraph(f, r, o);
}

static void case_section(FILE *f, int i, const dsv4_case_result *r)
{
    fprintf(f, "<div class=\"case\" id=\"case%d\"><h2><span class=\"b %s\">%s</span> ", i, dsv4_status_word(r), dsv4_status_word(r));
    dsv4_xml_escape_then(f, r->name, "</h2>\n<p class=\"meta\">op <code>");
    dsv4_xml_escape_then(f, r->op, "</code> variant <code>");
    dsv4_xml_escape(f, r->variant);
    fprintf(f, "</code>, seed %llu, from <code>", (unsigned long long)r->seed);
    dsv4_xml_escape_then(f, r->origin, "</code></p>\n");
    if (r->error[0]) {
        fprintf(f, "<p><b>");
        dsv4_xml_escape_then(f, r->error, "</b></p>\n");
    }
    fprintf(f, "<p>Reproduce:</p><pre>");
    dsv4_xml_escape_then(f, r->repro, "</pre>\n");
    if (r->repro_file[0]) {
        fprintf(f, "<p>Replay the saved inputs, expected and actual outputs (<code>");
        dsv4_xml_escape_then(f, r->repro_file, "</code>):</p><pre>");
        dsv4_xml_escape_then(f, r->replay, "</pre>\n");
    }
    for (int k = 0; k < r->n_outputs; k++)
        if (r->outputs[k].cmp.verdict != DSV4_PASS)
            output_section(f, r, &r->outputs[k]);
    fprintf(f, "</div>\n");
}

static void worst_cell(FILE *f, const dsv4_case_result *r)
{
    double worst = -1;
    const char *name = "";
    for (int k = 0; k < r->n_outputs; k++) {
        const dsv4_cmp_result *c = &r->outputs[k].cmp;
        double v = r->outputs[k].pol.kind == DSV4_CMP_FLOAT ? c->worst_ratio : (double)c->bad;
        if (v > worst)
            worst = v, name = c->output;
    }
    if (worst < 0) {
        fprintf(f, "-");
        return;
    }
    dsv4_xml_escape(f, name);
    fprintf(f, " %.3g", worst);
}

int dsv4_write_html(const char *path, const char *suite, const char *impl, const char *command,
                    const dsv4_case_result *rs, int n, dsv4_status *st)
{
    dsv4_report_file rf;
    FILE *f = dsv4_report_open(&rf, path, st);
    if (!f)
        return st->code;
    int pass = 0, fail = 0, skip = 0;
    for (int i = 0; i < n; i++)
        rs[i].status == DSV4_ESKIP ? skip++ : rs[i].status == DSV4_OK ? pass++ : fail++;
    char when[40];
    time_t now = time(NULL);
    struct tm tmv;
    gmtime_r(&now, &tmv);
    strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &tmv);
    fprintf(f, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>dsv4check: ");
    dsv4_xml_escape_then(f, suite, " (impl ");
    dsv4_xml_escape(f, impl);
    fprintf(f, ")</title>\n<style>%s</style></head><body>\n<h1>dsv4check report</h1>\n<p class=\"meta\">suite <b>",
            css);
    dsv4_xml_escape_then(f, suite, "</b>, implementation <b>");
    dsv4_xml_escape(f, impl);
    fprintf(f, "</b>, %s, dsv4check %s (%s)</p>\n<pre>", when, DSV4_VERSION, DSV4_GIT_REV);
    dsv4_xml_escape(f, command);
    fprintf(f, "</pre>\n<p><b>summary: %d passed, %d failed, %d skipped</b></p>\n", pass, fail, skip);
    fprintf(f, "<table><tr><th>case</th><th>op [variant]</th><th>result</th><th>worst (exact: #diff; float: "
               "err/bound)</th><th class=\"num\">seconds</th></tr>\n");
    for (int i = 0; i < n; i++) {
        const dsv4_case_result *r = &rs[i];
        int bad = r->status != DSV4_OK && r->status != DSV4_ESKIP;
        fprintf(f, "<tr><td>");
        if (bad)
            fprintf(f, "<a href=\"#case%d\">", i);
        dsv4_xml_escape(f, r->name);
        fprintf(f, "%s</td><td>", bad ? "</a>" : "");
        dsv4_xml_escape_then(f, r->op, " [");
        dsv4_xml_escape(f, r->variant);
        fprintf(f, "]</td><td><span class=\"b %s\">%s</span>", dsv4_status_word(r), dsv4_status_word(r));
        if (r->special.relied)
            fprintf(f, " <span class=\"b WARN\" title=\"passes under --special=separate only: mismatches in "
                       "lanes touched by NaN/Inf inputs are not counted\">SEPARATE</span>");
        if (r->drift[0]) {
            fprintf(f, " <span class=\"b WARN\" title=\"");
            dsv4_xml_escape_then(f, r->drift, "\">DRIFT</span>");
        }
        fprintf(f, "</td><td>");
        worst_cell(f, r);
        fprintf(f, "</td><td class=\"num\">%.3f</td></tr>\n", r->seconds);
    }
    fprintf(f, "</table>\n");
    for (int i = 0; i < n; i++)
        if (rs[i].drift[0]) {
            fprintf(f, "<p><span class=\"b WARN\">DRIFT</span> ");
            dsv4_xml_escape_then(f, rs[i].name, ": ");
            dsv4_xml_escape_then(f, rs[i].drift, "</p>\n");
        }
    /* Detailed sections (heatmaps: ~100 KB each) for the first
     * HTML_MAX_DETAILED failing or warning cases; the rest are named. */
    int shown = 0, more = 0;
    for (int i = 0; i < n; i++) {
        int bad = rs[i].status != DSV4_OK && rs[i].status != DSV4_ESKIP;
        if (!bad && rs[i].verdict != DSV4_WARN)
            continue;
        if (shown++ < HTML_MAX_DETAILED)
            case_section(f, i, &rs[i]);
        else
            more++;
    }
    if (more)
        fprintf(f, "<p class=\"meta\">%d more failing or warning cases are not detailed here (see the table, "
                   "the console output or the JSON report).</p>\n", more);
    fprintf(f, "</body></html>\n");
    return dsv4_report_commit(&rf, st);
}
