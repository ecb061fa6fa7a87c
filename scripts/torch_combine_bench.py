#!/usr/bin/env python3
"""torch_combine_bench.py - PyTorch eager combine_topk_swa_indices, written
from docs/semantics/indices.md A6.2 (not copied from any source), in two forms:

  per_request  one pass per request with host-side request bounds (.tolist()),
               the structure of the seeds' Torch fallback [S4];
  vectorized   one set of [T, P] tensor ops for all requests.

Both are first checked bit-exactly against every default-variant golden in
data/ci (h5py), then timed with CUDA events on the production case of
harness/bench.c: 4 requests x 2048 tokens after a 30000-token prefix,
window 128, ratio 4, topk 2048.  Prints `torch_ms <form> <median ms>`."""
import glob
import os
import sys

import torch


def width(K, W):
    return (K + W + 127) // 128 * 128  # P, docs/semantics/indices.md A6.2


def combine_per_request(topk, qsl, seq_lens, gather_lens, W, c, K, M, N):
    T, Wk = topk.shape
    P = width(K, W)
    keff = min(K, Wk)  # K_eff = min(K, Wk) [S4]
    out = torch.full((T, P), -1, dtype=torch.int32, device=topk.device)
    lens = torch.zeros(T, dtype=torch.int32, device=topk.device)
    q = qsl.tolist()
    S_all, G_all = seq_lens.tolist(), gather_lens.tolist()
    j = torch.arange(P, device=topk.device)
    for r in range(len(S_all)):
        qs, qe = q[r] - q[0], q[r + 1] - q[0]
        if qe == qs:
            continue
        L, S, g0 = qe - qs, S_all[r], S_all[r] - G_all[r]
        pos = torch.arange(S - L, S, device=topk.device, dtype=torch.int64)
        tk = torch.div(pos + 1, c, rounding_mode="floor").clamp(max=keff).clamp_min(0)
        sw = (pos + 1).clamp(max=W).clamp_min(0)
        v = topk[qs:qe, :keff].to(torch.int64)
        ok = (v >= 0) & (v < N) & (j[:keff][None, :] < tk[:, None])
        rows = out[qs:qe].to(torch.int64)
        rows[:, :keff] = torch.where(ok, r * M + v, torch.full_like(v, -1))
        i = j[None, :] - tk[:, None]
        win = (i >= 0) & (i < sw[:, None])
        rows = torch.where(win, r * M + N + (pos - sw + 1)[:, None] + i - g0, rows)
        out[qs:qe] = rows.to(torch.int32)
        lens[qs:qe] = (tk + sw).to(torch.int32)
    return out, lens


def combine_vectorized(topk, qsl, seq_lens, gather_lens, W, c, K, M, N):
    T, Wk = topk.shape
    P = width(K, W)
    keff = min(K, Wk)
    dev = topk.device
    q = (qsl - qsl[0]).to(torch.int64)
    qlen = q[1:] - q[:-1]
    req = torch.repeat_interleave(torch.arange(qlen.numel(), device=dev), qlen, output_size=T)
    t = torch.arange(T, device=dev)
    S = seq_lens.to(torch.int64)[req]
    pos = S - qlen[req] + (t - q[:-1][req])
    g0 = (seq_lens.to(torch.int64) - gather_lens.to(torch.int64))[req]
    tk = torch.div(pos + 1, c, rounding_mode="floor").clamp(max=keff).clamp_min(0)
    sw = (pos + 1).clamp(max=W).clamp_min(0)
    rM = (req * M)[:, None]
    j = torch.arange(P, device=dev)[None, :]
    v = torch.nn.functional.pad(topk[:, :keff].to(torch.int64), (0, P - keff), value=-1)
    top = torch.where((v >= 0) & (v < N) & (j < tk[:, None]), rM + v, -1)
    i = j - tk[:, None]
    win = (i >= 0) & (i < sw[:, None])
    out = torch.where(win, rM + N + (pos - sw + 1)[:, None] + i - g0[:, None], top)
    return out.to(torch.int32), (tk + sw).to(torch.int32)


FORMS = {"per_request": combine_per_request, "vectorized": combine_vectorized}


def attr(f, name):
    v = f.attrs[name]  # the C writer stores fixed-length strings: bytes in h5py
    return v.decode() if isinstance(v, bytes) else v


def check_goldens(dev):
    import h5py

    here = os.path.dirname(os.path.abspath(__file__))
    files = sorted(glob.glob(os.path.join(here, "..", "data", "ci", "combine_*.h5")))
    n = 0
    for path in files:
        with h5py.File(path, "r") as f:
            if attr(f, "op") != "combine_topk_swa_indices" or attr(f, "variant") != "default":
                continue
            p = {k: int(f["params"].attrs[k]) for k in ("window_size", "compress_ratio", "topk", "M", "N")}
            ins = {k: torch.from_numpy(f["inputs"][k][()]).to(dev) for k in
                   ("topk_indices", "query_start_loc", "seq_lens", "gather_lens")}
            want_rows = torch.from_numpy(f["outputs"]["combined_indices"][()]).to(dev)
            want_lens = torch.from_numpy(f["outputs"]["combined_lens"][()]).to(dev)
        for name, fn in FORMS.items():
            rows, lens = fn(ins["topk_indices"], ins["query_start_loc"], ins["seq_lens"], ins["gather_lens"],
                            p["window_size"], p["compress_ratio"], p["topk"], p["M"], p["N"])
            if not torch.equal(rows, want_rows) or not torch.equal(lens, want_lens):
                sys.exit(f"{name}: differs from golden {os.path.basename(path)}")
        n += 1
    print(f"torch forms bit-exact against {n} default-variant goldens in data/ci")


def production(dev):
    R, L, prefix, W, c, K = 4, 2048, 30000, 128, 4, 2048
    T = R * L
    N = (prefix + L + c - 1) // c  # ceil(max_model_len / c)
    M = N + W + T  # docs/semantics/indices.md A6.1
    g = torch.Generator(device="cpu").manual_seed(1)
    topk = torch.randint(0, (prefix + 1) // c, (T, K), generator=g, dtype=torch.int32).to(dev)
    qsl = torch.arange(0, T + 1, L, dtype=torch.int32, device=dev)
    seq = torch.full((R,), prefix + L, dtype=torch.int32, device=dev)
    gat = torch.full((R,), L + min(prefix, W - 1), dtype=torch.int32, device=dev)  # docs/semantics/indices.md A5.3
    return (topk, qsl, seq, gat, W, c, K, M, N)


def median_ms(fn, args, warmup=3, iters=20):
    for _ in range(warmup):
        fn(*args)
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn(*args)
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2]


def main():
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name() if dev == 'cuda' else 'cpu'}")
    check_goldens(dev)
    if dev != "cuda":
        print("no GPU: timing skipped")
        return
    args = production(dev)
    a = combine_per_request(*args)
    b = combine_vectorized(*args)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]), "forms disagree on the production case"
    nbytes = sum(x.numel() * x.element_size() for x in args[:4]) + a[0].numel() * 4 + a[1].numel() * 4
    for name, fn in FORMS.items():
        ms = median_ms(fn, args)
        print(f"torch_ms {name} {ms:.4f}  ({nbytes / ms / 1e6:.1f} GB/s of {nbytes} useful bytes)")


if __name__ == "__main__":
    main()
