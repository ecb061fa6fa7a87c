/* golden_same.c - `golden_same A.h5 B.h5 [A2.h5 B2.h5 ...]`: exit 0 when each
 * pair holds the same golden except for the provenance attributes (generator,
 * created); 1 naming the first difference; 2 when a file cannot be read.
 * make verify-goldens runs it on every committed golden against a fresh
 * regeneration. */
#include <stdio.h>

#include "golden_eq.h"

int main(int argc, char **argv)
{
    if (argc < 3 || argc % 2 == 0) {
        fprintf(stderr, "usage: golden_same A.h5 B.h5 [A2.h5 B2.h5 ...]\n");
        return 2;
    }
    int rc = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        dsv4_golden a, b;
        dsv4_status st = {0, ""};
        if (dsv4_golden_read(argv[i], &a, &st) || dsv4_golden_read(argv[i + 1], &b, &st)) {
            fprintf(stderr, "golden_same: %s\n", st.msg);
            dsv4_golden_free(&a);
            return 2;
        }
        char why[256] = "";
        if (!dsv4_golden_same(&a, &b, why, sizeof why)) {
            fprintf(stderr, "golden_same: %s and %s: %s\n", argv[i], argv[i + 1], why);
            rc = 1;
        }
        dsv4_golden_free(&a);
        dsv4_golden_free(&b);
    }
    return rc;
}
