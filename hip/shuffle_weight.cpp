/* shuffle_weight.cpp - aiter shuffle_weight(x, layout=(16,16)) of an fp8
 * [N, K] weight and its inverse (docs/semantics/gemm.md Q7; ref/gemm.c),
 * bit-exact: a byte permutation.
 *
 * With IN = IK = 16, BK = 32 and Kp = 16 (1-byte elements) the 16 bytes
 * W[n, k0..k0+15] (k0 % 16 == 0) stay together: they land at the 16-byte
 * chunk ((((n/16)*(K/32) + k0/32)*2 + (k0%32)/16)*16 + n%16).  One launch,
 * min(chunks / 256, SMs x 64) x 256 grid-stride, one thread per chunk in
 * shuffled order (shuffle_kernel): one 16-byte load and one 16-byte store;
 * default gathers plain -> shuffled, inverse shuffled -> plain. */
#include "quant_device.h" /* div_fast */

namespace {

const char *const variants[] = {"default", "inverse", NULL};

/* One thread per 16-byte chunk, in shuffled-layout order: a warp's 32
 * chunks are 512 contiguous shuffled bytes (16 rows n, both 16-byte halves
 * of one 32-wide K block), which are 16 full 32-byte plain sectors (the two
 * halves of each row are adjacent in the plain layout).  So default (plain
 * -> shuffled) stores and inverse loads are fully coalesced, and the other
 * side reads / writes whole sectors; index arithmetic in 32 bits where the
 * tensor allows (quant_device.h div_fast). */
__global__ void __launch_bounds__(256)
    shuffle_kernel(const uint4 *__restrict__ in, uint4 *__restrict__ out, long long N, long long K, int inverse)
{
    const long long nchunks = N * (K / 16), kblocks = K / 32;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long sh = (long long)blockIdx.x * blockDim.x + threadIdx.x; sh < nchunks; sh += stride) {
        /* sh = (((n/16) * (K/32) + k0/32) * 2 + (k0%32)/16) * 16 + n%16 */
        long long kb;
        const long long nb = div_fast(sh / 32, kblocks, &kb);
        const long long n = nb * 16 + (sh & 15), k0 = kb * 32 + ((sh >> 4) & 1) * 16;
        const long long c = n * (K / 16) + k0 / 16; /* the plain chunk (n, k0) */
        if (inverse)
            out[c] = in[sh];
        else
            out[sh] = in[c];
    }
}

struct sh_shape {
    int x, o;
    long long N, K;
};

int shape_of(const dsv4_hip_call *c, sh_shape *s, char *err, size_t errlen)
{
    int rc;
    if ((rc = dsv4_hip_tensors(c, "x:float8_e4m3fn:2 -> out:float8_e4m3fn:2", {&s->x, &s->o}, err, errlen)))
        return rc;
    dsv4_hip_dims(c->in[s->x], &s->N, &s->K);
    return DSV4_PLUGIN_OK;
}

#define FAIL(...) (snprintf(err, errlen, __VA_ARGS__), DSV4_PLUGIN_EINPUT)

/* dsv4_shuffle_check (ref/gemm.c): N % 16 == 0, K % 32 == 0; out as x. */
int check_shape(const dsv4_hip_call *c, const sh_shape &s, char *err, size_t errlen)
{
    if (s.N < 0 || s.K < 0 || s.N % 16 || s.K % 32)
        return FAIL("shuffle_weight: [N = %lld, K = %lld] needs N %% 16 == 0 and K %% 32 == 0", s.N, s.K);
    if (c->out[s.o].shape[0] != s.N || c->out[s.o].shape[1] != s.K)
        return FAIL("shuffle_weight: out must be [%lld, %lld]", s.N, s.K);
    return DSV4_PLUGIN_OK;
}

hipError_t launch_shape(const dsv4_hip_call *c, const sh_shape &s, hipStream_t stream)
{
    const long long nchunks = s.N * (s.K / 16);
    if (nchunks == 0)
        return hipSuccess;
    long long blocks = (nchunks + 255) / 256;
    const long long cap = (long long)c->prop->multiProcessorCount * 64;
    blocks = blocks < cap ? blocks : cap;
    hipLaunchKernelGGL(shuffle_kernel, dim3((unsigned)blocks), dim3(256), 0, stream, (const uint4 *)c->din[s.x],
                       (uint4 *)c->dout[s.o], s.N, s.K, (int)(c->variant == 1));
    return hipGetLastError();
}

} // namespace

DSV4_HIP_SHAPE_KERNEL(shuffle_weight, variants, sh_shape);
