"""Stand-in for aiter.utility.fp4_utils: dynamic_mxfp4_quant, the mode-0
("even") math (docs/semantics/quant.md Q1.3)."""

import _match


def dynamic_mxfp4_quant(x, shuffle=False):
    case = _match.case_for("mxfp4_quant", {"x": x}, {})
    variant = "scale_rule=even,scale_layout=shuffled" if shuffle else "scale_rule=even"
    out = _match.reference(case, variant, x.device)
    return out["x_fp4"], out["scales"]
