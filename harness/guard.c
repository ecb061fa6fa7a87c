/* guard.c - guarded buffers (guard.h). */
#include "guard.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The canary of outputs and err: an unlikely byte for a kernel to write. */
#define GUARD_CANARY 0xD5

size_t dsv4_guard_len(void)
{
    long page = sysconf(_SC_PAGESIZE);
    return page > 4096 ? (size_t)page : 4096;
}

static void fill_region(uint8_t *r, size_t g, const dsv4_guard_kind *kind, int side)
{
    if (!kind->is_input)
        memset(r, GUARD_CANARY, g);
    else
        dsv4_poison_fill(kind->dtype, (kind->zeroed_sides & side) != 0, r, g);
}

uint8_t *dsv4_guarded_alloc(size_t n, size_t g, const void *init, const dsv4_guard_kind *kind)
{
    uint8_t *base = malloc(n + 2 * g);
    if (!base)
        return NULL;
    fill_region(base, g, kind, DSV4_GUARD_BEFORE);
    if (init && n)
        memcpy(base + g, init, n);
    else
        memset(base + g, 0, n);
    fill_region(base + g + n, g, kind, DSV4_GUARD_AFTER);
    return base;
}

static int check_region(const uint8_t *r, size_t g, const dsv4_guard_kind *kind, int side, const char *what,
                        dsv4_status *st)
{
    unsigned char elem[8] = {GUARD_CANARY};
    size_t esize = 1;
    if (kind->is_input && (kind->zeroed_sides & side))
        elem[0] = 0;
    else if (kind->is_input)
        esize = dsv4_poison_element(kind->dtype, elem);
    for (size_t k = 0; k < g; k++)
        if (r[k] != elem[k % esize])
            return dsv4_fail(st, DSV4_ERUNTIME,
                             "%s: guard bytes %s the buffer overwritten (byte %zu of %zu is 0x%02x)", what,
                             side == DSV4_GUARD_BEFORE ? "before" : "after", k, g, r[k]);
    return DSV4_OK;
}

int dsv4_guards_check(const uint8_t *base, size_t n, size_t g, const dsv4_guard_kind *kind, const char *what,
                      dsv4_status *st)
{
    int rc = check_region(base, g, kind, DSV4_GUARD_BEFORE, what, st);
    return rc ? rc : check_region(base + g + n, g, kind, DSV4_GUARD_AFTER, what, st);
}

dsv4_guard_kind dsv4_input_guard_kind(int dtype, int k, const dsv4_guard_fill *fill)
{
    dsv4_guard_kind kind = {1, dtype, 0};
    if (fill && fill->sides && fill->input == k)
        kind.zeroed_sides = fill->sides;
    return kind;
}
