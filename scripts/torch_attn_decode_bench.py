#!/usr/bin/env python3
"""torch_attn_decode_bench.py - PyTorch eager rocm_sparse_attn_decode,
written from docs/semantics/kvcache.md A2.1, A4; docs/semantics/attention.md A8.1, A8.2, A8.4 (not copied from
any source): gather the 584-byte records of every listed slot, decode them
(fp8 x 2^(b-127) -> bf16, NaN -> 0), pad the ragged SWA + top-k lists to
[T, L, 512], then scores = q K^T x scale, softmax with the sink in the
denominator only, out = P V, bf16.  Two forms:

  fp32  scores and P.V as fp32 matmuls (TF32 off): the accuracy the
        kernel's tolerance assumes;
  bf16  bf16 tensor-core matmuls (fp32 accumulate, bf16 scores): faster,
        reported with its error, not held to the policy.

Each form is first compared with the default/fnuz goldens of
rocm_sparse_attn_decode in data/ci (h5py; max error in bf16 ulps of the
golden and whether it stays within 1e-2 + 1e-2|e|), then timed with CUDA
events (median of 20) on a synthetic case of the bench's shape
(attn_decode_paged_64tok_H64 in harness/bench.c): 64 decode tokens of 64
requests at position 9000, H 64, window 128, C4 top-k 2048 (2176 keys per
token).  Prints `torch_ms <form> <median ms>`."""
import glob
import os
import sys

import torch

D, NOPE, REC = 512, 448, 584


def gather_keys(cache, slots, fnuz):
    """[E] slots of cache [pages, B, 584] -> [E, 512] bf16 rows, NaN -> 0."""
    pages, B, _ = cache.shape
    flat = cache.reshape(-1)
    page, row = slots // B, slots % B
    base = page * (B * REC)
    rec = base + row * 576  # record at row*576 (docs/semantics/kvcache.md A2.1)
    ar = torch.arange(576, device=cache.device)
    data = flat[rec[:, None] + ar[None, :]]  # [E, 576]
    scl = flat[(base + B * 576 + row * 8)[:, None] + torch.arange(7, device=cache.device)[None, :]]
    f8 = torch.float8_e4m3fnuz if fnuz else torch.float8_e4m3fn
    v = data[:, :NOPE].contiguous().view(f8).float()
    s = torch.exp2(scl.float() - 127.0).repeat_interleave(64, dim=1)  # 2^(b-127) (docs/semantics/kvcache.md A4)
    nope = (v * s).to(torch.bfloat16)
    rope = data[:, NOPE:].contiguous().view(torch.bfloat16)
    k = torch.cat([nope, rope], dim=1)
    return torch.where(torch.isnan(k), torch.zeros_like(k), k)  # NaN in K -> 0 (docs/semantics/attention.md A8.4)


def decode_torch(q, caches, lists, sink, scale, form):
    """lists: [(indices, indptr, fnuz)] per segment, main then extra."""
    T, H, _ = q.shape
    dev = q.device
    parts, masks = [], []
    for cache, (idx, ptr, fnuz) in zip(caches, lists):
        rows = cache.shape[0] * cache.shape[1]
        idx = idx.reshape(-1)[: int(ptr[-1].item())]  # a graph-padded buffer holds more than indptr uses
        cnt = (ptr[1:] - ptr[:-1]).long()
        L = int(cnt.max().item()) if T else 0
        tok = torch.repeat_interleave(torch.arange(T, device=dev), cnt)
        pos = torch.arange(idx.numel(), device=dev) - ptr[:-1].long()[tok]
        v = idx.long()
        ok = (v >= 0) & (v < rows)  # valid iff 0 <= slot < pages*B (docs/semantics/attention.md A8.2)
        K = torch.zeros(T, L, D, dtype=torch.bfloat16, device=dev)
        M = torch.zeros(T, L, dtype=torch.bool, device=dev)
        K[tok[ok], pos[ok]] = gather_keys(cache, v[ok], fnuz)
        M[tok[ok], pos[ok]] = True
        parts.append(K)
        masks.append(M)
    K = torch.cat(parts, dim=1)
    M = torch.cat(masks, dim=1)
    if form == "fp32":
        Kf = K.float()
        s = torch.bmm(q.float(), Kf.transpose(1, 2)) * scale
    else:
        s = torch.bmm(q, K.transpose(1, 2)).float() * scale
    s = s.masked_fill(~M[:, None, :], float("-inf"))
    m = torch.maximum(s.amax(dim=-1), sink[None, :H])
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))  # no key and no sink: out 0
    e = torch.exp(s - m[..., None])
    den = e.sum(-1) + torch.exp(sink[None, :H] - m)
    if form == "fp32":
        o = torch.bmm(e, Kf)
    else:
        o = torch.bmm(e.to(torch.bfloat16), K).float()
    o = torch.where(den[..., None] > 0, o / den.clamp_min(1e-30)[..., None], torch.zeros_like(o))
    return o.to(torch.bfloat16)


def attr(f, name):
    a = f.attrs[name]
    return a.decode() if isinstance(a, bytes) else a


def check_goldens(form, dev):
    import h5py
    import numpy as np

    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "ci")
    n_ok = n = 0
    for path in sorted(glob.glob(os.path.join(root, "*.h5"))):
        with h5py.File(path, "r") as f:
            if attr(f, "op") != "rocm_sparse_attn_decode":
                continue
            fnuz = attr(f, "variant") == "fp8=fnuz"
            p, i = f["params"].attrs, f["inputs"]
            t = lambda k, dt=None: torch.from_numpy(np.array(i[k])).to(dev)
            q = torch.from_numpy(np.array(i["q"]).view(np.int16)).to(dev).view(torch.bfloat16)
            swa_only = int(p["swa_only"]) != 0
            caches = [t("swa_k_cache")] + ([] if swa_only else [t("kv_cache")])
            lists = [(t("swa_ragged_indices"), t("swa_ragged_indptr"), fnuz)]
            if not swa_only:
                lists.append((t("topk_ragged_indices"), t("topk_ragged_indptr"), False))
            out = decode_torch(q, caches, lists, t("attn_sink"), float(p["scale"]), form).float().cpu()
            e = torch.from_numpy(np.array(f["outputs"]["output"]).astype(np.float32))
            err = (out - e).abs()
            ulp = torch.ldexp(torch.ones_like(e), torch.frexp(e.abs().clamp_min(1e-30))[1] - 8)
            ok = bool((err <= 1e-2 + 1e-2 * e.abs()).all())
            print(f"golden {os.path.basename(path)} {form}: max |err| {err.max().item():.3g}, "
                  f"max {(err / ulp).max().item():.2f} ulp_bf16, {'ok' if ok else 'OUT OF 1e-2'}")
            n += 1
            n_ok += ok
    return n_ok == n and n > 0


def synthetic_case(dev, T=64, H=64, prefix=9000, W=128, ratio=4, topk=2048, B=64):
    g = torch.Generator(device="cpu").manual_seed(1)
    S = prefix + 1
    np_, nc = (S + B - 1) // B, S // ratio
    ncp = (nc + B - 1) // B  # C4: 256 / 4 = 64 compressed rows per page

    def cache(pages):
        c = torch.randint(0, 0x7F, (pages, B, REC), dtype=torch.uint8, generator=g)  # finite e4m3 codes
        c |= (torch.rand(pages, B, REC, generator=g) < 0.5).to(torch.uint8) << 7
        c = c.view(pages, B * REC)
        c[:, B * 576:] = torch.randint(118, 124, (pages, B * 8), dtype=torch.uint8, generator=g)
        rope = torch.randn(pages, B, 64, generator=g).to(torch.bfloat16).view(torch.uint8).view(pages, B, 128)
        c = c.view(pages, B * REC)
        for r in range(B):
            c[:, r * 576 + NOPE:r * 576 + 576] = rope[:, r]
        return c.view(pages, B, REC)

    swa, cmp_ = cache(T * np_), cache(T * ncp)
    pos = S - 1
    i0, i1 = [], []
    for t in range(T):
        win = torch.arange(pos - W + 1, pos + 1)
        i0.append(t * np_ * B + win)
        i1.append(t * ncp * B + torch.randperm(nc, generator=g)[:topk])
    ptr0 = torch.arange(T + 1, dtype=torch.int32) * W
    ptr1 = torch.arange(T + 1, dtype=torch.int32) * topk
    q = torch.randn(T, H, D, generator=g).to(torch.bfloat16)
    sink = torch.randn(H, generator=g) * 10
    to = lambda x: x.to(dev)
    return (to(q), [to(swa), to(cmp_)],
            [(to(torch.cat(i0).int()), to(ptr0), False), (to(torch.cat(i1).int()), to(ptr1), False)], to(sink))


def main():
    if not torch.cuda.is_available():
        print("torch_attn_decode_bench: no CUDA device")
        return 77
    dev = "cuda"
    torch.backends.cuda.matmul.allow_tf32 = False
    ok = True
    for form in ("fp32", "bf16"):
        good = check_goldens(form, dev)
        ok = ok and (good or form == "bf16")
    q, caches, lists, sink = synthetic_case(dev)
    scale = 512 ** -0.5
    for form in ("fp32", "bf16"):
        fn = lambda: decode_torch(q, caches, lists, sink, scale, form)
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(20):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b))
        times.sort()
        print(f"torch_ms {form} {times[len(times) // 2]:.4f}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
