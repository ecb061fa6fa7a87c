/* test_registry.c - the one op list (ops/ops.def) is complete and consistent:
 * op names are unique, every op has its definition file, a hip kernel that
 * defines dsv4_hip_<name>, at least one ci case, and a committed golden for
 * every ci case and a nightly case (as every chain has); variant names are
 * unique per op and every variant has a doc.  Runs from the repository
 * root. */
#define _POSIX_C_SOURCE 200809L
#include <glob.h>
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

DSV4_TEST_MAIN("registry", "list", 0, NULL, NULL, op_names_unique, variants_unique_and_documented,
               every_op_has_its_file, every_op_has_a_hip_kernel, every_op_has_ci_cases_and_goldens,
               every_op_and_chain_has_nightly_cases)
