/* test_registry.c - the one op list (ops/ops.def) is complete and consistent:
 * op names are unique, every op has its definition file, a hip kernel that
 * defines dsv4_hip_<name>, at least one ci case, and a committed golden for
 * every ci case and a nightly case (as every chain has); variant names are
 * unique per op and every variant has a doc; every op's schemas (harness/op.h)
 * parse, round-trip and hold the rows they did as C tables, and a malformed
 * schema is reported by op, table and line.  Runs from the repository
 * root. */
#define _POSIX_C_SOURCE 200809L
#include <glob.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "../harness/cases.h"
#include "../harness/chain.h"
#include "../harness/op.h"
#include "testutil.h"

static int file_exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

START_TEST(op_names_unique)
{
    ck_assert_int_gt(dsv4_op_count(), 0);
    for (int i = 0; i < dsv4_op_count(); i++)
        for (int j = i + 1; j < dsv4_op_count(); j++)
            ck_assert_msg(strcmp(dsv4_op_at(i)->name, dsv4_op_at(j)->name) != 0, "op %s listed twice (%d, %d)",
                          dsv4_op_at(i)->name, i, j);
}
END_TEST

START_TEST(variants_unique_and_documented)
{
    for (int i = 0; i < dsv4_op_count(); i++) {
        const dsv4_op *op = dsv4_op_at(i);
        int n = dsv4_op_variant_count(op);
        ck_assert_msg(n >= 1, "%s has no variant", op->name);
        ck_assert_msg(strcmp(dsv4_op_variant_name(op, 0), "default") == 0, "%s: variant 0 is '%s', not default",
                      op->name, dsv4_op_variant_name(op, 0));
        for (int v = 0; v < n; v++) {
            const char *doc = dsv4_op_variant_doc(op, v);
            ck_assert_msg(doc && *doc, "%s variant %s has no doc", op->name, dsv4_op_variant_name(op, v));
            ck_assert_int_eq(dsv4_op_variant(op, dsv4_op_variant_name(op, v)), v);
            for (int w = v + 1; w < n; w++)
                ck_assert_msg(strcmp(dsv4_op_variant_name(op, v), dsv4_op_variant_name(op, w)) != 0,
                              "%s: variant %s twice", op->name, dsv4_op_variant_name(op, v));
        }
        ck_assert_ptr_null(dsv4_op_variant_name(op, n));
    }
}
END_TEST

/* The definition lives in ops/<family>/<name>.c (one file per op). */
START_TEST(every_op_has_its_file)
{
    for (int i = 0; i < dsv4_op_count(); i++) {
        const char *name = dsv4_op_at(i)->name;
        char pattern[256];
        snprintf(pattern, sizeof pattern, "ops/*/%s.c", name);
        glob_t g;
        int rc = glob(pattern, 0, NULL, &g);
        ck_assert_msg(rc == 0 && g.gl_pathc == 1, "%s: expected one file %s, found %zu", name, pattern,
                      rc == 0 ? g.gl_pathc : (size_t)0);
        globfree(&g);
    }
}
END_TEST

/* A shared library may leave a symbol undefined, so a missing kernel would
 * not fail the hip build: check the definition is in hip/<name>.cpp. */
START_TEST(every_op_has_a_hip_kernel)
{
    for (int i = 0; i < dsv4_op_count(); i++) {
        const char *name = dsv4_op_at(i)->name;
        char path[256], def[256], by_macro[256];
        snprintf(path, sizeof path, "hip/%s.cpp", name);
        ck_assert_msg(file_exists(path), "%s: no hip kernel file %s", name, path);
        char *src = dsv4_test_slurp(path);
        /* written out, or through kernels.h's DSV4_HIP_SHAPE_KERNEL(op, ...) */
        snprintf(def, sizeof def, "dsv4_hip_kernel dsv4_hip_%s = {", name);
        snprintf(by_macro, sizeof by_macro, "DSV4_HIP_SHAPE_KERNEL(%s,", name);
        ck_assert_msg(strstr(src, def) != NULL || strstr(src, by_macro) != NULL,
                      "%s defines neither '%s ...' nor '%s ...'", path, def, by_macro);
        free(src);
    }
}
END_TEST

START_TEST(every_op_has_ci_cases_and_goldens)
{
    dsv4_suite s = {0};
    dsv4_status st = {0};
    ck_assert_msg(dsv4_suite_load("cases/ci.yaml", &s, &st) == 0, "%s", st.msg);
    for (int i = 0; i < dsv4_op_count(); i++) {
        const dsv4_op *op = dsv4_op_at(i);
        int n = 0;
        for (int k = 0; k < s.n; k++)
            n += s.cases[k].op == op;
        ck_assert_msg(n > 0, "%s has no case in cases/ci.yaml", op->name);
    }
    for (int k = 0; k < s.n; k++) {
        const dsv4_case *c = &s.cases[k];
        if (!dsv4_chain_of(c->op)) {
            ck_assert_msg(c->golden[0] && file_exists(c->golden), "case %s: golden %s missing", c->name, c->golden);
            continue;
        }
        /* chains: one golden per step, <base>.<step>.h5; propagated ones
         * run on the live reference (harness/chain.h) */
        if (!dsv4_chain_has_goldens(c))
            continue;
        char pattern[DSV4_PATH_MAX + 16];
        ck_assert_msg(c->golden[0] && strlen(c->golden) > 3, "case %s has no golden path", c->name);
        snprintf(pattern, sizeof pattern, "%.*s.*.h5", (int)strlen(c->golden) - 3, c->golden);
        glob_t g;
        ck_assert_msg(glob(pattern, 0, NULL, &g) == 0 && g.gl_pathc > 0, "case %s: no step goldens %s", c->name,
                      pattern);
        globfree(&g);
    }
    dsv4_suite_free(&s);
}
END_TEST

/* The nightly suite runs every op and every chain at production shapes
 * (README "Nightly"), with no goldens (the live reference). */
START_TEST(every_op_and_chain_has_nightly_cases)
{
    dsv4_suite s = {0};
    dsv4_status st = {0};
    ck_assert_msg(dsv4_suite_load("cases/nightly.yaml", &s, &st) == 0, "%s", st.msg);
    const int nops = dsv4_op_count(), nchains = dsv4_chain_count();
    for (int i = 0; i < nops + nchains; i++) {
        const dsv4_op *op = i < nops ? dsv4_op_at(i) : dsv4_chain_at(i - nops)->desc;
        int n = 0;
        for (int k = 0; k < s.n; k++)
            n += s.cases[k].op == op;
        ck_assert_msg(n > 0, "%s has no case in cases/nightly.yaml", op->name);
    }
    for (int k = 0; k < s.n; k++)
        ck_assert_msg(!s.cases[k].golden[0], "nightly case %s has a golden path %s (nightly runs the live reference)",
                      s.cases[k].name, s.cases[k].golden);
    dsv4_suite_free(&s);
}
END_TEST

/* ---- schemas ---- */

static const char *ptype_word(dsv4_ptype t)
{
    switch (t) {
    case DSV4_P_INT: return "int";
    case DSV4_P_FLOAT: return "float";
    case DSV4_P_STR: return "str";
    case DSV4_P_INTLIST: return "int[]";
    }
    return "?";
}

/* The rows written back as schema text (harness/op.h's syntax). */
static void format_params(const dsv4_param_spec *p, char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = '\0';
    for (; p->name; p++) {
        char def[256];
        if (!p->def)
            snprintf(def, sizeof def, "required");
        else if (!*p->def || (strchr(p->def, ' ') && p->def[0] != '['))
            snprintf(def, sizeof def, "= \"%s\"", p->def);
        else
            snprintf(def, sizeof def, "= %s", p->def);
        n += (size_t)snprintf(buf + n, len - n, "%s %s %s %s  %s\n", p->gen ? "gen" : "   ", p->name,
                              ptype_word(p->type), def, p->doc);
        ck_assert_uint_lt(n, len);
    }
}

static void format_tensors(const dsv4_io_spec *io, char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = '\0';
    for (; io->name; io++) {
        char golden[64] = "";
        if (io->golden_dtype != DSV4_DT_NONE)
            snprintf(golden, sizeof golden, " golden=%s", dsv4_dtype_name(io->golden_dtype));
        n += (size_t)snprintf(buf + n, len - n, "%s %s%s  %s\n", io->name, dsv4_dtype_name(io->dtype), golden,
                              io->doc);
        ck_assert_uint_lt(n, len);
    }
}

static int same_str(const char *a, const char *b) { return (!a && !b) || (a && b && strcmp(a, b) == 0); }

static void check_params_round_trip(const char *op, const dsv4_param_spec *rows)
{
    static char text[32768], arena[32768];
    static dsv4_param_spec again[DSV4_MAX_PARAMS + 1];
    dsv4_status st = {0};
    char *next = arena;
    format_params(rows, text, sizeof text);
    ck_assert_msg(dsv4_schema_parse_params(text, again, DSV4_MAX_PARAMS, &next, arena + sizeof arena, &st) == 0,
                  "%s params written back: %s", op, st.msg);
    int k = 0;
    for (; rows[k].name; k++)
        ck_assert_msg(same_str(rows[k].name, again[k].name) && rows[k].type == again[k].type &&
                          same_str(rows[k].def, again[k].def) && same_str(rows[k].doc, again[k].doc) &&
                          rows[k].gen == again[k].gen,
                      "%s param %s does not round-trip", op, rows[k].name);
    ck_assert_ptr_null(again[k].name);
}

static void check_tensors_round_trip(const char *op, const dsv4_io_spec *rows, int outputs)
{
    static char text[32768], arena[32768];
    static dsv4_io_spec again[DSV4_MAX_TENSORS + 1];
    dsv4_status st = {0};
    char *next = arena;
    format_tensors(rows, text, sizeof text);
    ck_assert_msg(dsv4_schema_parse_tensors(text, outputs, again, DSV4_MAX_TENSORS, &next, arena + sizeof arena,
                                            &st) == 0,
                  "%s tensors written back: %s", op, st.msg);
    int k = 0;
    for (; rows[k].name; k++)
        ck_assert_msg(same_str(rows[k].name, again[k].name) && rows[k].dtype == again[k].dtype &&
                          rows[k].golden_dtype == again[k].golden_dtype && same_str(rows[k].doc, again[k].doc),
                      "%s tensor %s does not round-trip", op, rows[k].name);
    ck_assert_ptr_null(again[k].name);
}

/* Every op's and chain's schemas parse (the text arena DSV4_OP_SCHEMAS sizes
 * is large enough), once (the same rows on every call), with at least one
 * output, and read back the same when written out again. */
START_TEST(every_schema_parses_and_round_trips)
{
    const int nops = dsv4_op_count(), nchains = dsv4_chain_count();
    for (int i = 0; i < nops + nchains; i++) {
        const dsv4_op *op = i < nops ? dsv4_op_at(i) : dsv4_chain_at(i - nops)->desc;
        dsv4_status st = {0};
        ck_assert_msg(dsv4_op_check_schemas(op, &st) == 0, "%s", st.msg);
        ck_assert_ptr_eq(dsv4_op_params(op), dsv4_op_params(op));
        ck_assert_msg(dsv4_op_outputs(op)[0].name != NULL, "%s declares no output", op->name);
        check_params_round_trip(op->name, dsv4_op_params(op));
        check_tensors_round_trip(op->name, dsv4_op_inputs(op), 0);
        check_tensors_round_trip(op->name, dsv4_op_outputs(op), 1);
    }
}
END_TEST

/* A few rows as the C tables held them: every type, a required row, a list
 * default, gen rows from shared macros, a doc split over literals. */
static const struct {
    const char *op, *name;
    dsv4_ptype type;
    const char *def;
    int gen;
    const char *doc;
} known_params[] = {
    {"decode_swa_indices_and_lens", "window_size", DSV4_P_INT, "128", 0, "sliding window W"},
    {"decode_swa_indices_and_lens", "query_lens", DSV4_P_INTLIST, NULL, 1, "generator: query tokens of each request"},
    {"decode_swa_indices_and_lens", "prefix_lens", DSV4_P_INTLIST, "[]", 1,
     "generator: cached prefix of each request (default 0)"},
    {"sparse_mla_fwd", "scale", DSV4_P_FLOAT, "0.044194173824159216", 0, "softmax scale, head_dim^-0.5 = 512^-0.5 [S14]"},
    {"sparse_mla_fwd", "sink", DSV4_P_STR, "random", 1,
     "generator: attn_sink: random (randn*10), none (-inf), or a number"},
    {"v41_attention_layer", "mode", DSV4_P_STR, "isolated", 0,
     "isolated: each step gets the reference chain's tensors; propagated: the implementation's upstream outputs"},
    {"v41_attention_layer", "eps", DSV4_P_FLOAT, "1e-06", 0, "rms_norm_eps of every RMSNorm"},
};

/* Those rows, and an input and an output with their dtypes and golden dtype. */
START_TEST(known_rows)
{
    for (size_t k = 0; k < sizeof known_params / sizeof known_params[0]; k++) {
        const char *op_name = known_params[k].op, *name = known_params[k].name;
        const dsv4_op *op = dsv4_op_find(op_name) ? dsv4_op_find(op_name) : dsv4_chain_find_op(op_name);
        ck_assert_msg(op != NULL, "no op %s", op_name);
        const dsv4_param_spec *p = dsv4_op_param(op, name);
        ck_assert_msg(p != NULL, "%s has no param %s", op_name, name);
        ck_assert_int_eq(p->type, known_params[k].type);
        ck_assert_msg(same_str(p->def, known_params[k].def), "%s.%s default '%s'", op_name, name,
                      p->def ? p->def : "(required)");
        ck_assert_int_eq(p->gen, known_params[k].gen);
        ck_assert_str_eq(p->doc, known_params[k].doc);
    }

    const dsv4_op *op = dsv4_op_find("rocm_sparse_attn_decode");
    const dsv4_io_spec *io = dsv4_op_input(op, "swa_k_cache");
    ck_assert_ptr_nonnull(io);
    ck_assert_int_eq(io->dtype, DSV4_U8);
    ck_assert_int_eq(io->golden_dtype, DSV4_DT_NONE);
    ck_assert_str_eq(io->doc, "[pages, 64, 584] fp8_ds_mla SWA cache");
    ck_assert_str_eq(dsv4_op_inputs(op)[0].name, "q");
    io = dsv4_op_output(op, "output");
    ck_assert_ptr_nonnull(io);
    ck_assert_int_eq(io->dtype, DSV4_BF16);
    ck_assert_int_eq(io->golden_dtype, DSV4_F32);
    ck_assert_str_eq(io->doc, "[T, H, 512] attention output (golden: the ideal)");
    ck_assert_ptr_null(dsv4_op_outputs(op)[1].name);
}
END_TEST

/* Edge cases that parse: quoted defaults (empty, with blanks), "=VALUE",
 * blank lines, no doc, a last row without its newline. */
START_TEST(schema_edge_rows)
{
    dsv4_param_spec rows[8];
    char arena[512], *next = arena;
    dsv4_status st = {0};
    const char *text = "    empty  str   = \"\"        the empty string\n"
                       "\n"
                       "gen spaced str   = \"a b\"     blanks inside\n"
                       "    list   int[] =[1, 2, 3]\n"
                       "    last   float = -.inf     no newline";
    ck_assert_msg(dsv4_schema_parse_params(text, rows, 7, &next, arena + sizeof arena, &st) == 0, "%s", st.msg);
    ck_assert_str_eq(rows[0].def, "");
    ck_assert_str_eq(rows[0].doc, "the empty string");
    ck_assert_str_eq(rows[1].def, "a b");
    ck_assert_int_eq(rows[1].gen, 1);
    ck_assert_str_eq(rows[2].def, "[1, 2, 3]");
    ck_assert_str_eq(rows[2].doc, "");
    ck_assert_str_eq(rows[3].name, "last");
    ck_assert_str_eq(rows[3].doc, "no newline");
    ck_assert_ptr_null(rows[4].name);
    ck_assert_uint_le((size_t)(next - arena), strlen(text) + 1);
}
END_TEST

/* Each malformed row is refused with its line number and what is wrong. */
START_TEST(malformed_schemas)
{
    static const struct {
        int tensors; /* 0 params, 1 inputs, 2 outputs */
        const char *text, *want;
    } bad[] = {
        {0, "    a int = 1  ok\n    b flaot = 1  typo\n", "line 2: the type is int, float, str or int[]"},
        {0, "    a int  no default\n", "line 1: the default is '= VALUE' or 'required'"},
        {0, "    a int\n", "line 1: no default"},
        {0, "    a int = abc  bad\n", "line 1: parameter 'a': 'abc' is not a valid int"},
        {0, "    a int[] = [1, 2  open\n", "line 1: no ']' closes the default"},
        {0, "    a str = \"x  open\n", "line 1: no '\"' closes the default"},
        {0, "    a int = [1]x  glued\n", "line 1: a blank must follow the default"},
        {0, "    a int = 1  one\n    a int = 2  two\n", "line 2: the name is declared twice"},
        {0, "    2a int = 1  digit first\n", "line 1: a name is a C identifier"},
        {0, "gen\n", "line 1: no name"},
        {1, "x float33  doc\n", "line 1: not a dtype of data/README.md"},
        {1, "x float32 golden=float64  doc\n", "line 1: golden= is for outputs"},
        {2, "x float32 golden=float99  doc\n", "line 1: not a dtype of data/README.md"},
        {2, "x int32  a\ny int32  b\nz int32  c\n", "line 3: more rows than the table holds"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        dsv4_param_spec prow[3];
        dsv4_io_spec trow[3];
        char arena[256], *next = arena;
        dsv4_status st = {0};
        int rc = bad[k].tensors ? dsv4_schema_parse_tensors(bad[k].text, bad[k].tensors == 2, trow, 2, &next,
                                                            arena + sizeof arena, &st)
                                : dsv4_schema_parse_params(bad[k].text, prow, 2, &next, arena + sizeof arena, &st);
        ck_assert_msg(rc == DSV4_ERUNTIME, "case %zu ('%s') parsed", k, bad[k].text);
        ck_assert_msg(strstr(st.msg, bad[k].want) != NULL, "case %zu: '%s' lacks '%s'", k, st.msg, bad[k].want);
        ck_assert_ptr_null(bad[k].tensors ? trow[0].name : prow[0].name);
    }
    /* A text arena smaller than the rows (the schema given as a pointer, not
     * an array, would size it so). */
    dsv4_param_spec rows[2];
    char arena[8], *next = arena;
    dsv4_status st = {0};
    ck_assert_int_eq(dsv4_schema_parse_params("    abcdef int = 1  doc\n", rows, 1, &next, arena + sizeof arena, &st),
                     DSV4_ERUNTIME);
    ck_assert_msg(strstr(st.msg, "the text arena is full") != NULL, "%s", st.msg);
}
END_TEST

static const dsv4_variant bad_variants[] = {{"default", "the one reading", NULL}, {NULL, NULL, NULL}};
static const char bad_params[] = "    a int = 1  fine\n";
static const char bad_inputs[] = "x float32  fine\n"
                                 "y float32 golden=float64  an input cannot give golden=\n";
static const char bad_outputs[] = "z float32  fine\n";
static const dsv4_op bad_op = {.name = "bad_op", .summary = "malformed on purpose", .source = "tests",
                               DSV4_OP_TABLES(bad)};

/* The registry names the op, the table and the line, gives no rows, and
 * every params check fails with the same message. */
START_TEST(malformed_op_reported)
{
    dsv4_status st = {0};
    ck_assert_int_eq(dsv4_op_check_schemas(&bad_op, &st), DSV4_ERUNTIME);
    ck_assert_msg(strstr(st.msg, "op bad_op, inputs schema, line 2: golden= is for outputs") != NULL, "%s", st.msg);
    ck_assert_ptr_null(dsv4_op_params(&bad_op)[0].name);
    ck_assert_ptr_null(dsv4_op_inputs(&bad_op)[0].name);
    ck_assert_ptr_null(dsv4_op_outputs(&bad_op)[0].name);
    dsv4_params ps = {0};
    dsv4_status st2 = {0};
    ck_assert_int_eq(dsv4_op_complete_params(&bad_op, &ps, "here", &st2), DSV4_ERUNTIME);
    ck_assert_msg(strstr(st2.msg, "here: op bad_op, inputs schema, line 2") != NULL, "%s", st2.msg);
}
END_TEST

static const dsv4_variant race_variants[] = {{"default", "the one reading", NULL}, {NULL, NULL, NULL}};
static const char race_params[] = "    a int = 1  first\n"
                                  "gen b float = 0.5  second\n";
static const char race_inputs[] = "x float32  in\n";
static const char race_outputs[] = "y bfloat16 golden=float32  out\n";
static const dsv4_op race_op = {.name = "race_op", .summary = "parsed from many threads at once", .source = "tests",
                                DSV4_OP_TABLES(race)};

static void *first_use(void *arg)
{
    (void)arg;
    return (void *)dsv4_op_params(&race_op);
}

/* Threads that all make the first call get the one parsed table. */
START_TEST(first_parse_is_thread_safe)
{
    pthread_t th[8];
    void *got[8];
    for (int k = 0; k < 8; k++)
        ck_assert_int_eq(pthread_create(&th[k], NULL, first_use, NULL), 0);
    for (int k = 0; k < 8; k++) {
        ck_assert_int_eq(pthread_join(th[k], &got[k]), 0);
        ck_assert_ptr_eq(got[k], got[0]);
    }
    const dsv4_param_spec *p = got[0];
    ck_assert_str_eq(p[0].name, "a");
    ck_assert_str_eq(p[1].def, "0.5");
    ck_assert_int_eq(p[1].gen, 1);
    ck_assert_ptr_null(p[2].name);
    ck_assert_int_eq(dsv4_op_outputs(&race_op)[0].golden_dtype, DSV4_F32);
}
END_TEST

DSV4_TEST_MAIN("registry", "list", 0, NULL, NULL, op_names_unique, variants_unique_and_documented,
               every_op_has_its_file, every_op_has_a_hip_kernel, every_op_has_ci_cases_and_goldens,
               every_op_and_chain_has_nightly_cases, every_schema_parses_and_round_trips, known_rows,
               schema_edge_rows, malformed_schemas, malformed_op_reported, first_parse_is_thread_safe)
