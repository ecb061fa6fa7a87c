"""Python implementations of two ops, written from docs/semantics for the
tests of the Python front end: numpy and torch versions of
combine_topk_swa_indices (indices.md A6, default variant) and mxfp8_quant
(quant.md Q2, default variant), and the same with planted bugs.

    python3 -m dsv4check run cases/ci.yaml --impl impls:numpy_impl
    python3 -m dsv4check run cases/ci.yaml --impl impls:wrong_numpy_impl

The planted combine bug is tests/plugin_example.c's -DEXAMPLE_WRONG: row 1's
first window entry one too high.  The planted mxfp8 bug rounds the last
element of row 0 up by one code.
"""

import numpy as np

import dsv4check

FLT_MIN = np.float32(1.1754943508222875e-38)
ALIGN = 128  # combined row width: topk + window rounded up to a multiple (A6.1)


# ---- combine_topk_swa_indices (docs/semantics/indices.md A6.2) ----

def _combine_rows(topk_indices, qsl, seq, gat, p):
    """Per-row positions, request ids, top-k and window lengths."""
    qlen = np.diff(qsl)
    req = np.repeat(np.arange(len(seq)), qlen)
    start = np.repeat(qsl[:-1] - qsl[0], qlen)
    pos = seq[req] - qlen[req] + (np.arange(topk_indices.shape[0]) - start)
    width = min(p["topk"], topk_indices.shape[1])
    tk = np.clip((pos + 1) // p["compress_ratio"], 0, width)
    sw = np.clip(np.minimum(pos + 1, p["window_size"]), 0, None)
    return req, pos, width, tk, sw


def combine_numpy(case, plant_bug=False):
    p, x = case.params, case.inputs
    topk = x["topk_indices"].astype(np.int64)
    qsl, seq, gat = (x[k].astype(np.int64) for k in ("query_start_loc", "seq_lens", "gather_lens"))
    M, N, W = p["M"], p["N"], p["window_size"]
    T = topk.shape[0]
    P = -(-(p["topk"] + W) // ALIGN) * ALIGN
    req, pos, width, tk, sw = _combine_rows(topk, qsl, seq, gat, p)
    out = np.full((T, P), -1, dtype=np.int32)
    v = topk[:, :width]
    keep = (np.arange(width)[None, :] < tk[:, None]) & (v >= 0) & (v < N)
    out[:, :width] = np.where(keep, v + M * req[:, None], -1)
    j = np.arange(W)
    rows, cols = np.nonzero(j[None, :] < sw[:, None])
    first = pos - sw + 1 - (seq - gat)[req]  # window start within the gathered rows
    out[rows, tk[rows] + cols] = M * req[rows] + N + first[rows] + cols
    if plant_bug and T > 1 and sw[1] > 0 and tk[1] < P:
        out[1, tk[1]] += 1
    return {"combined_indices": out, "combined_lens": (tk + sw).astype(np.int32)}


def combine_torch(case, plant_bug=False):
    import torch
    p, x = case.params, case.inputs_torch("cpu")
    topk = x["topk_indices"].long()
    qsl, seq, gat = (x[k].long() for k in ("query_start_loc", "seq_lens", "gather_lens"))
    M, N, W = p["M"], p["N"], p["window_size"]
    T = topk.shape[0]
    P = -(-(p["topk"] + W) // ALIGN) * ALIGN
    qlen = qsl[1:] - qsl[:-1]
    req = torch.repeat_interleave(torch.arange(seq.shape[0]), qlen)
    start = torch.repeat_interleave(qsl[:-1] - qsl[0], qlen)
    pos = seq[req] - qlen[req] + torch.arange(T) - start
    width = min(p["topk"], topk.shape[1])
    tk = torch.div(pos + 1, p["compress_ratio"], rounding_mode="floor").clamp(0, width)
    sw = torch.minimum(pos + 1, torch.full_like(pos, W)).clamp_min(0)
    out = torch.full((T, P), -1, dtype=torch.int64)
    v = topk[:, :width]
    keep = (torch.arange(width)[None, :] < tk[:, None]) & (v >= 0) & (v < N)
    out[:, :width] = torch.where(keep, v + M * req[:, None], torch.full_like(v, -1))
    rows, cols = torch.nonzero(torch.arange(W)[None, :] < sw[:, None], as_tuple=True)
    first = pos - sw + 1 - (seq - gat)[req]
    out[rows, tk[rows] + cols] = M * req[rows] + N + first[rows] + cols
    if plant_bug and T > 1 and sw[1] > 0 and tk[1] < P:
        out[1, tk[1]] += 1
    return out.to(torch.int32), (tk + sw).to(torch.int32)


# ---- mxfp8_quant (docs/semantics/quant.md Q2, default rule) ----

def e4m3fn_codes(q):
    """float32 values -> e4m3fn codes: RNE, saturating at 448, NaN 0x7F."""
    a = np.abs(q.astype(np.float64))
    sign = (np.signbit(q).astype(np.uint32) << 7)
    with np.errstate(invalid="ignore", over="ignore"):
        _, e = np.frexp(a)
        e = np.maximum(e - 1, -6)  # a in [2^e, 2^(e+1)); below 2^-6 the subnormal step 2^-9
        m = np.rint(a / np.ldexp(1.0, e) * 8)  # 8..16 for normals, 0..8 below
        code = np.where(a < 2.0 ** -6, m, (e + 7) * 8 + (m - 8))
        code = np.where(np.isinf(a) | (code > 0x7E), 0x7E, code)
    code = np.where(np.isnan(a), 0x7F, code).astype(np.uint32)
    return (code | sign).astype(np.uint8)


def mxfp8_numpy(case, plant_bug=False):
    x = case.float32("x")
    T, W = x.shape
    blocks = x.reshape(T, W // 32, 32)
    with np.errstate(invalid="ignore"):
        absb = np.abs(blocks)
        all_nan = np.all(np.isnan(absb), axis=-1)
        amax = np.where(all_nan, np.float32(np.nan), np.nanmax(np.where(np.isnan(absb), 0, absb), axis=-1))
        r = np.maximum(amax, FLT_MIN) / np.float32(448)  # fp32 division
        l2 = np.ceil(np.log2(r.astype(np.float64)).astype(np.float32))  # the correctly rounded fp32 log2
        code = np.where(np.isinf(l2), np.where(l2 > 0, 254, 0), np.clip(np.nan_to_num(l2) + 127, 0, 254))
    code = np.where(all_nan, 255, code).astype(np.int32)
    mult = np.ldexp(np.float32(1), (127 - np.minimum(code, 254)).astype(np.int32)).astype(np.float32)
    q = (blocks * mult[..., None]).astype(np.float32)
    data = e4m3fn_codes(np.where(all_nan[..., None], np.float32(np.nan), q)).reshape(T, W)
    if plant_bug:
        data[0, -1] = (data[0, -1] & 0x80) | min((data[0, -1] & 0x7F) + 1, 0x7E)
    return {"data": data, "scale": code.astype(np.uint8)}


def mxfp8_torch(case, plant_bug=False):
    import torch
    x = torch.from_numpy(case.float32("x"))
    T, W = x.shape
    b = x.reshape(T, W // 32, 32).abs()
    nan = torch.isnan(b)
    all_nan = nan.all(-1)
    amax = torch.where(nan, torch.zeros_like(b), b).amax(-1)
    r = torch.clamp(amax, min=float(FLT_MIN)) / 448.0
    l2 = torch.ceil(torch.log2(r.double()).float())
    code = torch.where(torch.isinf(l2), torch.where(l2 > 0, 254.0, 0.0), (l2 + 127).clamp(0, 254))
    code = torch.where(all_nan, torch.full_like(code, 255), code).to(torch.int32)
    mult = torch.ldexp(torch.ones_like(amax), (127 - code.clamp(max=254)).float())
    q = (x.reshape(T, W // 32, 32) * mult[..., None]).float()
    q = torch.where(all_nan[..., None], torch.full_like(q, float("nan")), q).reshape(T, W)
    a = q.double().abs()
    sign = torch.signbit(q).to(torch.int64) << 7
    _, e = torch.frexp(a)
    e = torch.clamp(e.long() - 1, min=-6)
    m = torch.round(a / torch.pow(2.0, e.double()) * 8)  # torch.round: half to even
    codes = torch.where(a < 2.0 ** -6, m, (e + 7).double() * 8 + (m - 8))
    codes = torch.where(torch.isinf(a) | (codes > 0x7E), torch.full_like(codes, 0x7E), codes)
    codes = torch.where(torch.isnan(a), torch.full_like(codes, 0x7F), codes).long() | sign
    codes = codes.to(torch.uint8)
    if plant_bug:
        v = int(codes[0, -1])
        codes[0, -1] = (v & 0x80) | min((v & 0x7F) + 1, 0x7E)
    return {"data": codes, "scale": code.to(torch.uint8)}


# ---- the implementations as the front end names them ----

def _impl(combine, mxfp8, plant_bug=False):
    """The two ops by these functions, each with its planted bug if asked."""
    def as_asked(fn):
        return (lambda case: fn(case, plant_bug=True)) if plant_bug else fn

    return {"combine_topk_swa_indices[default]": as_asked(combine), "mxfp8_quant[default]": as_asked(mxfp8)}


numpy_impl = _impl(combine_numpy, mxfp8_numpy)
wrong_numpy_impl = _impl(combine_numpy, mxfp8_numpy, plant_bug=True)
torch_impl = _impl(combine_torch, mxfp8_torch)
wrong_torch_impl = _impl(combine_torch, mxfp8_torch, plant_bug=True)


def _nan_scale_as_one(fn):
    """The kernel fn writing scale 1 (0x7F) where it writes the NaN scale
    (0xFF, an all-NaN block): it differs only in lanes touched by NaN inputs."""
    def run(case):
        out = fn(case)
        out["scale"] = np.where(out["scale"] == 0xFF, 0x7F, out["scale"]).astype(np.uint8)
        return out
    return run


nan_scale_numpy_impl = {"mxfp8_quant[default]": _nan_scale_as_one(mxfp8_numpy)}


class MissingCase:
    """combine in numpy except one case it declines (NotProvided)."""

    def __init__(self, missing):
        self.missing = missing

    def supports(self, op, variant):
        return op == "combine_topk_swa_indices" and variant == "default"

    def combine_topk_swa_indices(self, case):
        if case.name == self.missing:
            raise dsv4check.NotProvided(f"{case.name} is left out on purpose")
        return combine_numpy(case)


missing_impl = MissingCase("combine_mixed_prefill_c4")
