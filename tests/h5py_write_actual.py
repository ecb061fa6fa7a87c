#!/usr/bin/env python3
"""h5py_write_actual.py - writes an actuals file with h5py exactly as the
recipe in data/README.md ("Actuals files") does, from the expected outputs
of golden files (a stand-in for a kernel run from Python: exact outputs as
they are, float outputs rounded from the golden's ideal into the kernel's
dtype).  tests/test_actual.c runs it and checks the file with
`dsv4check check GOLDEN... --actual OUT`.

usage: h5py_write_actual.py OUT.h5 GOLDEN.h5... [--f32] [--bump CASE/OUTPUT] [--drop CASE]
  --f32               bfloat16 outputs as float32 data holding bfloat16 values
  --bump CASE/OUTPUT  add 1 to the first element of that output (a planted bug)
  --drop CASE         leave that case out
Exit 77 when h5py or numpy is missing."""
import sys

try:
    import h5py
    import numpy as np
except ImportError:
    sys.exit(77)


def bf16_bits(x):
    """bfloat16 bits of float32 values, rounded to nearest even (finite values)."""
    u = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def text(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def kernel_output(ds):
    """(array, dtype name) of one golden output as the kernel produces it."""
    data = ds[()]
    dtype = text(ds.attrs["dtype"])
    kernel = text(ds.attrs.get("output_dtype", dtype))
    if kernel == dtype:
        return data, dtype
    if kernel == "bfloat16":
        return bf16_bits(np.asarray(data, dtype=np.float32)), "bfloat16"
    if kernel == "float32":
        return np.asarray(data, dtype=np.float32), "float32"
    raise SystemExit("no rounding for kernel dtype %s" % kernel)


def main(argv):
    out, goldens, f32, bump, drop = argv[0], [], False, None, set()
    k = 1
    while k < len(argv):
        if argv[k] == "--f32":
            f32 = True
        elif argv[k] == "--bump":
            k += 1
            bump = tuple(argv[k].split("/", 1))
        elif argv[k] == "--drop":
            k += 1
            drop.add(argv[k])
        else:
            goldens.append(argv[k])
        k += 1
    # The recipe of data/README.md, from here on.
    with h5py.File(out, "w") as f:
        f.attrs["dsv4check_actuals"] = 1
        for path in goldens:
            with h5py.File(path, "r") as g:
                case = text(g.attrs["case"])
                if case in drop:
                    continue
                grp = f.create_group(case)
                grp.attrs["op"] = text(g.attrs["op"])
                grp.attrs["variant"] = text(g.attrs["variant"])
                for name, ds in g["outputs"].items():
                    data, dtype = kernel_output(ds)
                    if f32 and dtype == "bfloat16":
                        data = (data.astype(np.uint32) << 16).view(np.float32)
                        dtype = "float32"
                    if bump == (case, name):
                        data = data.copy()
                        data.flat[0] += 1
                    d = grp.create_dataset(name, data=data, fletcher32=data.ndim > 0 and data.size > 0)
                    d.attrs["dtype"] = dtype
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
