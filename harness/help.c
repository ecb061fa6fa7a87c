/* help.c - the text of `dsv4check --help` and `dsv4check COMMAND --help`. */
#include "help.h"

#include <string.h>

#include "drift.h"
#include "yaml_doc.h"
#include "version.h"

void dsv4_usage_main(FILE *f, const char *prog)
{
    fprintf(f,
            "usage: %s COMMAND [options] [args]\n"
            "\n"
            "A correctness reference and golden-test harness for the DeepSeek V4 sparse-MLA\n"
            "kernels (vLLM on ROCm through aiter).\n"
            "\n"
            "commands:\n"
            "  list  [SUITE.yaml...]     the ops with their variants, parameters, inputs and\n"
            "                            outputs; with suites, their cases; --goldens [DIR]:\n"
            "                            every golden with its op, variant, case and shapes\n"
            "  run   SUITE.yaml...       run every case: the implementation (--impl) against\n"
            "                            the case's golden, or the live reference if it has none\n"
            "  gen   SUITE.yaml...       write the goldens of the cases (reference outputs)\n"
            "  check FILE.h5...          the implementation against golden files\n"
            "  identify [SOURCE...]      which variant of each op the implementation computes\n"
            "  show  FILE.h5...          print a golden file's attributes and tensors\n"
            "  bench                     time the reference (and --impl) on production shapes\n"
            "\n"
            "`%s COMMAND --help` lists each command's options.\n"
            "suite files and their includes: regular files only; together at most %d bytes,\n"
            "%d file loads and %d YAML nodes, nested at most %d deep (README.md \"Limits\").\n"
            "exit codes: 0 passed, 1 tolerance violation, 2 bad usage or input,\n"
            "            3 runtime or device error, 77 skipped (e.g. no GPU)\n"
            "version %s (%s)\n",
            prog, prog, DSV4_YAML_MAX_BYTES, DSV4_YAML_MAX_FILES, DSV4_YAML_MAX_NODES, DSV4_YAML_MAX_DEPTH,
            DSV4_VERSION, DSV4_GIT_REV);
}

#define DSV4_STR_(x) #x
#define DSV4_STR(x) DSV4_STR_(x)

static const char common_help[] =
    "  --impl IMPL       ref (default), hip (build/libdsv4_hip.so), or a plug-in .so\n"
    "  --actual FILE     judge the outputs in FILE, an actuals file (one group per case,\n"
    "                    one dataset per output; data/README.md), instead of running an\n"
    "                    implementation; a case FILE lacks is skipped as not provided\n"
    "  --filter REGEX    only cases whose name, op/name or contract: tag matches (POSIX extended)\n"
    "  --junit FILE      write a JUnit XML report (one testcase per case and output)\n"
    "  --json FILE       write a JSON report with every metric\n"
    "  --device N        GPU to use for --impl hip or a GPU plug-in\n"
    "  --rerun N         run the implementation N times; any bitwise difference fails\n"
    "  --mem-limit BYTES refuse cases needing more (suffix K, M, G; default: half the RAM)\n"
    "  -j, --jobs N      run N cases at once in worker processes (same results, suite order)\n"
    "  --shard K/N       only the cases whose name hashes to shard K of N (FNV-1a mod N)\n"
    "  --timeout SECONDS kill an implementation still running a case after this long;\n"
    "                    the case is an ERROR (default 600)\n"
    "  --html FILE       write a self-contained HTML report (heatmaps of failing outputs)\n"
    "  --repro-dir DIR   write DIR/<case>.h5 for each failing case, replayable with `check`\n"
    "  --baseline JSON   warn when a passing case's error grew since that --json report\n"
    "                    (a regular file of at most " DSV4_STR(DSV4_BASELINE_MAX_MIB) " MiB)\n"
    "  --drift-factor F  growth that counts as drift (default 2)\n"
    "  --strict          drift fails the run (exit 1)\n"
    "  --special MODE    strict (default): every lane counts; separate: for cases with NaN/Inf\n"
    "                    inputs, the verdict counts the lanes those inputs do not touch, and\n"
    "                    mismatches in the touched lanes are listed as a note (README)\n"
    "  -v, --verbose     print every output's metrics, not only failures\n"
    "  -h, --help        this help\n";

void dsv4_usage_cmd(FILE *f, const char *prog, const char *cmd)
{
    if (strcmp(cmd, "run") == 0)
        fprintf(f,
                "usage: %s run SUITE.yaml... [options]\n"
                "Runs each case: inputs from its golden (checked against the generator), the\n"
                "implementation under test, and a comparison of every output under its policy.\n"
                "A case without a golden is compared with the live CPU reference.\n"
                "  --seed N          override every case's seed (goldens are then not used)\n"
                "  --exclude-tag T   skip the cases tagged T (comma-separated; 'contract:*' skips every\n"
                "                    case beyond a production kernel's contract, see README)\n%s",
                prog, common_help);
    else if (strcmp(cmd, "gen") == 0)
        fprintf(f,
                "usage: %s gen SUITE.yaml... [options]\n"
                "Writes each case's golden (inputs and reference outputs) to its golden path,\n"
                "or under -o DIR.  Writes are atomic; an existing file is kept unless --force.\n"
                "Two cases that would write one file are refused, naming both.  An interrupted\n"
                "gen removes its temporary file; the next gen removes those of a killed one.\n"
                "  -o, --output DIR  write DIR/<case>.h5 instead of the cases' golden paths\n"
                "  --force           replace existing golden files\n"
                "  --filter REGEX    only matching cases\n"
                "  --exclude-tag T   skip the cases tagged T (comma-separated, 'prefix*')\n"
                "  --seed N          override every case's seed\n"
                "  -h, --help        this help\n",
                prog);
    else if (strcmp(cmd, "check") == 0)
        fprintf(f,
                "usage: %s check FILE.h5... [options]\n"
                "Checks the implementation against golden files (written by `gen`, or by hand\n"
                "following data/README.md).  With --actual, each golden's case is looked up in\n"
                "the actuals file by the golden's case name.\n%s",
                prog, common_help);
    else if (strcmp(cmd, "identify") == 0)
        fprintf(f,
                "usage: %s identify (--impl IMPL | --actual FILE) [SUITE.yaml... | GOLDEN.h5...]\n"
                "       [--filter REGEX] [--device N] [--timeout SECONDS]\n"
                "For each op the implementation provides, runs it on the inputs of the sources'\n"
                "cases of that op (default cases/ci.yaml; with --actual, the file's outputs of\n"
                "those cases) and compares its outputs with the reference of every variant of\n"
                "the op on the same inputs: per op, the variants it matches bit for bit (the\n"
                "reference rounded into the kernel's dtype), within bound, or not, and where the\n"
                "nearest failing variant first differs.  Exit 0: every op matches a variant;\n"
                "1: one matches none; 77: none of the sources' ops is provided.\n",
                prog);
    else if (strcmp(cmd, "show") == 0)
        fprintf(f, "usage: %s show FILE.h5...\nPrints attributes, parameters and tensors (with the first values).\n",
                prog);
    else if (strcmp(cmd, "list") == 0)
        fprintf(f,
                "usage: %s list [SUITE.yaml...] [--impl IMPL [--device N]] [--filter RE] [--exclude-tag T]\n"
                "          [--shard K/N]\n"
                "       %s list --goldens [DIR] [--filter RE] [--json]\n"
                "Without suites: every op, its variants (the first is the default) with sources,\n"
                "its parameters, inputs and outputs (each output's dtype is what an actuals file\n"
                "holds).  With suites: their cases and the production contracts they exceed\n"
                "(contract: tags).  With --impl: which ops and variants that implementation\n"
                "provides.  --markdown: the README's table of ops, variants and sources.\n"
                "--goldens: every golden DIR/NAME.h5 (default data/ci), one line each\n"
                "sorted by op, variant and case, with its inputs' and outputs' dtypes and shapes;\n"
                "--json prints them as a JSON array.\n",
                prog, prog);
    else if (strcmp(cmd, "bench") == 0)
        fprintf(f,
                "usage: %s bench [--impl IMPL [--no-ref]] [--filter REGEX] [-v]\n"
                "Times the CPU reference on production-size cases (best of several runs) and\n"
                "reports time, GB/s and GFLOP/s, with the machine's measured copy bandwidth and\n"
                "sgemm/dgemm rates for scale: %% peak is against the line's probe, measured just\n"
                "before it.  The reference runs on DSV4_THREADS threads (default: every core);\n"
                "each line also gives its 1-thread time and the speed-up, and fails if the\n"
                "outputs differ between the two (-v prints their digest).  With --impl hip it\n"
                "also times the kernels, against the device's copy kernel (memory-bound lines)\n"
                "and its matrix units (bf16 products from registers: GFLOP lines) measured in\n"
                "the same run, and first checks the device's hardware number conversions\n"
                "against the integer rules on every fp32 input and code pair (the run fails on\n"
                "a mismatch).  --no-ref times the implementation only (no reference runs: on a\n"
                "GPU machine the time goes to the kernels).\n",
                prog);
}
