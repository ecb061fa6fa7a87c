"""Stand-in for vllm.models.deepseek_v41.amd.rocm (the seed's ROCm V4.1
layer): combine_topk_swa_indices, rocm_mxfp4_indexer_k_store,
rocm_mxfp4_indexer_q_quant, with the seed's signatures."""

import torch

import _match

ALIGN = 128


def combine_topk_swa_indices(topk_indices, query_start_loc, seq_lens, gather_lens, window_size, compress_ratio,
                             topk, M, N):
    """docs/semantics/indices.md A6.2, the Torch function's rules."""
    for t in (topk_indices, query_start_loc, seq_lens, gather_lens):
        assert isinstance(t, torch.Tensor) and t.dtype == torch.int32, "int32 tensors expected"
    assert topk_indices.dim() == 2 and query_start_loc.dim() == 1, "topk_indices [T, Wk], query_start_loc [R+1]"
    assert seq_lens.shape == gather_lens.shape == (query_start_loc.shape[0] - 1,), "seq_lens, gather_lens [R]"
    for v in (window_size, compress_ratio, topk, M, N):
        assert isinstance(v, int), "window_size, compress_ratio, topk, M, N are ints"
    qsl, seq, gat, tki = (t.long() for t in (query_start_loc, seq_lens, gather_lens, topk_indices))
    T = tki.shape[0]
    P = -(-(topk + window_size) // ALIGN) * ALIGN
    qlen = qsl[1:] - qsl[:-1]
    req = torch.repeat_interleave(torch.arange(seq.shape[0]), qlen)
    pos = seq[req] - qlen[req] + torch.arange(T) - torch.repeat_interleave(qsl[:-1] - qsl[0], qlen)
    width = min(topk, tki.shape[1])
    tk = torch.div(pos + 1, compress_ratio, rounding_mode="floor").clamp(0, width)
    sw = torch.clamp(torch.minimum(pos + 1, torch.full_like(pos, window_size)), min=0)
    out = torch.full((T, P), -1, dtype=torch.int64)
    v = tki[:, :width]
    ok = (torch.arange(width)[None, :] < tk[:, None]) & (v >= 0) & (v < N)
    out[:, :width] = torch.where(ok, v + M * req[:, None], torch.full_like(v, -1))
    rows, cols = torch.nonzero(torch.arange(window_size)[None, :] < sw[:, None], as_tuple=True)
    out[rows, tk[rows] + cols] = M * req[rows] + N + (pos - sw + 1 - (seq - gat)[req])[rows] + cols
    return out.to(torch.int32), (tk + sw).to(torch.int32)


def rocm_mxfp4_indexer_k_store(k_pre, positions, cos_sin_cache, rms_norm_weight, eps, k_cache, slot_mapping,
                               compress_ratio, preshuffle, *, num_heads):
    case = _match.case_for(
        "rocm_mxfp4_indexer_k_store",
        {"k_pre": k_pre, "positions": positions, "cos_sin_cache": cos_sin_cache,
         "rms_norm_weight": rms_norm_weight, "k_cache": k_cache, "kv_slot_mapping": slot_mapping},
        {"rms_norm_eps": eps, "compress_ratio": compress_ratio, "shuffle": int(preshuffle), "num_heads": num_heads})
    # in place, as the kernel writes the cache (aiter's variant B, the seeds' import)
    k_cache.copy_(_match.reference(case, "default", k_cache.device)["k_cache"])


def rocm_mxfp4_indexer_q_quant(positions, q, cos_sin_cache, weights, softmax_scale, head_scale):
    case = _match.case_for(
        "rocm_mxfp4_indexer_q_quant",
        {"positions": positions, "index_q": q, "index_q_cos_sin_cache": cos_sin_cache, "index_weights": weights},
        {"softmax_scale": softmax_scale, "head_scale": head_scale})
    out = _match.reference(case, "default", q.device)
    return (out["q_packed"], out["q_scale"]), out["weights_out"]
