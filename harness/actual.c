#define _POSIX_C_SOURCE 200809L
/* actual.c - actuals files (actual.h; data/README.md "Actuals files"):
 * opened through the golden reader's open and walk, each case's group read
 * by its dataset reader, then checked against what the op produces. */
#include "actual.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "golden_h5.h"

/* Objects the walk allows: the root, and per case its group and outputs. */
#define MAX_OBJECTS (1 + DSV4_ACTUAL_MAX_CASES * (1 + DSV4_MAX_TENSORS))
#define KIND "actuals file"

struct dsv4_actual {
    char path[4096];
    hid_t file;
    int n;
    char (*name)[DSV4_ACTUAL_NAME_MAX]; /* the case groups, sorted */
};

typedef struct list_ctx {
    dsv4_actual *a;
    int cap, rc;
    dsv4_status *st;
} list_ctx;

/* Collects the top-level names; each must be a group named like a case. */
static herr_t list_cb(hid_t root, const char *name, const H5L_info_t *info, void *data)
{
    (void)info;
    list_ctx *c = data;
    dsv4_actual *a = c->a;
    H5O_info_t oi;
    if (strlen(name) >= DSV4_ACTUAL_NAME_MAX)
        c->rc = dsv4_fail(c->st, DSV4_EINPUT, "%s:/%.60s...: a group name of %zu bytes; case names have at most %d",
                          a->path, name, strlen(name), DSV4_ACTUAL_NAME_MAX - 1);
    else if (H5Oget_info_by_name2(root, name, &oi, H5O_INFO_BASIC, H5P_DEFAULT) < 0)
        c->rc = dsv4_fail(c->st, DSV4_EINPUT, "%s:/%s: unreadable object (corrupt file)", a->path, name);
    else if (oi.type != H5O_TYPE_GROUP)
        c->rc = dsv4_fail(c->st, DSV4_EINPUT, "%s:/%s: a dataset at the top level; an actuals file holds one "
                          "group per case, with the case's outputs in it", a->path, name);
    else if (a->n >= DSV4_ACTUAL_MAX_CASES)
        c->rc = dsv4_fail(c->st, DSV4_EINPUT, "%s: more than %d cases", a->path, DSV4_ACTUAL_MAX_CASES);
    if (c->rc)
        return -1;
    if (a->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 64;
        void *p = realloc(a->name, (size_t)cap * sizeof *a->name);
        if (!p) {
            c->rc = dsv4_fail(c->st, DSV4_ERUNTIME, "%s: out of memory", a->path);
            return -1;
        }
        a->name = p;
        c->cap = cap;
    }
    snprintf(a->name[a->n++], DSV4_ACTUAL_NAME_MAX, "%s", name);
    return 0;
}

static int name_cmp(const void *x, const void *y) { return strcmp(x, y); }

static int read_root(dsv4_actual *a, dsv4_status *st)
{
    int64_t version = DSV4_ACTUALS_VERSION, schema = -1;
    int rc = dsv4_h5_int_attr(a->path, a->file, "dsv4check_schema", &schema, st);
    if (!rc && schema != -1)
        return dsv4_fail(st, DSV4_EINPUT, "%s: a golden file (it has dsv4check_schema), not an actuals file: "
                         "goldens are checked with `check GOLDEN.h5`, outputs given with --actual", a->path);
    if (!rc)
        rc = dsv4_h5_int_attr(a->path, a->file, "dsv4check_actuals", &version, st);
    if (!rc && version != DSV4_ACTUALS_VERSION)
        return dsv4_fail(st, DSV4_EINPUT, "%s: dsv4check_actuals is %" PRId64 ", this dsv4check reads %d", a->path,
                         version, DSV4_ACTUALS_VERSION);
    list_ctx c = {a, 0, DSV4_OK, st};
    hsize_t idx = 0;
    herr_t e = rc ? 0 : H5Literate(a->file, H5_INDEX_NAME, H5_ITER_INC, &idx, list_cb, &c);
    if (!rc)
        rc = c.rc;
    if (!rc && e < 0)
        rc = dsv4_fail(st, DSV4_EINPUT, "%s: cannot list the cases (corrupt file)", a->path);
    if (!rc && a->n)
        qsort(a->name, (size_t)a->n, sizeof *a->name, name_cmp);
    return rc;
}

static int open_with(const char *path, hid_t fapl, dsv4_actual **out, dsv4_status *st)
{
    *out = NULL;
    dsv4_actual *a = calloc(1, sizeof *a);
    if (!a)
        return dsv4_fail(st, DSV4_ERUNTIME, "out of memory");
    a->file = -1;
    snprintf(a->path, sizeof a->path, "%s", path);
    int rc = dsv4_h5_open(path, fapl, MAX_OBJECTS, KIND, &a->file, st);
    if (!rc)
        rc = read_root(a, st);
    if (rc) {
        dsv4_actual_close(a);
        return rc;
    }
    *out = a;
    return DSV4_OK;
}

int dsv4_actual_open(const char *path, dsv4_actual **out, dsv4_status *st)
{
    return open_with(path, H5P_DEFAULT, out, st);
}

int dsv4_actual_open_image(const char *name, const void *buf, size_t len, dsv4_actual **out, dsv4_status *st)
{
    dsv4_h5_quiet();
    *out = NULL;
    if (len == 0)
        return dsv4_fail(st, DSV4_EINPUT, "%s: empty file, not an HDF5 file", name);
    hid_t fapl;
    if (dsv4_h5_image_fapl(buf, len, &fapl))
        return dsv4_fail(st, DSV4_ERUNTIME, "%s: cannot set up an in-memory HDF5 file", name);
    int rc = open_with(name, fapl, out, st);
    H5Pclose(fapl);
    return rc;
}

void dsv4_actual_close(dsv4_actual *a)
{
    if (!a)
        return;
    if (a->file >= 0)
        H5Fclose(a->file);
    free(a->name);
    free(a);
}

const char *dsv4_actual_path(const dsv4_actual *a) { return a->path; }
int dsv4_actual_count(const dsv4_actual *a) { return a->n; }
const char *dsv4_actual_case_at(const dsv4_actual *a, int i) { return i >= 0 && i < a->n ? a->name[i] : NULL; }

int dsv4_actual_find(const dsv4_actual *a, const char *case_name)
{
    if (!a->n || strlen(case_name) >= DSV4_ACTUAL_NAME_MAX)
        return -1;
    const char (*hit)[DSV4_ACTUAL_NAME_MAX] = bsearch(case_name, a->name, (size_t)a->n, sizeof *a->name, name_cmp);
    return hit ? (int)(hit - a->name) : -1;
}

/* ---- one case ---- */

/* The op and variant a group says it was written for, when it says. */
static int check_group_op(const dsv4_actual *a, const char *cs, const dsv4_op *op, int variant, dsv4_status *st)
{
    hid_t g = H5Gopen2(a->file, cs, H5P_DEFAULT);
    if (g < 0)
        return dsv4_fail(st, DSV4_EINPUT, "%s:/%s: not a readable group", a->path, cs);
    char where[DSV4_ACTUAL_NAME_MAX + 2], gop[64] = "", gvar[64] = "";
    snprintf(where, sizeof where, "/%s", cs);
    int rc = dsv4_h5_str_attr(a->path, g, "op", where, gop, sizeof gop, st);
    if (!rc)
        rc = dsv4_h5_str_attr(a->path, g, "variant", where, gvar, sizeof gvar, st);
    H5Gclose(g);
    const char *want = dsv4_op_variant_name(op, variant);
    if (!rc && ((gop[0] && strcmp(gop, op->name) != 0) || (gvar[0] && strcmp(gvar, want) != 0)))
        rc = dsv4_fail(st, DSV4_EINPUT, "%s:/%s: written for %s [%s], but the case is %s [%s]", a->path, cs,
                       gop[0] ? gop : op->name, gvar[0] ? gvar : "any variant", op->name, want);
    return rc;
}

/* float32 data for a bfloat16 output: each value must be a bfloat16 (its
 * low 16 bits zero), so that nothing is rounded on the way in. */
static int take_f32_as_bf16(const dsv4_actual *a, const char *cs, const dsv4_tensor *src, dsv4_tensor *dst,
                            dsv4_status *st)
{
    int64_t n = dsv4_tensor_numel(src);
    const uint32_t *f = src->data;
    uint16_t *b = dst->data;
    for (int64_t i = 0; i < n; i++) {
        if (f[i] & 0xFFFFu) {
            char idx[96];
            float v;
            memcpy(&v, &f[i], sizeof v);
            return dsv4_fail(st, DSV4_EINPUT, "%s:/%s/%s: float32 data for a bfloat16 output, but element %s "
                             "(%.9g, bits 0x%08" PRIx32 ") is not a bfloat16; round it in the kernel's way and "
                             "store the bfloat16 bits", a->path, cs, src->name, dsv4_index_str(src, i, idx, sizeof idx),
                             (double)v, f[i]);
        }
        b[i] = (uint16_t)(f[i] >> 16);
    }
    return DSV4_OK;
}

static void output_names(const dsv4_tensors *out, char *buf, size_t len)
{
    buf[0] = '\0';
    for (int k = 0; k < out->n; k++)
        snprintf(buf + strlen(buf), len - strlen(buf), "%s%s", k ? ", " : "", out->t[k].name);
}

/* One dataset into its output, checked against the op's dtype and shape. */
static int take_output(const dsv4_actual *a, const char *cs, const dsv4_op *op, const dsv4_tensor *src,
                       dsv4_tensor *dst, dsv4_status *st)
{
    char s1[96], s2[96];
    if (!dsv4_tensor_same_shape(src, dst))
        return dsv4_fail(st, DSV4_EINPUT, "%s:/%s/%s: shape %s, but op %s produces %s for this case's inputs",
                         a->path, cs, src->name, dsv4_shape_str(src, s1, sizeof s1), op->name,
                         dsv4_shape_str(dst, s2, sizeof s2));
    if (src->dtype == dst->dtype) {
        memcpy(dst->data, src->data, dst->nbytes);
        return DSV4_OK;
    }
    if (src->dtype == DSV4_F32 && dst->dtype == DSV4_BF16)
        return take_f32_as_bf16(a, cs, src, dst, st);
    return dsv4_fail(st, DSV4_EINPUT, "%s:/%s/%s: dtype %s, but op %s produces %s (`dsv4check list` shows each "
                     "output's dtype)", a->path, cs, src->name, dsv4_dtype_name(src->dtype), op->name,
                     dsv4_dtype_name(dst->dtype));
}

int dsv4_actual_read(const dsv4_actual *a, const char *case_name, const dsv4_op *op, int variant,
                     dsv4_tensors *out, dsv4_status *st)
{
    int i = dsv4_actual_find(a, case_name);
    if (i < 0)
        return dsv4_fail(st, DSV4_ESKIP, "not provided: %s has no group /%s", a->path, case_name);
    const char *cs = a->name[i];
    int rc = check_group_op(a, cs, op, variant, st);
    dsv4_tensors got = {0};
    if (!rc)
        rc = dsv4_h5_read_group(a->path, a->file, cs, &got, st);
    char names[DSV4_MAX_TENSORS * DSV4_NAME_MAX];
    output_names(out, names, sizeof names);
    for (int k = 0; !rc && k < got.n; k++)
        if (!dsv4_tensors_get(out, got.t[k].name))
            rc = dsv4_fail(st, DSV4_EINPUT, "%s:/%s/%s: op %s has no output '%s' (its outputs: %s)", a->path, cs,
                           got.t[k].name, op->name, got.t[k].name, names);
    for (int k = 0; !rc && k < out->n; k++) {
        const dsv4_tensor *src = dsv4_tensors_get(&got, out->t[k].name);
        rc = src ? take_output(a, cs, op, src, &out->t[k], st)
                 : dsv4_fail(st, DSV4_EINPUT, "%s:/%s: no dataset '%s' (op %s's outputs: %s)", a->path, cs,
                             out->t[k].name, op->name, names);
    }
    dsv4_tensors_free(&got);
    return rc;
}

/* ---- writing ---- */

typedef struct write_ctx {
    const dsv4_actual_case *cases;
    int n;
} write_ctx;

static int group_name_ok(const char *s)
{
    size_t n = strlen(s);
    return n > 0 && n < DSV4_ACTUAL_NAME_MAX && !strchr(s, '/') && strcmp(s, ".") != 0 &&
           dsv4_h5_utf8_ok((const unsigned char *)s, n);
}

static int write_case(hid_t f, const dsv4_actual_case *c, dsv4_status *st)
{
    if (!group_name_ok(c->name))
        return dsv4_fail(st, DSV4_EINPUT, "case name '%.200s' cannot name a group (empty, '/', '.', not UTF-8 or "
                         "%d bytes or more)", c->name, DSV4_ACTUAL_NAME_MAX);
    char eb[DSV4_H5_ERR_MAX];
    hid_t g = H5Gcreate2(f, c->name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (g < 0)
        return dsv4_fail(st, DSV4_EINPUT, "cannot create /%s (%s)", c->name, dsv4_h5_err(eb));
    int rc = DSV4_OK;
    if ((c->op && dsv4_h5_write_str_attr(g, "op", c->op, 64) < 0) ||
        (c->variant && dsv4_h5_write_str_attr(g, "variant", c->variant, 64) < 0))
        rc = dsv4_fail(st, DSV4_EINPUT, "/%s: cannot write its op and variant attributes", c->name);
    for (int k = 0; !rc && k < c->outputs->n; k++)
        rc = dsv4_h5_write_tensor(g, c->name, &c->outputs->t[k], st);
    if (H5Gclose(g) < 0 && !rc)
        rc = dsv4_fail(st, DSV4_ERUNTIME, "cannot close /%s (%s)", c->name, dsv4_h5_err(eb));
    return rc;
}

static int write_contents(hid_t f, const void *arg, dsv4_status *st)
{
    const write_ctx *w = arg;
    if (dsv4_h5_write_int_attr(f, "dsv4check_actuals", DSV4_ACTUALS_VERSION) < 0)
        return dsv4_fail(st, DSV4_ERUNTIME, "cannot write the root attribute");
    int rc = DSV4_OK;
    for (int k = 0; !rc && k < w->n; k++)
        rc = write_case(f, &w->cases[k], st);
    return rc;
}

int dsv4_actual_write(const char *path, const dsv4_actual_case *cases, int n, dsv4_status *st)
{
    if (n < 0 || n > DSV4_ACTUAL_MAX_CASES)
        return dsv4_fail(st, DSV4_EINPUT, "%s: %d cases (at most %d)", path, n, DSV4_ACTUAL_MAX_CASES);
    const write_ctx w = {cases, n};
    return dsv4_h5_write_file(path, 1, write_contents, &w, st);
}
