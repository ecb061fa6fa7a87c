/* test_fuzz_struct.c - the structure-aware golden fuzzer
 * (tests/fuzz/fuzz_golden_struct.c) outside libFuzzer, in the normal and
 * the ASan build:
 *  - the reader's Fletcher32 (dsv4_h5_fletcher32), which the fuzzer also
 *    writes its rewritten chunks with, matches the checksum libhdf5 stores
 *    (else every such chunk would just fail the checksum, and the lies test
 *    nothing);
 *  - every seed (tests/fuzz/corpus/golden_struct/) and every kept finding
 *    (tests/fuzz/regress/golden_struct/) replays: the file loads, or is
 *    refused with DSV4_EINPUT and a message; never a crash, a hang (the
 *    tcase timeout), data from outside the file, or an honest dataset read
 *    back with other bytes (the target traps on those);
 *  - its custom mutator and crossover, driven from each seed for a few
 *    rounds, always give a full description that replays the same way.
 * A kept input listed in tests/fuzz/regress/golden_struct/OPEN is a finding
 * not yet fixed: it must still fail (a trap, a crash or a 5 s hang, in a
 * child process), and once it passes the test says to take it off the list,
 * where it becomes a regression test like the others. */
#define _POSIX_C_SOURCE 200809L
#define GS_STANDALONE
#include "fuzz/fuzz_golden_struct.c"

#include <glob.h>
#include <signal.h>
#include <sys/wait.h>

#include "testutil.h"

/* The input files of a folder, README.md left out. */
typedef struct inputs {
    glob_t g;
    int n;
    const char *path[256];
} inputs;

static inputs seeds, kept;
static char *open_list; /* the OPEN file's text, "" if none */

static int is_open(const char *path)
{
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    size_t n = strlen(base);
    for (const char *p = open_list; (p = strstr(p, base)); p += n)
        if ((p == open_list || p[-1] == '\n') && (p[n] == '\n' || p[n] == '\0'))
            return 1;
    return 0;
}

static void list_inputs(inputs *in, const char *dir)
{
    char pattern[256];
    snprintf(pattern, sizeof pattern, "%s/*", dir);
    in->n = 0;
    if (glob(pattern, 0, NULL, &in->g) != 0)
        return;
    for (size_t i = 0; i < in->g.gl_pathc && in->n < 256; i++)
        if (!strstr(in->g.gl_pathv[i], "/README.md") && !strstr(in->g.gl_pathv[i], "/OPEN"))
            in->path[in->n++] = in->g.gl_pathv[i];
}

static uint8_t *read_input(const char *path, size_t *n)
{
    return (uint8_t *)dsv4_test_slurp_len(path, n);
}

START_TEST(fletcher32_matches_libhdf5)
{
    LLVMFuzzerInitialize(NULL, NULL);
    for (hsize_t len = 1; len < 3000; len += len / 3 + 1) { /* odd and even lengths */
        hid_t f = H5Fcreate(gs_main, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
        ck_assert_int_ge(f, 0);
        hid_t sp = H5Screate_simple(1, &len, NULL), dcpl = H5Pcreate(H5P_DATASET_CREATE);
        H5Pset_chunk(dcpl, 1, &len);
        H5Pset_fletcher32(dcpl);
        hid_t d = H5Dcreate2(f, "x", H5T_STD_U8LE, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
        uint8_t *b = gs_fill((size_t)len, (uint32_t)len);
        ck_assert_int_ge(H5Dwrite(d, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, b), 0);
        hsize_t off = 0, size = 0;
        uint32_t mask;
        ck_assert_int_ge(H5Dget_chunk_storage_size(d, &off, &size), 0);
        ck_assert_uint_eq(size, len + 4);
        uint8_t *raw = malloc(size);
        ck_assert_int_ge(H5Dread_chunk(d, H5P_DEFAULT, &off, &mask, raw), 0);
        uint32_t stored = (uint32_t)raw[len] | (uint32_t)raw[len + 1] << 8 |
                          (uint32_t)raw[len + 2] << 16 | (uint32_t)raw[len + 3] << 24;
        ck_assert_msg(dsv4_h5_fletcher32(raw, (size_t)len) == stored, "length %llu: %08x, libhdf5 %08x",
                      (unsigned long long)len, dsv4_h5_fletcher32(raw, (size_t)len), stored);
        free(raw);
        free(b);
        H5Dclose(d);
        H5Pclose(dcpl);
        H5Sclose(sp);
        H5Fclose(f);
    }
}
END_TEST

static void replay(const char *path)
{
    size_t n;
    uint8_t *data = read_input(path, &n);
    fprintf(stderr, "replaying %s\n", path); /* names the input a hang or crash is in */
    LLVMFuzzerTestOneInput(data, n);
    free(data);
}

START_TEST(seed_replays)
{
    LLVMFuzzerInitialize(NULL, NULL);
    replay(seeds.path[_i]);
}
END_TEST

START_TEST(kept_input_replays)
{
    LLVMFuzzerInitialize(NULL, NULL);
    if (!is_open(kept.path[_i])) {
        replay(kept.path[_i]);
        return;
    }
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        signal(SIGALRM, SIG_DFL); /* not Check's handler, which kills the whole test */
        alarm(5);
        replay(kept.path[_i]);
        _exit(0);
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(!(WIFEXITED(status) && WEXITSTATUS(status) == 0),
                  "%s replays cleanly now: take it off tests/fuzz/regress/golden_struct/OPEN",
                  kept.path[_i]);
    fprintf(stderr, "%s: still open (%s %d)\n", kept.path[_i],
            WIFSIGNALED(status) ? "signal" : "exit", WIFSIGNALED(status) ? WTERMSIG(status)
                                                                          : WEXITSTATUS(status));
}
END_TEST

/* From one seed: 30 rounds of mutation (and a crossover with the next
 * seed), each result replayed. */
START_TEST(mutations_replay)
{
    setenv("GS_SKIP_OPEN", "1", 1); /* open findings are the kept inputs' business */
    LLVMFuzzerInitialize(NULL, NULL);
    size_t n, n2;
    uint8_t *seed = read_input(seeds.path[_i], &n);
    uint8_t *other = read_input(seeds.path[(_i + 1) % seeds.n], &n2);
    uint8_t buf[4096];
    ck_assert_uint_le(n, sizeof buf);
    memcpy(buf, seed, n);
    size_t len = n;
    for (unsigned round = 0; round < 30; round++) {
        len = LLVMFuzzerCustomMutator(buf, len, sizeof buf, 1000u * (unsigned)_i + round);
        ck_assert_uint_eq(len, sizeof(gs_desc));
        LLVMFuzzerTestOneInput(buf, len);
    }
    uint8_t mixed[4096];
    len = LLVMFuzzerCustomCrossOver(buf, len, other, n2, mixed, sizeof mixed, (unsigned)_i);
    ck_assert_uint_eq(len, sizeof(gs_desc));
    LLVMFuzzerTestOneInput(mixed, len);
    free(other);
    free(seed);
}
END_TEST

int main(void)
{
    dsv4_h5_quiet();
    list_inputs(&seeds, "tests/fuzz/corpus/golden_struct");
    list_inputs(&kept, "tests/fuzz/regress/golden_struct");
    open_list = calloc(1, 1 << 16);
    FILE *f = fopen("tests/fuzz/regress/golden_struct/OPEN", "rb");
    if (f) {
        size_t got = fread(open_list, 1, (1 << 16) - 1, f);
        open_list[got] = '\0';
        fclose(f);
    }
    if (seeds.n == 0) {
        fprintf(stderr, "test_fuzz_struct: no seeds in tests/fuzz/corpus/golden_struct\n");
        return EXIT_FAILURE;
    }
    Suite *s = suite_create("fuzz_struct");
    TCase *tc = tcase_create("replay");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, fletcher32_matches_libhdf5);
    tcase_add_loop_test(tc, seed_replays, 0, seeds.n);
    tcase_add_loop_test(tc, mutations_replay, 0, seeds.n);
    suite_add_tcase(s, tc);
    TCase *tk = tcase_create("kept");
    tcase_set_timeout(tk, 30);
    tcase_add_loop_test(tk, kept_input_replays, 0, kept.n);
    suite_add_tcase(s, tk);
    int rc = dsv4_test_run(s);
    globfree(&seeds.g);
    globfree(&kept.g);
    free(open_list);
    return rc;
}
