/* fuzz_cases.c - libFuzzer target for the YAML suite loader (harness/cases.c).
 *
 * Each input is loaded as a suite named "fuzz/suite.yaml" (so relative
 * includes and golden_dir resolve under ./fuzz/, which does not exist: an
 * include fails cleanly).  A loaded suite is walked the way the runner does
 * (tags, tolerance overrides).  Any crash, sanitizer report or leak is a bug;
 * DSV4_EINPUT is the expected answer to most inputs.  See tests/fuzz/README.md. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "../../harness/cases.h"
#include "../../ref/status.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    dsv4_suite s;
    dsv4_status st = {0, ""};
    int rc = dsv4_suite_load_buffer("fuzz/suite.yaml", data, size, &s, &st);
    if (rc == DSV4_OK) {
        for (int i = 0; i < s.n; i++) {
            const dsv4_case *c = &s.cases[i];
            dsv4_policy pol;
            memset(&pol, 0, sizeof pol);
            for (const dsv4_io_spec *o = dsv4_op_outputs(c->op); o && o->name; o++)
                dsv4_case_apply_overrides(c, o->name, &pol);
            (void)dsv4_case_has_tag(c, "ci");
        }
        dsv4_suite_free(&s);
    } else if (!memchr(st.msg, '\0', sizeof st.msg) || !st.msg[0]) {
        __builtin_trap(); /* every error carries a message */
    }
    return 0;
}
