/* chains.h - every chain definition (harness/chain.h), named once.  Each
 * line DSV4_CHAIN(name) stands for `dsv4_chain_<name>` in
 * ops/chain/<name>.c; harness/chain.c builds its table from here. */
DSV4_CHAIN(v41_attention_layer)
