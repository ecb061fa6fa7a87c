"""mxfp8_quant (docs/semantics/quant.md Q2, the default rule) in torch on a
CUDA device, as a kernel team would write it, judged through the Python
front end:

    python3 -m dsv4check run cases/ci.yaml --impl torch_mxfp8:impl --filter mxfp8

Per block of 32: amax (NaN ignored unless the whole block is NaN), code =
clamp(ceil(log2_f32(fl32(max(amax, FLT_MIN) / 448))) + 127, 0, 254), q =
x * 2^(127 - code) in fp32, e4m3fn by round to nearest even, an infinity
saturating to +-448.
"""

import torch

FLT_MIN = 1.1754943508222875e-38
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def mxfp8_quant(case):
    x = case.inputs_torch(DEVICE)["x"].float()
    T, W = x.shape
    blocks = x.reshape(T, W // 32, 32)
    mag = blocks.abs()
    nan = torch.isnan(mag)
    all_nan = nan.all(-1)
    amax = torch.where(nan, torch.zeros_like(mag), mag).amax(-1)
    # fl32(amax / 448) exactly: on CUDA, torch divides a tensor by a Python
    # number as a multiplication by its fp32 reciprocal, one ulp off at times,
    # which moves the scale a binade where amax / 448 lies just above 2^k
    # (ci case mxfp8_log2_edge_f32 caught it). The double quotient rounded
    # once to fp32 is the correctly rounded fp32 quotient (53 >= 2 * 24 + 2).
    r = (torch.clamp(amax, min=FLT_MIN).double() / 448.0).float()
    # a correctly rounded fp32 log2: the double log2, rounded once to fp32
    l2 = torch.ceil(torch.log2(r.double()).float())
    code = torch.where(torch.isinf(l2), torch.where(l2 > 0, 254.0, 0.0), (l2 + 127).clamp(0, 254))
    code = torch.where(all_nan, torch.full_like(code, 255), code).to(torch.int32)
    mult = torch.exp2((127 - code.clamp(max=254)).double()).float()  # 2^-127 is a denormal: exact
    q = blocks * mult[..., None]
    q = torch.where(torch.isinf(q), torch.copysign(torch.full_like(q, 448.0), q), q)
    q = torch.where(all_nan[..., None], torch.full_like(q, float("nan")), q).reshape(T, W)
    data = q.to(torch.float8_e4m3fn).view(torch.uint8)
    # NaN codes keep the value's sign (0x7F / 0xFF), as the reference writes them
    sign = (torch.signbit(q).to(torch.uint8) << 7)
    data = torch.where(torch.isnan(q), sign | 0x7F, data)
    return {"data": data.view(torch.float8_e4m3fn), "scale": code.to(torch.uint8)}


impl = {"mxfp8_quant[default]": mxfp8_quant}
