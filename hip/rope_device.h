/* rope_device.h - GPT-J RoPE of 4 pairs held by one lane (8 consecutive
 * lanes, pairs (2k, 2k+1) [S14]), fp32 with every product rounded and then
 * the sum (no contraction), as ref/rope.c dsv4_rope_gptj_f32. */
#ifndef DSV4_HIP_ROPE_DEVICE_H
#define DSV4_HIP_ROPE_DEVICE_H

#include "kernels.h"

/* v[0..7] are lanes 2k0 .. 2k0+7 of the rope part; cs_row = cos | sin of
 * rope_dim lanes (half = rope_dim / 2) [S15].  forward: e c - o s, e s + o c;
 * inverse: e c + o s, o c - e s (docs/semantics/attention.md A9.1).
 * rope4_cs is the rotation itself, the four cos (c4) and four sin (s4) of
 * the lane's pairs already loaded (for a caller that issues those loads
 * early, before its other reads return); rope4 loads them from cs_row. */
__device__ inline void rope4_cs(float v[8], float4 c4, float4 s4, int forward)
{
    const float cv[4] = {c4.x, c4.y, c4.z, c4.w}, sv[4] = {s4.x, s4.y, s4.z, s4.w};
    for (int i = 0; i < 4; i++) {
        const float c = cv[i], s = sv[i];
        const float e = v[2 * i], o = v[2 * i + 1];
        const float ec = __fmul_rn(e, c), os = __fmul_rn(o, s), es = __fmul_rn(e, s), oc = __fmul_rn(o, c);
        v[2 * i] = forward ? __fsub_rn(ec, os) : __fadd_rn(ec, os);
        v[2 * i + 1] = forward ? __fadd_rn(es, oc) : __fsub_rn(oc, es);
    }
}

__device__ inline void rope4(float v[8], const float *cs_row, int half, int k0, int forward)
{
    /* k0 and half are multiples of 4 and the rows 16-byte aligned at every
     * caller: one 16-byte load each for the four cos and the four sin */
    rope4_cs(v, *reinterpret_cast<const float4 *>(cs_row + k0), *reinterpret_cast<const float4 *>(cs_row + half + k0),
             forward);
}

#endif
