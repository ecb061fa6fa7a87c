/* report.c - the reports written from a run's results: the console lines
 * and summary table, JUnit XML and JSON (the HTML page is html.c's). */
#define _XOPEN_SOURCE 700
#include "report.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "version.h"

void dsv4_result_free_maps(dsv4_case_result *r)
{
    for (int k = 0; k < r->n_outputs; k++) {
        free(r->outputs[k].map);
        r->outputs[k].map = NULL;
    }
}

const char *dsv4_status_word(const dsv4_case_result *r)
{
    switch (r->status) {
    case DSV4_OK: return r->verdict == DSV4_WARN ? "WARN" : "PASS";
    case DSV4_EFAIL: return "FAIL";
    case DSV4_EINPUT: return "BAD-INPUT";
    case DSV4_ESKIP: return "SKIP";
    default: return "ERROR";
    }
}

static void print_located(FILE *f, const char *label, const dsv4_mismatch *m)
{
    fprintf(f, "      %s %s: expected %.9g, actual %.9g%s%s%s\n", label, m->index, m->expected, m->actual,
            m->where[0] ? " (" : "", m->where, m->where[0] ? ")" : "");
}

/* The split of one output's mismatches by lane (docs/semantics/numerics.md
 * A16): counts, the first finite mismatch, and under separate the special
 * lanes' mismatches as a note. */
static void print_special(FILE *f, const dsv4_case_result *r, const dsv4_output_result *o)
{
    const dsv4_special_split *s = &o->special;
    const int separate = r->special.mode == DSV4_SPECIAL_SEPARATE;
    fprintf(f, "      special lanes (touched by NaN/Inf inputs): %" PRId64 " of %" PRId64 "; mismatches: %" PRId64
            " in finite lanes, %" PRId64 " in lanes touched by NaN/Inf inputs%s\n",
            s->lanes, o->cmp.count, s->finite_bad, s->special_bad,
            separate ? " (--special=separate: the verdict is the finite lanes')" : "");
    if (s->has_finite_first && !separate)
        print_located(f, "first finite", &s->finite_first);
    if (separate && s->special_bad) {
        fprintf(f, "      note: %" PRId64 " mismatch%s in lanes touched by NaN/Inf inputs, not counted (strict verdict "
                "%s):\n", s->special_bad, s->special_bad == 1 ? "" : "es", dsv4_verdict_name(s->strict_verdict));
        for (int k = 0; k < s->n_listed; k++)
            print_located(f, "special", &s->listed[k]);
    }
}

void dsv4_print_result(FILE *f, const dsv4_case_result *r, int verbose)
{
    fprintf(f, "%-9s %s  [%s %s] %.3f s\n", dsv4_status_word(r), r->name, r->op[0] ? r->op : "?",
            r->variant, r->seconds);
    if (r->error[0])
        fprintf(f, "    %s\n", r->error);
    if (r->note[0])
        fprintf(f, "    %s\n", r->note);
    if (r->special.unknown[0])
        fprintf(f, "    special lanes unknown (every lane counts): %s\n", r->special.unknown);
    for (int k = 0; k < r->n_outputs; k++) {
        const dsv4_output_result *o = &r->outputs[k];
        const int has_special = r->special.has_lanes && (o->special.finite_bad || o->special.special_bad);
        if (verbose || o->cmp.verdict != DSV4_PASS || has_special) {
            dsv4_cmp_print(f, &o->cmp, &o->pol);
            if (r->special.has_lanes)
                print_special(f, r, o);
        }
    }
    if ((r->status == DSV4_EFAIL || r->status == DSV4_ERUNTIME || r->status == DSV4_EINPUT ||
         r->verdict == DSV4_WARN) && r->repro[0])
        fprintf(f, "    at %s; reproduce: %s\n", r->origin, r->repro);
    if (r->replay[0])
        fprintf(f, "    repro file %s; replay: %s\n", r->repro_file, r->replay);
}

int dsv4_exit_code(const dsv4_case_result *rs, int n)
{
    int bad_input = 0, runtime = 0, fail = 0, ran = 0;
    for (int i = 0; i < n; i++) {
        bad_input |= rs[i].status == DSV4_EINPUT;
        runtime |= rs[i].status == DSV4_ERUNTIME;
        fail |= rs[i].status == DSV4_EFAIL;
        ran |= rs[i].status != DSV4_ESKIP;
    }
    if (bad_input)
        return DSV4_EINPUT;
    if (runtime)
        return DSV4_ERUNTIME;
    if (fail)
        return DSV4_EFAIL;
    return (n > 0 && !ran) ? DSV4_ESKIP : DSV4_OK;
}

/* The worst output of a case as "name: value" for the table: float
 * outputs by err/bound, the others (exact, mx, index_set) by their count of
 * mismatches; a failing output before any passing one. */
static void worst_str(const dsv4_case_result *r, char *buf, size_t len)
{
    double worst = 0;
    const char *name = "";
    int worst_fails = 0;
    for (int k = 0; k < r->n_outputs; k++) {
        const dsv4_cmp_result *c = &r->outputs[k].cmp;
        double v = r->outputs[k].pol.kind == DSV4_CMP_FLOAT ? c->worst_ratio : (double)c->bad;
        int fails = c->verdict == DSV4_FAIL;
        if (k == 0 || fails > worst_fails || (fails == worst_fails && v > worst)) {
            worst = v;
            name = c->output;
            worst_fails = fails;
        }
    }
    if (!r->n_outputs)
        snprintf(buf, len, "-");
    else
        snprintf(buf, len, "%s %.3g", name, worst);
}

int dsv4_print_summary(FILE *f, const dsv4_case_result *rs, int n)
{
    int pass = 0, fail = 0, skip = 0, warn = 0, relied = 0;
    fprintf(f, "\n%-48s %-34s %-10s %s\n", "case", "op", "result", "worst (float: err/bound; others: #mismatches)");
    for (int i = 0; i < n; i++) {
        char w[128];
        worst_str(&rs[i], w, sizeof w);
        fprintf(f, "%-48.48s %-34.34s %-10s %s\n", rs[i].name, rs[i].op, dsv4_status_word(&rs[i]), w);
        if (rs[i].status == DSV4_ESKIP)
            skip++;
        else if (rs[i].status == DSV4_OK)
            pass++, warn += rs[i].verdict == DSV4_WARN, relied += rs[i].special.relied;
        else
            fail++;
    }
    fprintf(f, "summary: %d passed, %d failed, %d skipped\n", pass, fail, skip);
    if (warn)
        fprintf(f, "(%d of the passed cases warn: within budget, see above)\n", warn);
    if (relied)
        fprintf(f, "(%d of the passed cases pass under --special=separate only: their mismatches in lanes touched "
                "by NaN/Inf inputs are not counted, see above)\n", relied);
    return dsv4_exit_code(rs, n);
}

/* ---- JUnit XML and JSON ---- */

void dsv4_xml_escape(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\n': fputs("&#10;", f); break;
        default:
            if ((unsigned char)*s < 0x20)
                fputc(' ', f);
            else
                fputc(*s, f);
        }
    }
}

void dsv4_xml_escape_then(FILE *f, const char *s, const char *markup)
{
    dsv4_xml_escape(f, s);
    fputs(markup, f);
}

static void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch == '\n')
            fputs("\\n", f);
        else if (ch < 0x20)
            fprintf(f, "\\u%04x", ch);
        else
            fputc(ch, f);
    }
    fputc('"', f);
}

static void json_number(FILE *f, double v)
{
    if (isnan(v))
        fputs("\"nan\"", f);
    else if (isinf(v))
        fputs(v > 0 ? "\"inf\"" : "\"-inf\"", f);
    else
        fprintf(f, "%.17g", v);
}

/* `, "key": value`: the writer's one field pattern. */
static void json_num(FILE *f, const char *key, double v)
{
    fprintf(f, ", \"%s\": ", key);
    json_number(f, v);
}

static void json_str(FILE *f, const char *key, const char *v)
{
    fprintf(f, ", \"%s\": ", key);
    json_string(f, v);
}

static void mismatch_text(const dsv4_mismatch *m, char *buf, size_t len)
{
    snprintf(buf, len, "%s: expected %.9g, actual %.9g, abs %.3g, rel %.3g%s%s%s", m->index, m->expected,
             m->actual, m->abs_err, m->rel_err, m->where[0] ? " (" : "", m->where, m->where[0] ? ")" : "");
}

static void junit_property(FILE *f, const char *name, double v)
{
    fprintf(f, "        <property name=\"");
    dsv4_xml_escape(f, name);
    fprintf(f, "\" value=\"%.9g\"/>\n", v);
}

static void junit_text_property(FILE *f, const char *name, const char *value)
{
    fprintf(f, "        <property name=\"");
    dsv4_xml_escape_then(f, name, "\" value=\"");
    dsv4_xml_escape_then(f, value, "\"/>\n");
}

/* The error metrics after max_abs, in the order both the JUnit and the JSON
 * report list them; sign_stat only where the policy ran the sign test. */
static void put_error_metrics(FILE *f, const dsv4_output_result *o,
                              void (*put)(FILE *f, const char *name, double v))
{
    put(f, "max_rel", o->cmp.max_rel);
    put(f, "max_ulp", o->cmp.max_ulp);
    put(f, "worst_ratio", o->cmp.worst_ratio);
    put(f, "nmse", o->cmp.nmse);
    put(f, "cosine", o->cmp.cosine);
    if (o->pol.sign_test)
        put(f, "sign_stat", o->cmp.sign_stat);
}

/* A report's text, written into the file write_report holds open. */
typedef void (*report_body)(FILE *f, const char *suite, const char *impl, const dsv4_case_result *rs,
                            int n);

/* The JUnit and JSON reports: the body into a temporary file that replaces
 * path only once whole (dsv4_report_open). */
static int write_report(const char *path, report_body body, const char *suite, const char *impl,
                        const dsv4_case_result *rs, int n, dsv4_status *st)
{
    dsv4_report_file rf;
    FILE *f = dsv4_report_open(&rf, path, st);
    if (!f)
        return st->code;
    body(f, suite, impl, rs, n);
    return dsv4_report_commit(&rf, st);
}

static void junit_body(FILE *f, const char *suite, const char *impl, const dsv4_case_result *rs, int n)
{
    int tests = 0, failures = 0, errors = 0, skipped = 0;
    double total = 0;
    for (int i = 0; i < n; i++) {
        int units = rs[i].n_outputs ? rs[i].n_outputs : 1;
        tests += units;
        total += rs[i].seconds;
        if (rs[i].status == DSV4_ESKIP)
            skipped += units;
        else if (rs[i].status == DSV4_EINPUT || rs[i].status == DSV4_ERUNTIME)
            errors += units;
        else
            for (int k = 0; k < rs[i].n_outputs; k++)
                failures += rs[i].outputs[k].cmp.verdict == DSV4_FAIL;
        if (rs[i].status == DSV4_EFAIL && rs[i].n_outputs == 0)
            failures++;
    }
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n");
    fprintf(f, "  <testsuite name=\"");
    dsv4_xml_escape_then(f, suite, " (impl ");
    dsv4_xml_escape(f, impl);
    fprintf(f, ")\" tests=\"%d\" failures=\"%d\" errors=\"%d\" skipped=\"%d\" time=\"%.3f\">\n", tests,
            failures, errors, skipped, total);
    for (int i = 0; i < n; i++) {
        const dsv4_case_result *r = &rs[i];
        int units = r->n_outputs ? r->n_outputs : 1;
        for (int k = 0; k < units; k++) {
            const dsv4_output_result *o = r->n_outputs ? &r->outputs[k] : NULL;
            fprintf(f, "    <testcase classname=\"");
            dsv4_xml_escape_then(f, r->op[0] ? r->op : "dsv4check", "\" name=\"");
            dsv4_xml_escape(f, r->name);
            if (o) {
                fputc('/', f);
                dsv4_xml_escape(f, o->cmp.output);
            }
            fprintf(f, "\" time=\"%.3f\">\n      <properties>\n", r->seconds / units);
            junit_text_property(f, "variant", r->variant);
            fprintf(f, "        <property name=\"seed\" value=\"%" PRIu64 "\"/>\n", r->seed);
            junit_text_property(f, "origin", r->origin);
            if (r->drift[0])
                junit_text_property(f, "drift", r->drift);
            if (o) {
                junit_text_property(f, "policy", o->pol.rule);
                junit_property(f, "compared", (double)o->cmp.compared);
                junit_property(f, "mismatches", (double)o->cmp.bad);
                junit_property(f, "max_abs", o->cmp.max_abs);
                put_error_metrics(f, o, junit_property);
                if (r->special.has_lanes) {
                    junit_property(f, "special_lanes", (double)o->special.lanes);
                    junit_property(f, "finite_mismatches", (double)o->special.finite_bad);
                    junit_property(f, "special_mismatches", (double)o->special.special_bad);
                }
            }
            fprintf(f, "      </properties>\n");
            if (r->status == DSV4_ESKIP) {
                fprintf(f, "      <skipped message=\"");
                dsv4_xml_escape_then(f, r->error, "\"/>\n");
            } else if (r->status == DSV4_EINPUT || r->status == DSV4_ERUNTIME) {
                fprintf(f, "      <error message=\"");
                dsv4_xml_escape_then(f, r->error, "\"/>\n");
            } else if ((o && o->cmp.verdict == DSV4_FAIL) || (!o && r->status == DSV4_EFAIL)) {
                char msg[1024] = "";
                if (o && o->cmp.has_worst) {
                    char w[512];
                    mismatch_text(&o->cmp.worst, w, sizeof w);
                    snprintf(msg, sizeof msg, "%s: %s; worst %s", o->cmp.output, o->cmp.message, w);
                } else {
                    snprintf(msg, sizeof msg, "%s", o ? o->cmp.message : r->error);
                }
                fprintf(f, "      <failure message=\"");
                dsv4_xml_escape_then(f, msg, "\">");
                dsv4_xml_escape(f, msg);
                if (o && o->cmp.hint[0]) {
                    fputs("&#10;hint: ", f);
                    dsv4_xml_escape(f, o->cmp.hint);
                }
                fputs("&#10;reproduce: ", f);
                dsv4_xml_escape_then(f, r->repro, "</failure>\n");
            }
            fprintf(f, "    </testcase>\n");
        }
    }
    fprintf(f, "  </testsuite>\n</testsuites>\n");
}

int dsv4_write_junit(const char *path, const char *suite, const char *impl,
                     const dsv4_case_result *rs, int n, dsv4_status *st)
{
    return write_report(path, junit_body, suite, impl, rs, n, st);
}

static void json_mismatch(FILE *f, const dsv4_mismatch *m)
{
    fprintf(f, "{\"index\": ");
    json_string(f, m->index);
    fprintf(f, ", \"flat\": %" PRId64 ", \"expected\": ", m->flat);
    json_number(f, m->expected);
    json_num(f, "actual", m->actual);
    json_num(f, "abs", m->abs_err);
    json_num(f, "rel", m->rel_err);
    json_num(f, "ulp", m->ulp_err);
    json_num(f, "bound", m->tol);
    json_str(f, "where", m->where);
    fprintf(f, "}");
}

/* An output's split by lane: both counts, the strict and the finite
 * verdicts, the first finite and the first special mismatches. */
static void json_special(FILE *f, const dsv4_special_split *s)
{
    fprintf(f, "{\"lanes\": %" PRId64 ", \"finite_mismatches\": %" PRId64 ", \"special_mismatches\": %" PRId64,
            s->lanes, s->finite_bad, s->special_bad);
    json_str(f, "strict_verdict", dsv4_verdict_name(s->strict_verdict));
    json_str(f, "finite_verdict", dsv4_verdict_name(s->finite_verdict));
    fprintf(f, ", \"first_finite\": ");
    if (s->has_finite_first)
        json_mismatch(f, &s->finite_first);
    else
        fprintf(f, "null");
    fprintf(f, ", \"special_first\": [");
    for (int k = 0; k < s->n_listed; k++) {
        if (k)
            fprintf(f, ", ");
        json_mismatch(f, &s->listed[k]);
    }
    fprintf(f, "]}");
}

static void json_body(FILE *f, const char *suite, const char *impl, const dsv4_case_result *rs, int n)
{
    fprintf(f, "{\n  \"dsv4check\": ");
    json_string(f, DSV4_VERSION);
    fprintf(f, ",\n  \"suite\": ");
    json_string(f, suite);
    fprintf(f, ",\n  \"impl\": ");
    json_string(f, impl);
    fprintf(f, ",\n  \"exit_code\": %d,\n  \"cases\": [", dsv4_exit_code(rs, n));
    for (int i = 0; i < n; i++) {
        const dsv4_case_result *r = &rs[i];
        fprintf(f, "%s\n    {\"name\": ", i ? "," : "");
        json_string(f, r->name);
        json_str(f, "op", r->op);
        json_str(f, "variant", r->variant);
        json_str(f, "origin", r->origin);
        json_str(f, "golden", r->golden);
        fprintf(f, ", \"seed\": %" PRIu64 ", \"result\": ", r->seed);
        json_string(f, dsv4_status_word(r));
        fprintf(f, ", \"seconds\": %.6f, \"error\": ", r->seconds);
        json_string(f, r->error);
        json_str(f, "reproduce", r->repro);
        json_str(f, "repro_file", r->repro_file);
        json_str(f, "drift", r->drift);
        json_str(f, "note", r->note);
        json_str(f, "special_mode", dsv4_special_mode_name(r->special.mode));
        fprintf(f, ", \"special_lanes\": %s, \"special_relied\": %s", r->special.has_lanes ? "true" : "false",
                r->special.relied ? "true" : "false");
        json_str(f, "special_unknown", r->special.unknown);
        fprintf(f, ",\n     \"outputs\": [");
        for (int k = 0; k < r->n_outputs; k++) {
            const dsv4_output_result *o = &r->outputs[k];
            fprintf(f, "%s\n      {\"name\": ", k ? "," : "");
            json_string(f, o->cmp.output);
            json_str(f, "verdict", dsv4_verdict_name(o->cmp.verdict));
            fprintf(f, ", \"policy\": {\"kind\": ");
            json_string(f, dsv4_cmp_kind_name(o->pol.kind));
            json_num(f, "atol", o->pol.atol);
            json_num(f, "rtol", o->pol.rtol);
            json_num(f, "ulp", o->pol.ulp);
            json_str(f, "rule", o->pol.rule);
            fprintf(f, "},\n       \"metrics\": {\"count\": %" PRId64 ", \"compared\": %" PRId64
                       ", \"mismatches\": %" PRId64 ", \"max_abs\": ",
                    o->cmp.count, o->cmp.compared, o->cmp.bad);
            json_number(f, o->cmp.max_abs);
            put_error_metrics(f, o, json_num);
            fprintf(f, "},\n       \"message\": ");
            json_string(f, o->cmp.message);
            json_str(f, "hint", o->cmp.hint);
            fprintf(f, ", \"first\": [");
            for (int j = 0; j < o->cmp.n_first; j++) {
                if (j)
                    fprintf(f, ", ");
                json_mismatch(f, &o->cmp.first[j]);
            }
            fprintf(f, "], \"worst\": ");
            if (o->cmp.has_worst)
                json_mismatch(f, &o->cmp.worst);
            else
                fprintf(f, "null");
            fprintf(f, ",\n       \"special\": ");
            if (r->special.has_lanes)
                json_special(f, &o->special);
            else
                fprintf(f, "null");
            fprintf(f, "}");
        }
        fprintf(f, "]}");
    }
    fprintf(f, "\n  ]\n}\n");
}

int dsv4_write_json(const char *path, const char *suite, const char *impl,
                    const dsv4_case_result *rs, int n, dsv4_status *st)
{
    return write_report(path, json_body, suite, impl, rs, n, st);
}

/* ---- report files: written whole or not at all ---- */

FILE *dsv4_report_open(dsv4_report_file *rf, const char *path, dsv4_status *st)
{
    memset(rf, 0, sizeof *rf);
    /* Through a symbolic link: replace what it points at, keep the link. */
    struct stat sb;
    char *real = lstat(path, &sb) == 0 && S_ISLNK(sb.st_mode) ? realpath(path, NULL) : NULL;
    snprintf(rf->path, sizeof rf->path, "%s", real ? real : path);
    free(real);
    if (snprintf(rf->tmp, sizeof rf->tmp, "%s.XXXXXX", rf->path) >= (int)sizeof rf->tmp) {
        dsv4_fail(st, DSV4_EINPUT, "%s: cannot write report: path too long", path);
        return NULL;
    }
    int fd = mkstemp(rf->tmp);
    if (fd < 0) {
        dsv4_fail(st, DSV4_EINPUT, "%s: cannot write report: %s", path, strerror(errno));
        return NULL;
    }
    mode_t mask = umask(0); /* the mode fopen would have given it */
    umask(mask);
    fchmod(fd, 0666 & ~mask);
    if (!(rf->f = fdopen(fd, "w"))) {
        dsv4_fail(st, DSV4_ERUNTIME, "%s: cannot write report: %s", path, strerror(errno));
        close(fd);
        unlink(rf->tmp);
    }
    return rf->f;
}

int dsv4_report_commit(dsv4_report_file *rf, dsv4_status *st)
{
    int bad = ferror(rf->f);
    if (fclose(rf->f) != 0 || bad) {
        unlink(rf->tmp);
        return dsv4_fail(st, DSV4_EINPUT, "%s: write error", rf->path);
    }
    if (rename(rf->tmp, rf->path) != 0) {
        int err = errno;
        unlink(rf->tmp);
        return dsv4_fail(st, DSV4_EINPUT, "%s: cannot write report: %s", rf->path, strerror(err));
    }
    return DSV4_OK;
}

/* ---- the files a run reads ---- */

int dsv4_input_files_add(dsv4_input_files *s, const char *path)
{
    struct stat sb;
    if (stat(path, &sb) != 0 || dsv4_input_files_match(s, path))
        return 0;
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 64;
        dsv4_input_file *f = realloc(s->f, (size_t)cap * sizeof *f);
        if (!f)
            return -1;
        s->f = f;
        s->cap = cap;
    }
    dsv4_input_file *f = &s->f[s->n++];
    f->dev = (uint64_t)sb.st_dev;
    f->ino = (uint64_t)sb.st_ino;
    snprintf(f->path, sizeof f->path, "%s", path);
    return 0;
}

const char *dsv4_input_files_match(const dsv4_input_files *s, const char *path)
{
    struct stat sb;
    if (!s || stat(path, &sb) != 0)
        return NULL;
    for (int k = 0; k < s->n; k++)
        if (s->f[k].dev == (uint64_t)sb.st_dev && s->f[k].ino == (uint64_t)sb.st_ino)
            return s->f[k].path;
    return NULL;
}

void dsv4_input_files_free(dsv4_input_files *s)
{
    free(s->f);
    memset(s, 0, sizeof *s);
}
