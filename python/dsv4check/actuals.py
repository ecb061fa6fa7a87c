"""Actuals files: what `dsv4check run/check --actual FILE` judges.

One HDF5 group per case name, one dataset per output holding the kernel's
result in the op's declared dtype, stored as goldens store tensors
(data/README.md: bf16 as uint16 bits, fp8 as uint8 codes, a `dtype`
attribute, chunked with Fletcher32).  Written with h5py when it is
importable, else through libdsv4 (dsv4check_actuals_*); the writer is
chosen by $DSV4CHECK_ACTUALS_WRITER (h5py or c) when set.  Either way the
file appears at its path only when complete.
"""

import ctypes
import os

import numpy as np

from . import _lib as L
from . import dtypes as D

CHUNK_TARGET = 64 << 10  # bytes per chunk, as the C writer


def _chunks(shape, itemsize):
    """Whole trailing dims while they fit in CHUNK_TARGET, then as many rows
    of the next dim as fit (harness/golden.c's rule)."""
    chunk = [1] * len(shape)
    inner = itemsize
    d = len(shape) - 1
    while d >= 0 and inner * shape[d] <= CHUNK_TARGET:
        chunk[d] = shape[d]
        inner *= shape[d]
        d -= 1
    if d >= 0:
        chunk[d] = max(1, min(shape[d], CHUNK_TARGET // inner))
    return tuple(chunk)


def _want_h5py():
    choice = os.environ.get("DSV4CHECK_ACTUALS_WRITER", "")
    if choice == "c":
        return False
    try:
        import h5py  # noqa: F401
    except ImportError:
        if choice == "h5py":
            raise
        return False
    return True


class _H5pyWriter:
    def __init__(self, path, tmp):
        import h5py
        self.f = h5py.File(tmp, "w", libver=("v108", "v108"))
        self.f.attrs["dsv4check_actuals"] = np.int64(1)

    def add(self, case_name, op, variant, tensors):
        g = self.f.create_group(case_name)
        g.attrs["op"] = op
        g.attrs["variant"] = variant
        for name, kind, arr in tensors:
            if arr.ndim == 0 or arr.size == 0:
                d = g.create_dataset(name, data=arr) if arr.ndim == 0 else \
                    g.create_dataset(name, shape=arr.shape, dtype=arr.dtype)
            else:
                # chunked with Fletcher32 as the reader wants; not compressed:
                # the file lives for one run, and deflate would cost more than the judging
                d = g.create_dataset(name, data=arr, chunks=_chunks(arr.shape, arr.itemsize), fletcher32=True)
            d.attrs["dtype"] = kind
            if kind == "float4_e2m1fn_x2":
                d.attrs["packing"] = "low_nibble_first"

    def commit(self):
        self.f.close()

    def discard(self):
        self.f.close()


class _CWriter:
    def __init__(self, path):
        w = ctypes.c_void_p()
        L.call(L.lib().dsv4check_actuals_open, L.enc(path), ctypes.byref(w))
        self.w = w

    def add(self, case_name, op, variant, tensors):
        keep, ts = [], (L.Tensor * max(1, len(tensors)))()
        for k, (name, kind, arr) in enumerate(tensors):
            shape = (ctypes.c_int64 * max(1, arr.ndim))(*arr.shape)
            nm = L.enc(name)
            keep += [shape, nm, arr]
            ts[k] = L.Tensor(nm, D.CODE.get(kind, -1), -1, arr.ndim, shape, arr.ctypes.data, arr.nbytes)
        L.call(L.lib().dsv4check_actuals_add, self.w, L.enc(case_name), L.enc(op), L.enc(variant), ts,
               len(tensors))

    def commit(self):
        w, self.w = self.w, None
        L.call(L.lib().dsv4check_actuals_commit, w)

    def discard(self):
        if self.w:
            L.lib().dsv4check_actuals_free(self.w)
            self.w = None


class ActualsWriter:
    """with ActualsWriter(path) as w: w.add(case, outputs) ... (committed on a
    clean exit, discarded on an exception)."""

    def __init__(self, path, writer=None):
        self.path = str(path)
        self.names = set()
        use_h5py = _want_h5py() if writer is None else writer == "h5py"
        self.kind = "h5py" if use_h5py else "c"
        if use_h5py:
            d, b = os.path.split(self.path)
            self.tmp = os.path.join(d, f".{b}.tmp.{os.getpid()}")
            self.w = _H5pyWriter(self.path, self.tmp)
        else:
            self.tmp = None
            self.w = _CWriter(self.path)

    def add(self, case, outputs):
        """Adds a case's outputs ({name: value} as the implementation returned
        them), each stored in the op's declared dtype where it fits."""
        if case.name in self.names:
            raise ValueError(f"case '{case.name}' added twice")
        if "/" in case.name or case.name in ("", "."):
            raise ValueError(f"case name '{case.name}' cannot name an HDF5 group")
        tensors = []
        for name, value in outputs.items():
            kind, arr = D.as_output(value, case.output_dtypes.get(name, ""))
            if kind not in D.CODE:
                raise TypeError(f"case {case.name}: output '{name}' has dtype {kind}, which an actuals file "
                                f"cannot store; the op produces {case.output_dtypes.get(name, '?')}")
            tensors.append((name, kind, np.ascontiguousarray(arr)))
        self.w.add(case.name, case.op, case.variant, tensors)
        self.names.add(case.name)

    def commit(self):
        self.w.commit()
        if self.tmp:
            os.replace(self.tmp, self.path)

    def discard(self):
        self.w.discard()
        if self.tmp and os.path.exists(self.tmp):
            os.unlink(self.tmp)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.commit()
        else:
            self.discard()
        return False
