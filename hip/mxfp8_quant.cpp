/* mxfp8_quant.cpp - MXFP8 rows (docs/semantics/quant.md Q2,
 * docs/semantics/attention.md A9.2), the three variants of the op, bit-exact with ref/mx.c:
 * default (fl(a/448) and the correctly rounded fp32 log2, emulated in
 * integers by dsv4q_ceil_log2_f32, not the device log2), log2=exact (the
 * exact ceil rule) and scale_rule=floor.
 *
 * One launch over [T, W], 256-thread blocks, one 32-block a thread
 * (quant_device.h store_mxfp8_block): its four 16-byte bf16 loads (eight
 * for fp32) issued first, the amax and the scale rule once, two 16-byte
 * stores of codes and one scale byte.  A warp's loads cover 2 KiB
 * contiguously, each line's other sectors from L1. */
#include "quant_device.h"

namespace {

const char *const variants[] = {"default", "log2=exact", "scale_rule=floor", NULL};
/* the variant index is the rule number of store_mxfp8_block (quant_device.h) */
enum { V_CEIL_F32LOG2 = MXFP8_CEIL_F32LOG2, V_CEIL = MXFP8_CEIL, V_FLOOR = MXFP8_FLOOR };

/* VARIANT and BF16 are template arguments: the scale rule folds to
 * straight-line code. */
template <int VARIANT, bool BF16>
__global__ void __launch_bounds__(MX_THREADS)
    mxfp8_kernel(const void *__restrict__ x, long long nblocks, uint4 *__restrict__ data, uint8_t *__restrict__ scales)
{
    const long long g = mx_block_index();
    if (g >= nblocks)
        return;
    float v[MX_BLOCK_CHUNKS][8];
    load_mx_block(x, BF16, g, v);
    store_mxfp8_block<VARIANT, true>(v, data + 2 * g, scales + g);
}

template <int VARIANT>
void launch_variant(const void *x, int is_bf16, long long nblocks, hipStream_t stream, uint4 *data, uint8_t *scales)
{
    const unsigned grid = grid_for(nblocks, MX_THREADS);
    launch_by_input_dtype(is_bf16, [&](auto bf16) {
        hipLaunchKernelGGL((mxfp8_kernel<VARIANT, decltype(bf16)::value>), dim3(grid), dim3(MX_THREADS), 0, stream,
                           x, nblocks, data, scales);
    });
}

/* This file's name for the shared MX shape: dsv4_hip_check_shape finds the
 * functions below through it. */
struct mx8_shape : mx_rows {};

int shape_of(const dsv4_hip_call *c, mx8_shape *s, char *err, size_t errlen)
{
    return mx_rows_of(c, "data", DSV4_PLUGIN_FLOAT8_E4M3FN, "scale", DSV4_PLUGIN_UINT8, s, err, errlen);
}

int check_shape(const dsv4_hip_call *c, const mx8_shape &s, char *err, size_t errlen)
{
    const dsv4_plugin_tensor *d = &c->out[s.d], *sc = &c->out[s.s];
    if (d->shape[0] != s.T || d->shape[1] != s.W || sc->shape[0] != s.T || sc->shape[1] != s.W / 32)
        return QFAIL("mxfp8_quant: outputs must be [%lld, %lld] and [%lld, %lld]", s.T, s.W, s.T, s.W / 32);
    return DSV4_PLUGIN_OK;
}

hipError_t launch_shape(const dsv4_hip_call *c, const mx8_shape &s, hipStream_t stream)
{
    const long long nblocks = s.T * s.W / 32;
    if (nblocks == 0)
        return hipSuccess;
    uint4 *data = (uint4 *)c->dout[s.d];
    uint8_t *sc = (uint8_t *)c->dout[s.s];
    if (c->variant == V_FLOOR)
        launch_variant<V_FLOOR>(c->din[s.x], s.is_bf16, nblocks, stream, data, sc);
    else if (c->variant == V_CEIL)
        launch_variant<V_CEIL>(c->din[s.x], s.is_bf16, nblocks, stream, data, sc);
    else
        launch_variant<V_CEIL_F32LOG2>(c->din[s.x], s.is_bf16, nblocks, stream, data, sc);
    return hipGetLastError();
}

} // namespace

DSV4_HIP_SHAPE_KERNEL(mxfp8_quant, variants, mx8_shape);
