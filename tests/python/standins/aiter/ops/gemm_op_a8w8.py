"""Stand-in for aiter.ops.gemm_op_a8w8: gemm_a8w8_blockscale
(docs/semantics/gemm.md Q7)."""

import torch

import _match


def gemm_a8w8_blockscale(XQ, WQ, x_scale, w_scale, dtype=torch.bfloat16, isBpreshuffled=False):  # noqa: N803
    assert dtype == torch.bfloat16, "bf16 output"
    if isBpreshuffled:
        x_scale = x_scale.t()  # the stored [K/128, M] block
    case = _match.case_for("gemm_a8w8_blockscale", {"XQ": XQ, "WQ": WQ, "x_scale": x_scale, "w_scale": w_scale}, {})
    variant = "bpreshuffle" if isBpreshuffled else ("fp8=fnuz" if _match.fnuz_platform() else "default")
    return _match.reference(case, variant, XQ.device)["Y"]
