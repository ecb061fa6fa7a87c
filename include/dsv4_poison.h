/* dsv4_poison.h - what the guard regions around an implementation's inputs
 * hold: the poison of the input's dtype, one element after another, so that
 * a kernel reading past either end of an input computes with visible
 * garbage (NaN, or an index no tensor has) instead of whatever bytes
 * happened to lie there.  dsv4check fills the host guards of every input it
 * hands a plug-in with it; the hip backend fills its device guards the same
 * way.  Header-only (C and C++), standard library only, like dsv4_plugin.h.
 *
 * Per dtype (dsv4_plugin.h's codes), little-endian:
 *   float64 0x7FF8000000000000, float32 0x7FC00000, bfloat16 0x7FC0,
 *   float16 0x7E00: the quiet NaN of each format;
 *   int64 INT64_MIN, int32 INT32_MIN: out of range of every index, position
 *   and length (each is >= 0, or -1 for "none");
 *   float8_e4m3fn 0x7F and float8_e4m3fnuz 0x80: the format's NaN;
 *   float8_e8m0fnu 0xFF: its NaN;
 *   float4_e2m1fn_x2 0xFF: e2m1 has no NaN; 0xF is -6, the largest
 *   magnitude, in both nibbles;
 *   uint8 and bytes 0xFF: such tensors are packed caches (fp8 e4m3fn codes,
 *   e8m0 and fp32 scales), and 0xFF is NaN read as e4m3fn or e8m0, and
 *   every fp32 / bf16 / fp16 made of 0xFF bytes is a NaN too.
 *
 * An attribution rerun (after a failure) fills some guards with zeros
 * instead: see dsv4_plugin_case's guard_zeroed_input. */
#ifndef DSV4_POISON_H
#define DSV4_POISON_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Which guard regions of an input: the one before its first byte, after its last. */
enum { DSV4_GUARD_BEFORE = 1, DSV4_GUARD_AFTER = 2 };

/* The poison element of dtype into elem (at least 8 bytes); returns its size. */
static inline size_t dsv4_poison_element(int dtype, unsigned char *elem)
{
    uint64_t v;
    size_t n;
    switch (dtype) {
    case 0: v = UINT64_C(0x7FF8000000000000), n = 8; break;   /* float64 */
    case 1: v = UINT64_C(0x7FC00000), n = 4; break;           /* float32 */
    case 2: v = 0x7FC0, n = 2; break;                         /* bfloat16 */
    case 3: v = 0x7E00, n = 2; break;                         /* float16 */
    case 4: v = UINT64_C(0x8000000000000000), n = 8; break;   /* int64: INT64_MIN */
    case 5: v = UINT64_C(0x80000000), n = 4; break;           /* int32: INT32_MIN */
    case 7: v = 0x7F, n = 1; break;                           /* float8_e4m3fn */
    case 8: v = 0x80, n = 1; break;                           /* float8_e4m3fnuz */
    default: v = 0xFF, n = 1; break; /* uint8, e8m0fnu, e2m1fn_x2, bytes */
    }
    for (size_t k = 0; k < n; k++)
        elem[k] = (unsigned char)(v >> (8 * k));
    return n;
}

/* nbytes of dtype's poison into dst, element after element from dst on (a
 * tail shorter than an element gets the element's first bytes); zeros
 * instead when zeroed is non-zero. */
static inline void dsv4_poison_fill(int dtype, int zeroed, void *dst, size_t nbytes)
{
    unsigned char elem[8], *d = (unsigned char *)dst;
    if (zeroed) {
        memset(d, 0, nbytes);
        return;
    }
    size_t n = dsv4_poison_element(dtype, elem);
    for (size_t k = 0; k < nbytes; k++)
        d[k] = elem[k % n];
}

#endif
