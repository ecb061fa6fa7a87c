"""What the stand-ins share: find the case a production call's arguments
belong to (tests/python/standins/README.md)."""

import functools
import os

import numpy as np
import torch

import dsv4check
from dsv4check import dtypes as D


@functools.lru_cache(maxsize=None)
def _suite():
    return dsv4check.Suite(os.environ["DSV4CHECK_STANDIN_SUITE"])


def _storage(t):
    assert isinstance(t, torch.Tensor), f"expected a torch tensor, got {type(t).__name__}"
    arr, own = D._torch_storage(t)
    return arr, own or str(t.dtype).replace("torch.", "")


def _fits(case, name, value):
    if isinstance(value, torch.Tensor):
        want = case.input_dtypes[name] if name in case.inputs else None
        if want is None:
            return False
        arr, kind = _storage(value)
        ref = case.inputs[name]
        return kind == D._TORCH_NAMES[want] and arr.shape == ref.shape and arr.tobytes() == ref.tobytes()
    return case.params[name] == value


def case_for(op, tensors, scalars):
    """The case of op whose inputs are tensors ({input name: torch tensor})
    and whose parameters are scalars ({param name: value}); AssertionError
    naming the first argument that fits no case."""
    cases = _suite().cases(op=op)
    assert cases, f"the stand-in suite has no {op} case"
    args = list(tensors.items()) + list(scalars.items())
    for case in cases:
        if all(_fits(case, n, v) for n, v in args):
            return case
    for name, value in args:  # the first argument no case takes
        if not any(_fits(c, name, value) for c in cases):
            shown = f"{value.dtype} {tuple(value.shape)}" if isinstance(value, torch.Tensor) else repr(value)
            raise AssertionError(f"stand-in {op}: argument '{name}' ({shown}) is no case's {name}")
    raise AssertionError(f"stand-in {op}: the arguments fit no single case")


def reference(case, variant, device):
    """The case's reference outputs for variant as torch tensors (fp8 as
    uint8 codes where this torch has no float8)."""
    out = {}
    for name, arr in case.with_variant(variant).reference().items():
        kind = case.with_variant(variant).output_dtypes[name]
        try:
            out[name] = D.to_torch(arr, kind, device)
        except TypeError:
            out[name] = D.to_torch(arr, kind, device, raw=True)
    return out


def fnuz_platform():
    """The stand-ins play gfx950 (OCP fp8), or gfx942 (e4m3fnuz) with
    $DSV4CHECK_STANDIN_FNUZ=1: the platform picks the production kernels' fp8."""
    return os.environ.get("DSV4CHECK_STANDIN_FNUZ") == "1"
