"""combine_topk_swa_indices (docs/semantics/indices.md A6.2, the default:
the seeds' Torch rules) as a Triton kernel, one program per token row,
judged through the Python front end:

    python3 -m dsv4check run cases/ci.yaml --impl triton_combine:impl --filter combine

A row's request, position, top-k length tk = clamp((pos + 1) // c, 0,
min(topk, Wk)) and window length sw = clamp(min(pos + 1, W), 0) come from
a few torch ops over the batch; the kernel writes the row: top-k entries
v + r*M where 0 <= v < N (else -1), then the window rows
r*M + N + (pos - sw + 1 - (seq_len - gather_len)) + i, then -1 padding.
"""

import torch
import triton
import triton.language as tl

ALIGN = 128


@triton.jit
def _combine_row(out_ptr, lens_ptr, topk_ptr, topk_stride, req_ptr, tk_ptr, sw_ptr, first_ptr, M, N,
                 P, BLOCK: tl.constexpr):
    t = tl.program_id(0)
    r = tl.load(req_ptr + t).to(tl.int64)
    tk = tl.load(tk_ptr + t)
    sw = tl.load(sw_ptr + t)
    first = tl.load(first_ptr + t)
    j = tl.arange(0, BLOCK)
    in_topk = j < tk
    v = tl.load(topk_ptr + t * topk_stride + j, mask=in_topk, other=-1).to(tl.int64)
    topk_val = tl.where((v >= 0) & (v < N), v + r * M, -1)
    win_val = r * M + N + first + (j - tk)
    val = tl.where(in_topk, topk_val, tl.where(j < tk + sw, win_val, -1))
    tl.store(out_ptr + t * P + j, val.to(tl.int32), mask=j < P)
    tl.store(lens_ptr + t, (tk + sw).to(tl.int32))


def combine_topk_swa_indices(case, device="cuda"):
    p, x = case.params, case.inputs_torch(device)
    topk = x["topk_indices"].contiguous()
    qsl, seq, gat = (x[k].long() for k in ("query_start_loc", "seq_lens", "gather_lens"))
    T, Wk = topk.shape
    W, M, N = p["window_size"], p["M"], p["N"]
    P = -(-(p["topk"] + W) // ALIGN) * ALIGN
    qlen = qsl[1:] - qsl[:-1]
    req = torch.repeat_interleave(torch.arange(seq.shape[0], device=device), qlen)
    pos = seq[req] - qlen[req] + torch.arange(T, device=device) - torch.repeat_interleave(qsl[:-1] - qsl[0], qlen)
    tk = torch.div(pos + 1, p["compress_ratio"], rounding_mode="floor").clamp(0, min(p["topk"], Wk))
    sw = torch.clamp(torch.minimum(pos + 1, torch.full_like(pos, W)), min=0)
    first = pos - sw + 1 - (seq - gat)[req]
    out = torch.empty((T, P), dtype=torch.int32, device=device)
    lens = torch.empty(T, dtype=torch.int32, device=device)
    if T:
        _combine_row[(T,)](out, lens, topk, topk.stride(0), req, tk, sw, first, M, N, P,
                           BLOCK=triton.next_power_of_2(P))
    return {"combined_indices": out, "combined_lens": lens}


impl = {"combine_topk_swa_indices[default]": combine_topk_swa_indices}
