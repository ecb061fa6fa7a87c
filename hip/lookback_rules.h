/* lookback_rules.h - the status word of the single-pass lengths -> indptr
 * scan (idx_common.h lookback_*) and the SWA row lengths
 * (decode_swa_indices_and_lens.cpp), written once for the device and the
 * host.  Plain C11 as well: tests/test_quant_rules.c compiles it on the
 * host, checks the packing, runs the look-back protocol over simulated
 * interleavings with stale words of earlier launches, and checks the row
 * math against the reference's rule (docs/semantics/indices.md A5.2).
 *
 * A status word (64 bits) is the whole message one block sends the others,
 * so one single-copy-atomic 64-bit store publishes the flag and the value
 * together (no second word, no fence between them):
 *   bits 63..32  the epoch of the launch that wrote it (a host-side launch
 *                counter, never 0; zeroed memory and earlier launches'
 *                words carry other epochs and read as "not yet published");
 *   bit  31      1: the value is the inclusive prefix up to and including
 *                the block; 0: the value is the block's own aggregate;
 *   bits 30..0   the value, in [0, 2^31): every prefix of the lengths is at
 *                most their total, which the host bounds by INT32_MAX. */
#ifndef DSV4_HIP_LOOKBACK_RULES_H
#define DSV4_HIP_LOOKBACK_RULES_H

#include <stdint.h>

#if defined(__CUDACC__) || defined(__HIP__)
#define DSV4L_FN static inline __host__ __device__
#else
#define DSV4L_FN static inline
#endif

#define DSV4L_INCLUSIVE 0x80000000u

DSV4L_FN uint64_t dsv4l_word(uint32_t epoch, int inclusive, int32_t value)
{
    return ((uint64_t)epoch << 32) | (inclusive ? (uint64_t)DSV4L_INCLUSIVE : 0u) |
           (uint64_t)((uint32_t)value & 0x7FFFFFFFu);
}

/* Written by this launch (epoch e)?  Anything else is unpublished. */
DSV4L_FN int dsv4l_current(uint64_t w, uint32_t epoch)
{
    return (uint32_t)(w >> 32) == epoch;
}

DSV4L_FN int dsv4l_inclusive(uint64_t w)
{
    return ((uint32_t)w & DSV4L_INCLUSIVE) != 0;
}

DSV4L_FN int32_t dsv4l_value(uint64_t w)
{
    return (int32_t)((uint32_t)w & 0x7FFFFFFFu);
}

/* One window of the look-back, as each of its n threads sees it: thread
 * tt has read the word of block base - tt (a current one), or none when
 * base - tt < 0, which acts as an inclusive prefix 0 (block 0 always
 * publishes an inclusive prefix, so the window that reaches it ends there).
 * `first` is the smallest tt whose word is inclusive (n when none is):
 * the nearest predecessor with its prefix known.  Thread tt adds its value
 * when tt <= first: the aggregates of the blocks after that predecessor,
 * and the predecessor's inclusive prefix itself.  When first == n the
 * window's n aggregates are summed and the look-back moves n blocks back. */
DSV4L_FN int dsv4l_window_is_inclusive(long long j, uint64_t w)
{
    return j < 0 || dsv4l_inclusive(w);
}

DSV4L_FN int32_t dsv4l_window_part(long long j, uint64_t w, int tt, int first)
{
    return (j < 0 || tt > first) ? 0 : dsv4l_value(w);
}

/* The SWA window of a valid token t of request r (docs/semantics/indices.md
 * A5.1, A5.2): pos = (seq_len - (qs1 - qs0)) + (t - qs0), len = pos + 1 -
 * max(pos - W + 1, 0) = min(pos + 1, W), start = pos + 1 - len =
 * max(pos - W + 1, 0).  The host checked pos >= 0; pos < seq_len <= INT32_MAX
 * (t < qs1), so start + j < 2^31 for every j < len. */
DSV4L_FN long long dsv4l_swa_pos(int32_t seq, int32_t qs0, int32_t qs1, long long t)
{
    return ((long long)seq - ((long long)qs1 - qs0)) + (t - qs0);
}

DSV4L_FN int32_t dsv4l_swa_len(long long pos, long long W)
{
    return (int32_t)(pos + 1 < W ? pos + 1 : W);
}

#endif
