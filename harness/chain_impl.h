/* chain_impl.h - what harness/chain.c (the steps, a run) and
 * harness/chain_pool.c (errors, the pool, glue, step parameters) share. */
#ifndef DSV4_CHAIN_IMPL_H
#define DSV4_CHAIN_IMPL_H

#include "chain.h"

typedef struct pool_entry {
    dsv4_tensor t;
    int diverged; /* propagated: differs from what the reference chain holds */
} pool_entry;

typedef struct step_rec {
    int stage; /* index into dsv4_op_outputs(desc) */
    char name[DSV4_NAME_MAX], op[64];
    int provided; /* the implementation ran it (and it was compared) */
    int n_out;
    dsv4_output_result *out;
    dsv4_verdict verdict;
} step_rec;

typedef enum run_kind {
    RUN_ISOLATED,   /* steps fed the reference chain's tensors */
    RUN_PROPAGATED, /* steps fed the implementation's tensors */
    RUN_REFERENCE,  /* the reference chain alone (the drift's baseline) */
    RUN_GEN         /* the reference chain, writing one golden per step */
} run_kind;

struct dsv4_chain {
    const dsv4_chain_def *def;
    run_kind kind;
    const dsv4_backend *b;
    const dsv4_run_opts *o;
    const dsv4_case *cs;
    dsv4_case_result *r;
    uint64_t seed;
    char golden_base[DSV4_PATH_MAX + 200]; /* step goldens are <base>.<step>.h5; "" = none */
    int force, written;
    pool_entry **pool;
    int npool, cap;
    int stage;
    step_rec *steps;
    int nsteps, cap_steps;
    int first_fail; /* step index, -1 = none */
    int err;
    dsv4_status st;
};

pool_entry *dsv4_chain_pool_find(const dsv4_chain *x, const char *name);
void dsv4_chain_pool_free_entry(pool_entry *e);
/* Takes t (its data) into the pool as name, replacing any namesake. */
int dsv4_chain_pool_put(dsv4_chain *x, const char *name, dsv4_tensor *t, int diverged);
/* Adopt an error a callee wrote into st (the step's name in front). */
int dsv4_chain_adopt(dsv4_chain *x, int rc, const dsv4_status *st, const char *step);

#endif
