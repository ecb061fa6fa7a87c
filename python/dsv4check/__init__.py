"""dsv4check from Python: the suites, goldens, generators, reference and
comparator of libdsv4 (include/dsv4check.h) through ctypes, for kernels
written in Python (Triton, torch, HIP extensions).

    import dsv4check
    suite = dsv4check.Suite("cases/ci.yaml")
    for case in suite.cases(op="mxfp8_quant"):
        x = case.inputs_torch("cuda")["x"]
        verdict = case.judge(dict(zip(("data", "scale"), my_mxfp8(x))))
        assert verdict.passed, str(verdict)

`python3 -m dsv4check run SUITE --impl MODULE:NAME` judges a whole suite with
the CLI's reports; `pytest -p dsv4check.pytest_plugin` makes one test per
case.  See README.md, "Checking your kernel from Python".
"""

from ._lib import API_VERSION, Dsv4Error
from .actuals import ActualsWriter
from .core import Case, Mismatch, OutputMetrics, Suite, Verdict, api_version, op_outputs, ops, set_memory_limit, version
from .dtypes import bf16_to_float32, e8m0_to_float32, float32_to_bf16, to_float32, to_torch
from .impl import NotProvided, Provider, load

__all__ = [
    "API_VERSION", "ActualsWriter", "Case", "Dsv4Error", "Mismatch", "NotProvided", "OutputMetrics", "Provider",
    "Suite", "Verdict", "api_version", "bf16_to_float32", "e8m0_to_float32", "float32_to_bf16", "load",
    "op_outputs", "ops", "set_memory_limit", "to_float32", "to_torch", "version",
]
