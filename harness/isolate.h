/* isolate.h - an implementation under test in a child process of its own.
 *
 * The harness keeps its inputs, expected outputs, bounds and masks in its
 * own process; the child gets copies of the inputs and the initial outputs
 * over a socket, runs the implementation and sends the outputs back.  A
 * crash, exit(), _exit, abort or a signal in the implementation ends only
 * the child, a run that takes longer than the timeout is killed, and each
 * becomes an error of the case that was running; the next run starts a
 * fresh child.  Children die with their parent (PR_SET_PDEATHSIG). */
#ifndef DSV4_ISOLATE_H
#define DSV4_ISOLATE_H

#include <sys/types.h>

#include "op.h"

/* What the child runs: an in-process implementation as callbacks (backend.c
 * passes its plug-in loader), so that this file needs nothing of backend.h. */
typedef struct dsv4_child_impl {
    void *arg;
    /* Loads and initialises; DSV4_OK, or the implementation's refusal in st. */
    int (*open)(void *arg, dsv4_status *st);
    const char *(*name)(void *arg);
    int (*supports)(void *arg, const dsv4_op *op, int variant);
    /* case_name and golden: the case (NULL when not known; golden NULL
     * when the inputs are not a golden's). */
    int (*run)(void *arg, const dsv4_op *op, const dsv4_opctx *c, const char *case_name, const char *golden,
               const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st);
    void (*close)(void *arg);
} dsv4_child_impl;

typedef struct dsv4_isolated dsv4_isolated;

/* Starts the child and waits at most timeout_s for it to load impl.
 * Returns DSV4_OK with *out set, also when the child died or hung while
 * loading (then every run reports that), or the implementation's refusal
 * (DSV4_EINPUT, DSV4_ESKIP, DSV4_ERUNTIME) with *out NULL.  label names the
 * implementation in messages until it has named itself. */
int dsv4_isolated_start(const dsv4_child_impl *impl, const char *label, double timeout_s,
                        dsv4_isolated **out, dsv4_status *st);
/* The implementation's name (after its init), or the label. */
const char *dsv4_isolated_name(const dsv4_isolated *x);
/* Whether it provides op in that variant; 1 where a broken child cannot say. */
int dsv4_isolated_supports(const dsv4_isolated *x, const dsv4_op *op, int variant);
/* One run in the child, at most timeout_s.  DSV4_ERUNTIME saying how the
 * child ended when it died, was killed for the timeout or could not start. */
int dsv4_isolated_run(dsv4_isolated *x, const dsv4_op *op, const dsv4_opctx *c, const char *case_name,
                      const char *golden, const dsv4_tensors *in, dsv4_tensors *out, dsv4_status *st);
/* Ends the child (it calls the implementation's close first) and frees x. */
void dsv4_isolated_stop(dsv4_isolated *x);

/* In a child just forked from parent: SIGKILL when the parent dies, and an
 * immediate exit when it already has. */
void dsv4_die_with_parent(pid_t parent);

#endif
