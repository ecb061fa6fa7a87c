"""Stand-in for vllm._aiter_ops: rocm_aiter_ops.group_fp8_quant, aiter's HIP
per_1x128 quant (docs/semantics/quant.md Q3.1)."""

import _match


class rocm_aiter_ops:  # noqa: N801 - the production name
    @staticmethod
    def group_fp8_quant(input_2d, group_size=128):
        assert group_size == 128, "Group size must be 128"
        case = _match.case_for("fp8_group_quant", {"x": input_2d}, {"group_size": group_size, "transpose_scale": 0})
        variant = "fp8=fnuz" if _match.fnuz_platform() else "default"
        out = _match.reference(case, variant, input_2d.device)
        return out["y"], out["scale"]
