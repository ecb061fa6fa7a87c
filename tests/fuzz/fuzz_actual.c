/* fuzz_actual.c - libFuzzer target for the actuals-file reader
 * (harness/actual.c, data/README.md "Actuals files").
 *
 * Each input is an HDF5 file image opened through dsv4_actual_open_image
 * (the core driver, no temporary file): the golden reader's walk and root
 * checks, the list of case groups.  Each of the first groups is then read
 * as the outputs of two cases: combine_topk_swa_indices (int32 outputs) and
 * gemm_a8w8_blockscale (a bfloat16 output, so float32 data goes through the
 * exactness check), each with fixed shapes.  The oracle: every call returns
 * DSV4_OK, DSV4_EINPUT or DSV4_ESKIP, every error carries a message, and a
 * read that succeeds leaves the caller's tensors as allocated (names,
 * dtypes, shapes, sizes).  The memory limit is 64 MiB.  libhdf5 1.10.8's own
 * leaks on corrupt files are suppressed as in fuzz_golden.c.
 *
 * Seeds (tests/fuzz/corpus/actual/) are written by this file built with
 * -DFA_SEED_WRITER:
 *   gcc -std=c11 -DFA_SEED_WRITER -DFA_NO_LSAN_SUPPRESSIONS tests/fuzz/fuzz_actual.c build/libdsv4.a \
 *       $(pkg-config --cflags --libs hdf5 yaml-0.1 openblas zlib) -ldl -lm && ./a.out DIR */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "../../harness/actual.h"
#include "../../harness/golden.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#ifndef FA_NO_LSAN_SUPPRESSIONS
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) { return "leak:libhdf5_serial.so\n"; }
#endif

#define FA_GROUPS 8 /* groups read per input */

/* The outputs a case of each of the two ops is given, freshly allocated. */
static int fa_outputs(int which, dsv4_tensors *out, dsv4_status *st)
{
    dsv4_tensor *t;
    memset(out, 0, sizeof *out);
    if (which == 0) {
        int64_t idx[2] = {4, 8}, lens[1] = {4};
        int rc = dsv4_tensors_add(out, "combined_indices", DSV4_I32, 2, idx, &t, st);
        return rc ? rc : dsv4_tensors_add(out, "combined_lens", DSV4_I32, 1, lens, &t, st);
    }
    int64_t y[2] = {3, 5};
    return dsv4_tensors_add(out, "Y", DSV4_BF16, 2, y, &t, st);
}

static const char *const fa_ops[2] = {"combine_topk_swa_indices", "gemm_a8w8_blockscale"};

static void fa_check(int rc, const dsv4_status *st)
{
    if (rc != DSV4_OK && rc != DSV4_EINPUT && rc != DSV4_ESKIP)
        __builtin_trap();
    if (rc && !st->msg[0])
        __builtin_trap(); /* every error carries a message */
}

/* A read that succeeded must leave the tensors as the caller allocated them. */
static void fa_same_layout(const dsv4_tensors *got, const dsv4_tensors *want)
{
    if (got->n != want->n)
        __builtin_trap();
    for (int k = 0; k < got->n; k++)
        if (strcmp(got->t[k].name, want->t[k].name) != 0 || got->t[k].dtype != want->t[k].dtype ||
            !dsv4_tensor_same_shape(&got->t[k], &want->t[k]) || got->t[k].nbytes != want->t[k].nbytes)
            __builtin_trap();
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    dsv4_set_memory_limit((uint64_t)64 << 20);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    dsv4_actual *a;
    dsv4_status st = {0, ""};
    int rc = dsv4_actual_open_image("fuzz.h5", data, size, &a, &st);
    fa_check(rc, &st);
    if (rc)
        return 0;
    for (int i = 0; i < dsv4_actual_count(a) && i < FA_GROUPS; i++) {
        const char *name = dsv4_actual_case_at(a, i);
        if (!name || dsv4_actual_find(a, name) != i)
            __builtin_trap(); /* the list is sorted and each name found where it is */
        for (int which = 0; which < 2; which++) {
            dsv4_tensors out, fresh;
            dsv4_status s1 = {0, ""}, s2 = {0, ""};
            if (fa_outputs(which, &out, &s1) || fa_outputs(which, &fresh, &s2))
                __builtin_trap();
            const dsv4_op *op = dsv4_op_find(fa_ops[which]);
            rc = dsv4_actual_read(a, name, op, 0, &out, &s1);
            fa_check(rc, &s1);
            if (rc == DSV4_ESKIP)
                __builtin_trap(); /* the group is there */
            if (!rc)
                fa_same_layout(&out, &fresh);
            dsv4_tensors_free(&out);
            dsv4_tensors_free(&fresh);
        }
    }
    dsv4_actual_close(a);
    return 0;
}

#ifdef FA_SEED_WRITER
#include <stdlib.h>
/* The seeds: good files for both templates, float32 for bfloat16, op and
 * variant attributes, a wrong dtype and a wrong shape beside a good case. */
static void seed(const char *dir, const char *file, const dsv4_actual_case *cs, int n)
{
    char path[600];
    dsv4_status st = {0, ""};
    snprintf(path, sizeof path, "%s/%s", dir, file);
    if (dsv4_actual_write(path, cs, n, &st)) {
        fprintf(stderr, "%s\n", st.msg);
        exit(1);
    }
}

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    dsv4_h5_quiet();
    dsv4_status st = {0, ""};
    dsv4_tensors comb, gemm, f32, wrong = {0};
    fa_outputs(0, &comb, &st);
    fa_outputs(1, &gemm, &st);
    for (int k = 0; k < 32; k++)
        ((int32_t *)comb.t[0].data)[k] = k - 3;
    for (int k = 0; k < 15; k++)
        ((uint16_t *)gemm.t[0].data)[k] = (uint16_t)(0x3F80 + k);
    memset(&f32, 0, sizeof f32);
    dsv4_tensor *t;
    int64_t y[2] = {3, 5}, bad[2] = {4, 9};
    dsv4_tensors_add(&f32, "Y", DSV4_F32, 2, y, &t, &st);
    for (int k = 0; k < 15; k++)
        ((uint32_t *)t->data)[k] = (uint32_t)(0x3F80 + k) << 16;
    dsv4_tensors_add(&wrong, "combined_indices", DSV4_I64, 2, bad, &t, &st);
    dsv4_tensors_add(&wrong, "combined_lens", DSV4_I32, 1, bad, &t, &st);
    const dsv4_actual_case one[] = {{"combine_case", NULL, NULL, &comb}};
    const dsv4_actual_case both[] = {{"c0", fa_ops[0], "default", &comb}, {"g0", fa_ops[1], "default", &gemm}};
    const dsv4_actual_case as_f32[] = {{"gemm_f32", NULL, NULL, &f32}};
    const dsv4_actual_case mixed[] = {{"a_good", NULL, NULL, &comb}, {"b_wrong", NULL, NULL, &wrong}};
    seed(argv[1], "combine.h5", one, 1);
    seed(argv[1], "two_ops_attrs.h5", both, 2);
    seed(argv[1], "bf16_as_f32.h5", as_f32, 1);
    seed(argv[1], "good_and_wrong.h5", mixed, 2);
    dsv4_tensors_free(&comb), dsv4_tensors_free(&gemm), dsv4_tensors_free(&f32), dsv4_tensors_free(&wrong);
    return 0;
}
#endif
