"""Stand-in for vllm...quantization.utils.fp8_utils: per_token_group_quant_fp8
(docs/semantics/quant.md Q3.2)."""

import _match


def per_token_group_quant_fp8(x, group_size, eps=1e-10, dtype=None, column_major_scales=False):
    case = _match.case_for("fp8_group_quant", {"x": x},
                           {"group_size": group_size, "transpose_scale": int(column_major_scales)})
    variant = "impl=triton,fp8=fnuz" if _match.fnuz_platform() else "impl=triton"
    out = _match.reference(case, variant, x.device)
    scale = out["scale"]
    if column_major_scales:  # [M, G] with column-major storage, as the Triton helper returns it
        scale = scale.t()
    return out["y"], scale
