/* guard.h - the guarded copies a plug-in is handed: each buffer between two
 * guard regions of at least a page, checked after the call.  Outputs and
 * err get a canary byte (a write into it is named); inputs get the poison
 * of their dtype (include/dsv4_poison.h), so that a read past either end
 * computes with garbage, and a write into it is named too. */
#ifndef DSV4_GUARD_H
#define DSV4_GUARD_H

#include <stddef.h>
#include <stdint.h>

#include "../include/dsv4_poison.h"
#include "../ref/status.h"

/* An attribution rerun's guards: input `input`'s regions on `sides`
 * (DSV4_GUARD_BEFORE | DSV4_GUARD_AFTER) hold zeros instead of poison.
 * sides 0 (the zero value): every input's guards hold its poison. */
typedef struct dsv4_guard_fill {
    int input;
    int sides;
} dsv4_guard_fill;

/* How one buffer's guard regions are filled. */
typedef struct dsv4_guard_kind {
    int is_input;     /* 0: the canary byte (outputs, err) */
    int dtype;        /* inputs: a dsv4_dtype, whose poison fills the guards */
    int zeroed_sides; /* inputs: the sides that hold zeros instead */
} dsv4_guard_kind;

/* The guard length: a page, at least 4096 bytes (a multiple of every
 * element size, so the poison elements line up with the buffer's). */
size_t dsv4_guard_len(void);

/* guard | n bytes (a copy of init, or zeroes) | guard; the data at + g.
 * NULL when out of memory. */
uint8_t *dsv4_guarded_alloc(size_t n, size_t g, const void *init, const dsv4_guard_kind *kind);

/* DSV4_OK, or DSV4_ERUNTIME naming `what` and the side whose guard bytes
 * no longer hold what dsv4_guarded_alloc put there. */
int dsv4_guards_check(const uint8_t *base, size_t n, size_t g, const dsv4_guard_kind *kind, const char *what,
                      dsv4_status *st);

/* The guard kind of input k under fill. */
dsv4_guard_kind dsv4_input_guard_kind(int dtype, int k, const dsv4_guard_fill *fill);

#endif
