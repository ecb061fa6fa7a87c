/* wo_a_common.h - the warp-per-output form of rocm_inv_rope_einsum: one
 * warp / wave per output element, lanes stride over the reduction, an
 * xor-shuffle warp sum (warpSize read at run time).  (rocm_mxfp8_wo_a_bmm
 * runs on the matrix units instead.) */
#ifndef DSV4_HIP_WO_A_COMMON_H
#define DSV4_HIP_WO_A_COMMON_H

#include "quant_device.h"

/* The warp's sum, in every lane (xor tree; the ops' bounds gamma_n G hold
 * for any summation order). */
__device__ inline float warp_sum(float s)
{
    for (int off = warpSize / 2; off > 0; off >>= 1)
        s += __shfl_xor(s, off);
    return s;
}

/* Blocks of 256 threads covering n outputs at one warp each (host side;
 * the warp width of the device). */
static inline unsigned warp_grid(long long n, const hipDeviceProp_t *prop)
{
    const long long per = 256 / prop->warpSize;
    return (unsigned)((n + per - 1) / per);
}

/* The launch: launch(grid, block) with a warp per each of the n
 * output elements; nothing to launch for an empty output. */
template <class Launch>
static inline hipError_t launch_per_output(long long n, const hipDeviceProp_t *prop, Launch launch)
{
    if (n == 0)
        return hipSuccess;
    launch(dim3(warp_grid(n, prop)), dim3(256));
    return hipGetLastError();
}

#endif
