/* testutil.h - shared helpers for the Check test programs. */
#ifndef DSV4_TESTUTIL_H
#define DSV4_TESTUTIL_H

#include <check.h>
#include <stdlib.h>

/* Runs one suite with CK_NORMAL output; returns the process exit status. */
static inline int dsv4_test_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif
