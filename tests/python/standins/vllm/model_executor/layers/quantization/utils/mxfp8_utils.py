"""Stand-in for vllm...quantization.utils.mxfp8_utils: mxfp8_e4m3_quantize,
which on ROCm computes the fp32-log2 ceil rule (docs/semantics/quant.md Q2)."""

import _match


def mxfp8_e4m3_quantize(x, is_sf_swizzled_layout=False):
    assert is_sf_swizzled_layout is False, "the ROCm path's scales are row-major, not swizzled"
    case = _match.case_for("mxfp8_quant", {"x": x}, {})
    out = _match.reference(case, "default", x.device)
    return out["data"], out["scale"]
