/* mxfp4_quant.cpp - MXFP4 rows (docs/semantics/quant.md Q1; docs/semantics/indexer.md Q4.1), all six
 * variants of harness/ops_quant.c, bit-exact with ref/mx.c.
 *
 * One launch over the whole [T, W] tensor: each thread takes 8 consecutive
 * elements (one 16-byte bf16 load, two for fp32), so a 32-element block is 4
 * aligned lanes; the block amax is a 2-step xor shuffle.  Each thread stores
 * its 4 packed code bytes (one 32-bit store, coalesced); the first lane of a
 * block stores the scale byte.  The shuffled variant's padding entries (0,
 * docs/semantics/quant.md Q1.3) are written by the same launch (threads past the data's). */
#include "quant_device.h"

namespace {

const char *const variants[] = {"default",
                                "scale_rule=ceil_log2_f32,e2m1=threshold",
                                "scale_rule=even",
                                "scale_rule=ocp",
                                "scale_rule=ocp,round=half_away",
                                "scale_rule=even,scale_layout=shuffled",
                                NULL};
/* Rule and element encoder per variant (ops_quant.c mxfp4_rule / mxfp4_elem). */
const int var_rule[] = {DSV4Q_FP4_CEIL, DSV4Q_FP4_CEIL_F32LOG2, DSV4Q_FP4_EVEN,
                        DSV4Q_FP4_OCP,          DSV4Q_FP4_OCP,  DSV4Q_FP4_EVEN};
const int var_elem[] = {DSV4Q_ELEM_RNE,       DSV4Q_ELEM_THRESHOLD, DSV4Q_ELEM_RNE,
                        DSV4Q_ELEM_RNE,       DSV4Q_ELEM_HALF_AWAY, DSV4Q_ELEM_RNE};
enum { V_SHUFFLED = 5 };

__global__ void mxfp4_kernel(const void *__restrict__ x, int is_bf16, long long nchunks, long long W,
                             int rule, int elem, int shuffled, long long T, long long npad_cols,
                             long long npad, uint32_t *__restrict__ packed, uint8_t *__restrict__ scales)
{
    const long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const bool active = c < nchunks;
    float v[8];
    float m = dsv4q_float(0x7FC00000u); /* "none seen" */
    if (active) {
        load8(x, is_bf16, c * 8, v);
        for (int i = 0; i < 8; i++)
            m = dsv4q_amax_step(m, v[i]);
    }
    m = group_amax(m, 4); /* whole warps call it: inactive lanes form whole groups */
    if (active) {
        uint8_t byte;
        float mult;
        const int nanfill = dsv4q_fp4_block(m, rule, &byte, &mult);
        uint32_t word = 0;
        for (int i = 0; i < 8; i++) {
            /* NaN blocks: every element encodes as NAN does (mx.h) */
            const float q = nanfill ? dsv4q_float(0x7FC00000u) : dsv4q_mul(v[i], mult);
            word |= (uint32_t)dsv4q_e2m1(q, elem) << (4 * i); /* even element low (docs/semantics/quant.md Q1.2) */
        }
        packed[c] = word;
        if ((c & 3) == 0) {
            const long long blk = c / 4, nb = W / 32;
            scales[shuffled ? dsv4q_shuffle_idx(blk / nb, blk % nb, npad_cols) : blk] = byte;
        }
    }
    /* shuffled: padding entries (row >= T or column >= W/32) are 0 (docs/semantics/quant.md Q1.3) */
    if (shuffled && c < npad) {
        const long long r = c / npad_cols, col = c % npad_cols;
        if (r >= T || col >= W / 32)
            scales[dsv4q_shuffle_idx(r, col, npad_cols)] = 0;
    }
}

struct mx_shape {
    int x, d, s, is_bf16;
    long long T, W;
};

int shape_of(const dsv4_hip_call *c, mx_shape *s, char *err, size_t errlen)
{
    int rc;
    if ((rc = quant_input_x(c, &s->x, &s->is_bf16, err, errlen)) ||
        (rc = dsv4_hip_tensor(c, 1, "x_fp4", DSV4_PLUGIN_FLOAT4_E2M1FN_X2, 2, &s->d, err, errlen)) ||
        (rc = dsv4_hip_tensor(c, 1, "scales", DSV4_PLUGIN_FLOAT8_E8M0FNU, 2, &s->s, err, errlen)))
        return rc;
    s->T = c->in[s->x].shape[0];
    s->W = c->in[s->x].shape[1];
    return DSV4_PLUGIN_OK;
}

int mxfp4_check(const dsv4_hip_call *c, char *err, size_t errlen)
{
    mx_shape s;
    int rc = shape_of(c, &s, err, errlen);
    if (rc)
        return rc;
    if (s.W % 32 != 0)
        return QFAIL("mxfp4_quant: W = %lld is not a multiple of 32", s.W);
    const dsv4_plugin_tensor *d = &c->out[s.d], *sc = &c->out[s.s];
    long long sr = s.T, scol = s.W / 32;
    if (c->variant == V_SHUFFLED) { /* ceil(M/256)*256, ceil(ceil(N/32)/8)*8 (docs/semantics/quant.md Q1.3) */
        sr = (s.T + 255) / 256 * 256;
        scol = (s.W / 32 + 7) / 8 * 8;
    }
    if (d->shape[0] != s.T || d->shape[1] != s.W / 2 || sc->shape[0] != sr || sc->shape[1] != scol)
        return QFAIL("mxfp4_quant: outputs must be [%lld, %lld] and [%lld, %lld]", s.T, s.W / 2, sr, scol);
    if (s.T * s.W / 8 > (long long)0x7fffffff * 256)
        return QFAIL("mxfp4_quant: tensor too large for the grid");
    return DSV4_PLUGIN_OK;
}

hipError_t mxfp4_launch(const dsv4_hip_call *c, hipStream_t stream)
{
    mx_shape s;
    char err[8];
    if (shape_of(c, &s, err, sizeof err))
        return hipErrorInvalidValue;
    const int shuffled = c->variant == V_SHUFFLED;
    const long long nchunks = s.T * s.W / 8;
    const long long pcols = c->out[s.s].shape[1], npad = shuffled ? c->out[s.s].shape[0] * pcols : 0;
    const long long n = nchunks > npad ? nchunks : npad;
    if (n == 0)
        return hipSuccess;
    const int threads = 256;
    hipLaunchKernelGGL(mxfp4_kernel, dim3(grid_for(n, threads)), dim3(threads), 0, stream, c->din[s.x],
                       s.is_bf16, nchunks, s.W, var_rule[c->variant], var_elem[c->variant], shuffled, s.T,
                       pcols, npad, (uint32_t *)c->dout[s.d], (uint8_t *)c->dout[s.s]);
    return hipGetLastError();
}

} // namespace

dsv4_hip_kernel dsv4_hip_mxfp4_quant = {"mxfp4_quant", variants, mxfp4_check, mxfp4_launch};
