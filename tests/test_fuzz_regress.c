/* test_fuzz_regress.c - replays every fuzz input kept in the repository
 * (tests/fuzz/regress/<target>/: inputs that once crashed, hung or leaked,
 * each fixed; tests/fuzz/corpus/<target>/: the seeds; for fuzz_actual also
 * the seeds cut short and with bytes flipped) through the fuzz
 * targets' own code, compiled here with the normal flags (and under
 * ASan+UBSan by make SAN=1 unit-tests).  Each replay runs in Check's forked
 * child, so a crash fails the test instead of ending the run. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

/* The ASan build (make check) refuses any single allocation over 1 GiB, as
 * libFuzzer's -malloc_limit_mb does: an input that once made a loader ask
 * for gigabytes (e.g. a corrupt chunk size handed to libhdf5) fails here
 * again if the guard is lost.  No effect on the normal build. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "max_allocation_size_mb=1024"; }

#define LLVMFuzzerTestOneInput fuzz_cases_one
#include "fuzz/fuzz_cases.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_golden_one
#define LLVMFuzzerInitialize fuzz_golden_init
#include "fuzz/fuzz_golden.c"
#undef LLVMFuzzerTestOneInput
#undef LLVMFuzzerInitialize
#define LLVMFuzzerTestOneInput fuzz_actual_one
#define LLVMFuzzerInitialize fuzz_actual_init
#define FA_NO_LSAN_SUPPRESSIONS /* fuzz_golden.c's are the same */
#include "fuzz/fuzz_actual.c"
#undef LLVMFuzzerTestOneInput
#undef LLVMFuzzerInitialize

/* Replays every regular file of dir; returns how many. */
static int replay_dir(const char *dir, int (*one)(const uint8_t *, size_t))
{
    DIR *d = opendir(dir);
    ck_assert_msg(d != NULL, "cannot open %s", dir);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.' || strcmp(e->d_name, "README.md") == 0)
            continue;
        char path[600];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        size_t len;
        unsigned char *buf = (unsigned char *)dsv4_test_slurp_len(path, &len);
        fprintf(stderr, "replay %s (%zu bytes)\n", path, len);
        ck_assert_int_eq(one(buf, len), 0);
        free(buf);
        n++;
    }
    closedir(d);
    return n;
}

/* The seeds (tests/fuzz/corpus/<target>) and the kept inputs
 * (tests/fuzz/regress/<target>) of a fuzz target replayed: how many. */
static int replay_seeds_and_kept(const char *target, int (*one)(const uint8_t *, size_t))
{
    char dir[96];
    snprintf(dir, sizeof dir, "tests/fuzz/corpus/%s", target);
    int n = replay_dir(dir, one);
    snprintf(dir, sizeof dir, "tests/fuzz/regress/%s", target);
    return n + replay_dir(dir, one);
}

START_TEST(cases_inputs_replay)
{
    int n = replay_seeds_and_kept("cases", fuzz_cases_one);
    ck_assert_int_ge(n, 3);
}
END_TEST

START_TEST(golden_inputs_replay)
{
    ck_assert_int_eq(fuzz_golden_init(NULL, NULL), 0);
    int n = replay_seeds_and_kept("golden", fuzz_golden_one);
    ck_assert_int_ge(n, 3);
}
END_TEST

/* The actuals reader: the seeds and kept inputs, and each seed cut short
 * and with single bytes flipped at 64 spread-out places each. */
START_TEST(actual_inputs_replay)
{
    ck_assert_int_eq(fuzz_actual_init(NULL, NULL), 0);
    int n = replay_seeds_and_kept("actual", fuzz_actual_one);
    ck_assert_int_ge(n, 4);
    DIR *d = opendir("tests/fuzz/corpus/actual");
    ck_assert_ptr_nonnull(d);
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        char path[600];
        snprintf(path, sizeof path, "tests/fuzz/corpus/actual/%s", e->d_name);
        size_t len;
        unsigned char *buf = (unsigned char *)dsv4_test_slurp_len(path, &len);
        for (int k = 1; k <= 64; k++) {
            size_t at = len * (size_t)k / 65;
            ck_assert_int_eq(fuzz_actual_one(buf, at), 0);
            buf[at] ^= 0x5A;
            ck_assert_int_eq(fuzz_actual_one(buf, len), 0);
            buf[at] ^= 0x5A;
        }
        free(buf);
    }
    closedir(d);
}
END_TEST

DSV4_TEST_MAIN("fuzz_regress", "replay", 120, NULL, NULL, cases_inputs_replay, golden_inputs_replay,
               actual_inputs_replay)
