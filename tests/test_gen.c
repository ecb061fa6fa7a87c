#define _POSIX_C_SOURCE 200809L
/* test_gen.c - `dsv4check gen` never leaves damage: an interrupted gen
 * removes its temporary file, the next gen removes those of a killed one,
 * and a write over a file-size limit is a reported error (exit 3 with the
 * reason), not a crash or a half golden. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

static char tmpdir[256];
static char out[1 << 16];

static void setup(void)
{
    dsv4_test_mkdtemp(tmpdir, sizeof tmpdir, "dsv4gen");
    setenv("LSAN_OPTIONS", "suppressions=tests/lsan-hdf5.supp:print_suppressions=0", 1);
}

static void teardown(void) { dsv4_test_rm_rf(tmpdir); }

/* How many entries of dir contain part in their name. */
static int count_named(const char *dir, const char *part)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += strstr(e->d_name, part) != NULL;
    if (d)
        closedir(d);
    return n;
}

static int exists(const char *path)
{
    struct stat sb;
    return lstat(path, &sb) == 0;
}

static void sleep_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

/* A case whose golden (~19 MB) takes a while to write and sync. */
static void write_big_suite(const char *yaml)
{
    dsv4_test_write_file(yaml, "suite: big\ncases:\n  - name: big\n    op: mxfp8_quant\n"
                               "    params: {T: 1024, W: 8192}\n");
}

/* Runs `gen YAML -o DIR --force`, sends sig as soon as its temporary file
 * appears; returns 1 when the signal came while the file existed (the
 * golden not yet in place), 0 when gen had already renamed it. */
static int interrupt_gen(const char *yaml, const char *dir, int sig)
{
    char golden[400];
    snprintf(golden, sizeof golden, "%s/big.h5", dir);
    unlink(golden);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int fd = open("/dev/null", O_WRONLY);
        dup2(fd, 1);
        dup2(fd, 2);
        execl(dsv4_test_exe(), dsv4_test_exe(), "gen", yaml, "-o", dir, "--force", (char *)NULL);
        _exit(127);
    }
    int seen = 0, status = 0;
    while (!seen && waitpid(pid, &status, WNOHANG) == 0) {
        seen = count_named(dir, ".tmp.") > 0;
        if (!seen)
            sleep_us(200);
    }
    ck_assert_msg(seen, "gen ended (status %d) before its temporary file was seen", status);
    ck_assert_int_eq(kill(pid, sig), 0);
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == sig, "gen did not die of signal %d (status %d)", sig,
                  status);
    ck_assert_msg(count_named(dir, ".tmp.") == 0, "signal %d left a temporary file in %s", sig, dir);
    return !exists(golden);
}

START_TEST(interrupted_gen_removes_its_temp_file)
{
    char yaml[400], dir[400];
    snprintf(yaml, sizeof yaml, "%s/big.yaml", tmpdir);
    snprintf(dir, sizeof dir, "%s/out", tmpdir);
    ck_assert_int_eq(mkdir(dir, 0755), 0);
    write_big_suite(yaml);
    static const int sigs[] = {SIGINT, SIGTERM};
    for (int k = 0; k < 2; k++) {
        int conclusive = 0;
        for (int attempt = 0; attempt < 4 && !conclusive; attempt++)
            conclusive = interrupt_gen(yaml, dir, sigs[k]);
        ck_assert_msg(conclusive, "signal %d never landed while the temporary file existed", sigs[k]);
    }
}
END_TEST

/* A pid that was a process and is no more. */
static pid_t dead_pid(void)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0)
        _exit(0);
    ck_assert_int_eq(waitpid(pid, NULL, 0), pid);
    return pid;
}

START_TEST(next_gen_removes_stale_temp_files)
{
    char dir[400], stale[500], live[500], other[500], subdir[500];
    snprintf(dir, sizeof dir, "%s/out", tmpdir);
    ck_assert_int_eq(mkdir(dir, 0755), 0);
    pid_t gone = dead_pid();
    snprintf(stale, sizeof stale, "%s/.combine_decode_only_c4.h5.tmp.%d", dir, (int)gone);
    snprintf(live, sizeof live, "%s/.other.h5.tmp.%d", dir, (int)getpid());
    snprintf(other, sizeof other, "%s/.notes.tmp.%d", dir, (int)gone);
    snprintf(subdir, sizeof subdir, "%s/.sub.h5.tmp.%d", dir, (int)gone);
    dsv4_test_write_file(stale, "half a golden");
    dsv4_test_write_file(live, "another gen is writing this");
    dsv4_test_write_file(other, "not a golden's temporary file");
    ck_assert_int_eq(mkdir(subdir, 0755), 0);
    int rc = dsv4_test_cli(out, sizeof out, "gen cases/ci.yaml --filter '^combine_decode_only_c4$' -o %s", dir);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, out);
    ck_assert_msg(strstr(out, "removed 1 stale temporary file(s) of an interrupted gen"), "%s", out);
    ck_assert_msg(!exists(stale), "%s is still there", stale);
    ck_assert(exists(live) && exists(other) && exists(subdir));
}
END_TEST

/* Over RLIMIT_FSIZE write() fails with EFBIG (gen ignores SIGXFSZ itself):
 * exit 3 naming the file and the reason, nothing left behind. */
START_TEST(gen_over_file_size_limit_says_why)
{
    char dir[400];
    snprintf(dir, sizeof dir, "%s/out", tmpdir);
    char cmd[1200];
    snprintf(cmd, sizeof cmd,
             "sh -c 'ulimit -f 16 && exec %s gen cases/ci.yaml --filter ^combine_mixed_prefill_c4\\$ -o %s' 2>&1",
             dsv4_test_exe(), dir);
    int rc = dsv4_test_popen(out, sizeof out, cmd); /* asserts a normal exit: no SIGXFSZ, no crash */
    ck_assert_msg(rc == 3, "exit %d:\n%s", rc, out);
    ck_assert_msg(strstr(out, "cannot write") && strstr(out, "File too large"), "%s", out);
    ck_assert_msg(strstr(out, dir), "%s", out);
    ck_assert_int_eq(count_named(dir, ".h5"), 0);
    ck_assert_msg(strstr(out, "AddressSanitizer") == NULL && strstr(out, "runtime error") == NULL, "%s", out);
}
END_TEST

DSV4_TEST_MAIN("gen", "gen", 300, setup, teardown, interrupted_gen_removes_its_temp_file,
               next_gen_removes_stale_temp_files, gen_over_file_size_limit_says_why)
