#!/usr/bin/python3
"""Write a dsv4check golden (schema 1) for combine_topk_swa_indices with h5py.

This is the worked example of data/README.md: numpy + h5py only, no torch.
The expected outputs are computed here in numpy following the seed Torch
function (vllm deepseek_v41 combine_topk_swa_indices).

    python3 tests/h5py_write_golden.py OUT.h5 [--corrupt]
    build/dsv4check check OUT.h5 --impl ref

--corrupt writes one wrong expected element (combined_indices[1, 0] += 1),
so that `check` must report a failure.
"""
import sys

import h5py
import numpy as np

ALIGN = 128  # _SPARSE_PREFILL_TOPK_ALIGNMENT


def combine_topk_swa_indices(topk_indices, query_start_loc, seq_lens, gather_lens,
                             window_size, compress_ratio, topk, M, N):
    """numpy restatement of the seed Torch function."""
    T, width = topk_indices.shape
    P = (topk + window_size + ALIGN - 1) // ALIGN * ALIGN
    combined = np.full((T, P), -1, dtype=np.int64)
    lens = np.zeros(T, dtype=np.int64)
    logical = min(topk, width)
    base = int(query_start_loc[0])  # query_start_loc may start above 0
    for r in range(len(seq_lens)):
        qs = int(query_start_loc[r]) - base
        qe = int(query_start_loc[r + 1]) - base
        L = qe - qs
        for t in range(qs, qe):
            pos = int(seq_lens[r]) - L + (t - qs)
            tk = max(0, min((pos + 1) // compress_ratio, logical))
            for j in range(logical):
                v = int(topk_indices[t, j])
                if j < tk and 0 <= v < N:
                    combined[t, j] = r * M + v
            sw = max(0, min(pos + 1, window_size))
            gather_start = int(seq_lens[r]) - int(gather_lens[r])
            for i in range(sw):  # written after, as index_copy_ is
                combined[t, tk + i] = r * M + N + (pos - sw + 1 + i) - gather_start
            lens[t] = tk + sw
    return combined.astype(np.int32), lens.astype(np.int32)


def add(group, name, array, dtype_name):
    """One tensor: chunked, Fletcher32, gzip; attribute dtype = logical dtype."""
    d = group.create_dataset(name, data=array, fletcher32=True, compression="gzip",
                             chunks=True)
    d.attrs["dtype"] = dtype_name
    return d


def main(argv):
    if len(argv) < 2 or argv[1].startswith("-"):
        sys.stderr.write("usage: h5py_write_golden.py OUT.h5 [--corrupt]\n")
        return 2
    path, corrupt = argv[1], "--corrupt" in argv[2:]

    rng = np.random.default_rng(20261201)
    window_size, compress_ratio, topk, M, N = 4, 2, 8, 64, 32
    query_start_loc = np.array([5, 8, 10, 14], dtype=np.int32)  # non-zero base
    seq_lens = np.array([10, 6, 5], dtype=np.int32)
    gather_lens = np.array([10, 4, 5], dtype=np.int32)
    T = int(query_start_loc[-1] - query_start_loc[0])
    # Wider than topk, with some invalid entries (-1 and >= N).
    topk_indices = rng.integers(-2, N + 3, size=(T, 10)).astype(np.int32)

    combined, lens = combine_topk_swa_indices(topk_indices, query_start_loc, seq_lens,
                                              gather_lens, window_size, compress_ratio,
                                              topk, M, N)
    if corrupt:
        combined[1, 0] += 1

    # libver v108: checksummed 1.8 object headers, readable by HDF5 >= 1.8.
    with h5py.File(path, "w", libver=("v108", "v108")) as f:
        f.attrs["dsv4check_schema"] = np.int64(1)
        f.attrs["op"] = "combine_topk_swa_indices"
        f.attrs["variant"] = "default"
        f.attrs["case"] = "h5py/small" + ("_corrupt" if corrupt else "")
        f.attrs["seed"] = np.int64(20261201)
        f.attrs["generator"] = "tests/h5py_write_golden.py (h5py %s)" % h5py.__version__
        f.attrs["created"] = "2026-12-01T00:00:00Z"
        params = f.create_group("params")
        for name, value in (("window_size", window_size), ("compress_ratio", compress_ratio),
                            ("topk", topk), ("M", M), ("N", N)):
            params.attrs[name] = np.int64(value)
        inputs = f.create_group("inputs")
        add(inputs, "topk_indices", topk_indices, "int32")
        add(inputs, "query_start_loc", query_start_loc, "int32")
        add(inputs, "seq_lens", seq_lens, "int32")
        add(inputs, "gather_lens", gather_lens, "int32")
        outputs = f.create_group("outputs")
        add(outputs, "combined_indices", combined, "int32")
        add(outputs, "combined_lens", lens, "int32")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
