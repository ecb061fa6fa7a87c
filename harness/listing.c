#define _POSIX_C_SOURCE 200809L
/* listing.c - the text of `list` and `show` (listing.h). */
#include "listing.h"

#include "chain.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* The params of op, then its inputs under the heading given. */
static void list_params_and_inputs(FILE *f, const dsv4_op *op, const char *inputs_heading)
{
    fprintf(f, "  params:\n");
    for (const dsv4_param_spec *p = dsv4_op_params(op); p->name; p++)
        fprintf(f, "    %-16s %-9s %-8s %s\n", p->name, dsv4_ptype_name(p->type), p->def ? p->def : "required",
                p->doc);
    fprintf(f, "  %s:\n", inputs_heading);
    for (const dsv4_io_spec *io = dsv4_op_inputs(op); io->name; io++)
        fprintf(f, "    %-20s %-16s %s\n", io->name, dsv4_dtype_name(io->dtype), io->doc);
}

/* Every layer chain: its variants, params, generated tensors and stages. */
static void list_chains(FILE *f)
{
    for (int i = 0; i < dsv4_chain_count(); i++) {
        const dsv4_op *op = dsv4_chain_at(i)->desc;
        fprintf(f, "%s  (a chain of the ops above: docs/semantics/chain.md)\n  %s\n  source: %s\n  variants:\n",
                op->name, op->summary, op->source);
        for (int v = 0; v < dsv4_op_variant_count(op); v++)
            fprintf(f, "    %-24s %s\n", dsv4_op_variant_name(op, v), dsv4_op_variant_doc(op, v));
        list_params_and_inputs(f, op, "primary tensors (generated)");
        fprintf(f, "  stages (a tap after each):\n");
        for (const dsv4_io_spec *io = dsv4_op_outputs(op); io->name; io++)
            fprintf(f, "    %-20s %s\n", io->name, io->doc);
    }
}

void dsv4_list_ops(FILE *f, const dsv4_backend *b)
{
    for (int i = 0; i < dsv4_op_count(); i++) {
        const dsv4_op *op = dsv4_op_at(i);
        fprintf(f, "%s\n  %s\n  source: %s\n  variants:\n", op->name, op->summary, op->source);
        for (int v = 0; v < dsv4_op_variant_count(op); v++)
            fprintf(f, "    %-24s%s %s\n", dsv4_op_variant_name(op, v),
                    b && !dsv4_backend_supports(b, op, v) ? " (not in this impl)" : "", dsv4_op_variant_doc(op, v));
        list_params_and_inputs(f, op, "inputs");
        fprintf(f, "  outputs:\n");
        for (const dsv4_io_spec *io = dsv4_op_outputs(op); io->name; io++)
            fprintf(f, "    %-20s %-16s %s%s%s\n", io->name, dsv4_dtype_name(io->dtype), io->doc,
                    io->golden_dtype != DSV4_DT_NONE ? "; golden stores the ideal as " : "",
                    io->golden_dtype != DSV4_DT_NONE ? dsv4_dtype_name(io->golden_dtype) : "");
    }
    list_chains(f);
}

void dsv4_list_impl(FILE *f, const dsv4_backend *b)
{
    int yes = 0, all = 0;
    if (b->plugin)
        fprintf(f, "plug-in ABI %d, device %d%s\n", b->plugin->abi_version, b->device,
                b->device < 0 ? " (default)" : "");
    fprintf(f, "%-10s %-34s %s\n", "provides", "op", "variant");
    for (int i = 0; i < dsv4_op_count(); i++) {
        const dsv4_op *op = dsv4_op_at(i);
        for (int v = 0; v < dsv4_op_variant_count(op); v++, all++) {
            int s = dsv4_backend_supports(b, op, v);
            yes += s;
            fprintf(f, "%-10s %-34s %s\n", s ? "yes" : "no", op->name, dsv4_op_variant_name(op, v));
        }
    }
    fprintf(f, "%d of %d op variants provided\n", yes, all);
}

void dsv4_list_markdown(FILE *f)
{
    fprintf(f, "| op | variants (first = default) | source |\n|---|---|---|\n");
    for (int i = 0; i < dsv4_op_count(); i++) {
        const dsv4_op *op = dsv4_op_at(i);
        fprintf(f, "| `%s` | ", op->name);
        for (int v = 0; v < dsv4_op_variant_count(op); v++)
            fprintf(f, "%s`%s`", v ? ", " : "", dsv4_op_variant_name(op, v));
        fprintf(f, " | %s |\n", op->source);
    }
}

static void show_tensor(FILE *f, const dsv4_tensor *t)
{
    char shape[96];
    fprintf(f, "    %-24s %-18s %s", t->name, dsv4_dtype_name(t->dtype), dsv4_shape_str(t, shape, sizeof shape));
    if (t->output_dtype != DSV4_DT_NONE)
        fprintf(f, "  (ideal; kernel dtype %s)", dsv4_dtype_name(t->output_dtype));
    int64_t n = dsv4_tensor_numel(t);
    fprintf(f, "\n      ");
    for (int64_t i = 0; i < n && i < 8; i++)
        fprintf(f, "%s%.9g", i ? ", " : "", dsv4_tensor_get(t, i));
    fprintf(f, "%s\n", n > 8 ? ", ..." : "");
}

void dsv4_show_golden(FILE *f, const char *path, const dsv4_golden *g)
{
    fprintf(f, "%s\n  schema %d, op %s, variant %s, case %s, seed %" PRIu64 "\n  generator %s, created %s\n", path,
            g->schema, g->op, g->variant, g->case_name, g->seed, g->generator, g->created);
    fprintf(f, "  params:\n");
    for (int k = 0; k < g->params.n; k++) {
        char v[4096];
        fprintf(f, "    %s = %s\n", g->params.p[k].name, dsv4_param_value_str(&g->params.p[k], v, sizeof v));
    }
    fprintf(f, "  inputs:\n");
    for (int k = 0; k < g->inputs.n; k++)
        show_tensor(f, &g->inputs.t[k]);
    fprintf(f, "  outputs:\n");
    for (int k = 0; k < g->outputs.n; k++)
        show_tensor(f, &g->outputs.t[k]);
}

/* ---- list --goldens ---- */

/* One golden's index entry: what a user looks a golden up by. */
typedef struct golden_entry {
    char file[4096];
    char op[64], variant[64], case_name[192];
    uint64_t seed;
    char in[2048], out[1024]; /* "NAME DTYPE[SHAPE], ..." */
    char in_json[3072], out_json[1536];
} golden_entry;

static void tensor_list(const dsv4_tensors *ts, char *txt, size_t tlen, char *json, size_t jlen)
{
    txt[0] = '\0';
    snprintf(json, jlen, "[");
    for (int k = 0; k < ts->n; k++) {
        const dsv4_tensor *t = &ts->t[k];
        char shape[96];
        dsv4_shape_str(t, shape, sizeof shape);
        /* An ideal stored for a float output: what the kernel (and an
         * actuals file) gives is the output_dtype. */
        int ideal = t->output_dtype != DSV4_DT_NONE;
        const char *kdt = ideal ? dsv4_dtype_name(t->output_dtype) : "";
        snprintf(txt + strlen(txt), tlen - strlen(txt), "%s%s %s%s%s%s%s", k ? ", " : "", t->name,
                 dsv4_dtype_name(t->dtype), shape, ideal ? " (kernel " : "", kdt, ideal ? ")" : "");
        /* Tensor and dtype names are [A-Za-z0-9_]: no JSON escaping needed. */
        snprintf(json + strlen(json), jlen - strlen(json), "%s{\"name\": \"%s\", \"dtype\": \"%s\", \"shape\": %s%s%s%s}",
                 k ? ", " : "", t->name, dsv4_dtype_name(t->dtype), shape, ideal ? ", \"kernel_dtype\": \"" : "", kdt,
                 ideal ? "\"" : "");
    }
    snprintf(json + strlen(json), jlen - strlen(json), "]");
}

static int entry_cmp(const void *x, const void *y)
{
    const golden_entry *a = x, *b = y;
    int c = strcmp(a->op, b->op);
    if (!c)
        c = strcmp(a->variant, b->variant);
    if (!c)
        c = strcmp(a->case_name, b->case_name);
    return c ? c : strcmp(a->file, b->file);
}

static int is_h5_name(const char *n)
{
    size_t len = strlen(n);
    return n[0] != '.' && len > 3 && strcmp(n + len - 3, ".h5") == 0;
}

static void json_text(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    fputc('"', f);
}

static void print_entries(FILE *f, const golden_entry *e, int n, int json, const char *dir)
{
    if (json) {
        fprintf(f, "[\n");
        for (int i = 0; i < n; i++) {
            fprintf(f, "  {\"file\": ");
            json_text(f, e[i].file);
            fprintf(f, ", \"op\": \"%s\", \"variant\": ", e[i].op);
            json_text(f, e[i].variant);
            fprintf(f, ", \"case\": ");
            json_text(f, e[i].case_name);
            fprintf(f, ", \"seed\": %" PRIu64 ", \"inputs\": %s, \"outputs\": %s}%s\n", e[i].seed, e[i].in_json,
                    e[i].out_json, i + 1 < n ? "," : "");
        }
        fprintf(f, "]\n");
        return;
    }
    int ops = 0;
    for (int i = 0; i < n; i++) {
        ops += i == 0 || strcmp(e[i].op, e[i - 1].op) != 0;
        fprintf(f, "%-32s %-24s %-44s %s  in: %s -> out: %s\n", e[i].op, e[i].variant, e[i].case_name, e[i].file,
                e[i].in, e[i].out);
    }
    fprintf(f, "%d golden%s of %d op%s in %s\n", n, n == 1 ? "" : "s", ops, ops == 1 ? "" : "s", dir);
}

/* The .h5 file names of dir, sorted. */
static int h5_names(const char *dir, char ***names, int *n, dsv4_status *st)
{
    DIR *d = opendir(dir);
    if (!d)
        return dsv4_fail(st, DSV4_EINPUT, "list --goldens %s: cannot open the folder: %s", dir, strerror(errno));
    int cap = 0, rc = DSV4_OK;
    *names = NULL;
    *n = 0;
    for (struct dirent *de; !rc && (de = readdir(d));) {
        if (!is_h5_name(de->d_name))
            continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 64;
            char **p = realloc(*names, (size_t)cap * sizeof *p);
            if (!p) {
                rc = dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
                break;
            }
            *names = p;
        }
        if (!((*names)[*n] = strdup(de->d_name)))
            rc = dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
        else
            (*n)++;
    }
    closedir(d);
    return rc;
}

int dsv4_list_goldens(FILE *f, const char *prog, const char *dir, int json, dsv4_golden_keep_fn keep,
                      const void *keep_ctx, dsv4_status *st)
{
    char **names = NULL;
    int n = 0, kept = 0, bad = 0;
    int rc = h5_names(dir, &names, &n, st);
    golden_entry *e = rc ? NULL : calloc(n ? (size_t)n : 1, sizeof *e);
    if (!rc && !e)
        rc = dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
    for (int i = 0; !rc && i < n; i++) {
        golden_entry *x = &e[kept];
        dsv4_golden g;
        dsv4_status gs = {0};
        snprintf(x->file, sizeof x->file, "%s/%s", dir, names[i]);
        if (dsv4_golden_read_schema(x->file, &g, &gs)) {
            fprintf(stderr, "%s: list --goldens: %s\n", prog, gs.msg);
            bad = 1;
            continue;
        }
        if (!keep || keep(keep_ctx, g.case_name, g.op)) {
            snprintf(x->op, sizeof x->op, "%s", g.op);
            snprintf(x->variant, sizeof x->variant, "%s", g.variant);
            snprintf(x->case_name, sizeof x->case_name, "%s", g.case_name);
            x->seed = g.seed;
            tensor_list(&g.inputs, x->in, sizeof x->in, x->in_json, sizeof x->in_json);
            tensor_list(&g.outputs, x->out, sizeof x->out, x->out_json, sizeof x->out_json);
            kept++;
        }
        dsv4_golden_free(&g);
    }
    if (!rc) {
        qsort(e, (size_t)kept, sizeof *e, entry_cmp);
        print_entries(f, e, kept, json, dir);
        if (bad)
            rc = dsv4_fail(st, DSV4_EINPUT, "list --goldens %s: some files are not goldens (above)", dir);
    }
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
    free(e);
    return rc;
}
