/* fuzz_golden.c - libFuzzer target for the HDF5 golden reader (harness/golden.c).
 *
 * Each input is an HDF5 file image read through dsv4_golden_read_image (the
 * core driver, no temporary file): the file checks, our chunk decoder, then
 * the checks against the op (op and variant lookup, parameters, validate on
 * the inputs, the outputs alloc_outputs gives, the generator's shapes).  A
 * golden that passes them all is taken on to the CPU reference: those checks
 * are the gate that must keep every malformed golden away from it.  The
 * memory limit is lowered to 64 MiB so a huge claimed shape is refused, not
 * allocated.
 * libhdf5 1.10.8 leaks on some corrupt-file error paths: those leaks (and only
 * those, matched by library name) are suppressed; see tests/fuzz/README.md. */
#include <stddef.h>
#include <stdint.h>

#include "../../harness/golden.h"
#include "../../harness/op.h"
#include "../../harness/runner.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);
const char *__lsan_default_suppressions(void);

const char *__lsan_default_suppressions(void) { return "leak:libhdf5_serial.so\n"; }

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    dsv4_set_memory_limit((uint64_t)64 << 20);
    return 0;
}

/* What `check` runs after the read: the reader has checked op, variant,
 * params and inputs, so every step here must succeed or fail cleanly. */
static void run_reference(const dsv4_golden *g)
{
    dsv4_status st = {0, ""};
    const dsv4_op *op = dsv4_op_find(g->op);
    int variant = op ? dsv4_op_variant(op, g->variant) : -1;
    dsv4_params ps = g->params;
    if (variant < 0 || dsv4_golden_params(op, &ps, "fuzz.h5", &st))
        __builtin_trap(); /* the reader let through what it must refuse */
    dsv4_opctx ctx = dsv4_opctx_make(op, &ps, variant, g->seed);
    if (op->validate(&ctx, &g->inputs, &st))
        __builtin_trap();
    dsv4_tensors exp = {0};
    (void)dsv4_reference_outputs(op, &ctx, &g->inputs, &exp, &st);
    dsv4_tensors_free(&exp);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    dsv4_golden g;
    dsv4_status st = {0, ""};
    if (dsv4_golden_read_image("fuzz.h5", data, size, &g, &st) == DSV4_OK) {
        run_reference(&g);
        dsv4_golden_free(&g);
    } else if (!st.msg[0]) {
        __builtin_trap(); /* every error carries a message */
    }
    return 0;
}
