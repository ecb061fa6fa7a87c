"""Adapters: each op's tensors mapped onto the production call that computes
it in vLLM or aiter, so a production kernel is judged as it is shipped:

    python3 -m dsv4check run cases/ci.yaml --impl dsv4check.adapters:production
    pytest -p dsv4check.pytest_plugin --dsv4-suite cases/ci.yaml --dsv4-impl dsv4check.adapters:production

The production modules are imported when a case needs them; a module that
is not importable makes its cases "not provided", with one line saying
which.  Tensors go to $DSV4CHECK_DEVICE (default: cuda when torch sees a
GPU, else cpu).  The calls and where each is described:

| op [variants] | production call | docs/semantics |
|---|---|---|
| combine_topk_swa_indices [default] | vllm.models.deepseek_v41.amd.rocm.combine_topk_swa_indices | indices.md A6 |
| rocm_mxfp4_indexer_k_store [default] | vllm.models.deepseek_v41.amd.rocm (or vllm.v1.attention.ops.rocm_paged_mxfp4_indexer).rocm_mxfp4_indexer_k_store | indexer.md Q4.1 |
| rocm_mxfp4_indexer_q_quant [default] | the same modules' rocm_mxfp4_indexer_q_quant | indexer.md Q4.2 |
| mxfp8_quant [default] | vllm.model_executor.layers.quantization.utils.mxfp8_utils.mxfp8_e4m3_quantize | quant.md Q2 |
| mxfp4_quant [scale_rule=even, ...,scale_layout=shuffled] | aiter.utility.fp4_utils.dynamic_mxfp4_quant | quant.md Q1.3 |
| fp8_group_quant [default, fp8=fnuz] | vllm._aiter_ops.rocm_aiter_ops.group_fp8_quant | quant.md Q3.1 |
| fp8_group_quant [impl=triton, impl=triton,fp8=fnuz] | vllm...quantization.utils.fp8_utils.per_token_group_quant_fp8 | quant.md Q3.2 |
| gemm_a8w8_blockscale [default, fp8=fnuz, bpreshuffle] | aiter.ops.gemm_op_a8w8.gemm_a8w8_blockscale | gemm.md Q7 |

The seeds' apply_pre_quantized_block_scaled_mm(linear, x_fp8, x_scale)
drives the same block-scaled GEMM through a vLLM linear layer's weights; a
case carries no layer, so gemm_a8w8_blockscale is judged through aiter's
call, which that kernel path ends in.  Which variant a production call
computes is what `python3 -m dsv4check identify --impl
dsv4check.adapters:production` tells.
"""

import importlib
import os

from ..impl import NotProvided

SEED_ROCM = "vllm.models.deepseek_v41.amd.rocm"
INDEXER_OPS = "vllm.v1.attention.ops.rocm_paged_mxfp4_indexer"


def _function(modules, name):
    """The first of modules that imports and has name; NotProvided naming
    every module tried when none does."""
    why = []
    for m in modules:
        try:
            fn = getattr(importlib.import_module(m), name, None)
        except Exception as e:  # a broken or absent production install
            why.append(f"{m} is not importable ({type(e).__name__}: {e})")
            continue
        if callable(fn):
            return fn
        why.append(f"{m} has no {name}")
    raise NotProvided("; ".join(why))


def device():
    env = os.environ.get("DSV4CHECK_DEVICE")
    if env:
        return env
    import torch
    return "cuda" if torch.cuda.is_available() else "cpu"


def _inputs(case):
    try:
        import torch  # noqa: F401
    except ImportError as e:
        raise NotProvided(f"torch is not importable ({e})") from e
    try:
        return case.inputs_torch(device())
    except TypeError as e:  # an fp8 input this torch has no dtype for
        raise NotProvided(str(e)) from e


def _this_platform(case, outputs):
    """outputs, unless the production kernel made another fp8 than the case
    is for (an e4m3fn kernel on a case of the gfx942 e4m3fnuz variant): then
    the case is not provided here."""
    for name, t in outputs.items():
        kind = str(getattr(t, "dtype", "")).replace("torch.", "")
        want = case.output_dtypes.get(name, "")
        if kind.startswith("float8_e4m3") and want.startswith("float8_e4m3") and kind != want:
            raise NotProvided(f"this platform's kernel writes {name} as {kind}; the case is for {want}")
    return outputs


def combine_topk_swa_indices(case):
    fn = _function([SEED_ROCM, "vllm.models.deepseek_v4_1.amd.rocm"], "combine_topk_swa_indices")
    x, p = _inputs(case), case.params
    combined, lens = fn(x["topk_indices"], x["query_start_loc"], x["seq_lens"], x["gather_lens"],
                        p["window_size"], p["compress_ratio"], p["topk"], p["M"], p["N"])
    return {"combined_indices": combined, "combined_lens": lens}


def rocm_mxfp4_indexer_k_store(case):
    fn = _function([SEED_ROCM, INDEXER_OPS], "rocm_mxfp4_indexer_k_store")
    x, p = _inputs(case), case.params
    cache = x["k_cache"].clone()  # written in place: untouched entries keep their bytes
    fn(x["k_pre"], x["positions"], x["cos_sin_cache"], x["rms_norm_weight"], p["rms_norm_eps"], cache,
       x["kv_slot_mapping"], p["compress_ratio"], bool(p["shuffle"]), num_heads=p["num_heads"])
    return {"k_cache": cache}


def rocm_mxfp4_indexer_q_quant(case):
    fn = _function([SEED_ROCM, INDEXER_OPS], "rocm_mxfp4_indexer_q_quant")
    x, p = _inputs(case), case.params
    (q_packed, q_scale), weights = fn(x["positions"], x["index_q"], x["index_q_cos_sin_cache"],
                                      x["index_weights"], p["softmax_scale"], p["head_scale"])
    return {"q_packed": q_packed, "q_scale": q_scale, "weights_out": weights}


def mxfp8_quant(case):
    fn = _function(["vllm.model_executor.layers.quantization.utils.mxfp8_utils"], "mxfp8_e4m3_quantize")
    data, scale = fn(_inputs(case)["x"], is_sf_swizzled_layout=False)
    return {"data": data, "scale": scale}


def mxfp4_quant(case):
    fn = _function(["aiter.utility.fp4_utils"], "dynamic_mxfp4_quant")
    shuffled = case.variant.endswith("scale_layout=shuffled")
    x_fp4, scales = fn(_inputs(case)["x"], shuffle=shuffled)
    return {"x_fp4": x_fp4, "scales": scales}


def fp8_group_quant(case):
    p = case.params
    x = _inputs(case)["x"]
    if case.variant.startswith("impl=triton"):
        fn = _function(["vllm.model_executor.layers.quantization.utils.fp8_utils"], "per_token_group_quant_fp8")
        y, scale = fn(x, p["group_size"], column_major_scales=bool(p["transpose_scale"]))
        # column-major [M, K/128] is the [K/128, M] row-major block the op stores
        return _this_platform(case, {"y": y, "scale": scale.t() if p["transpose_scale"] else scale})
    if p["transpose_scale"]:
        raise NotProvided("rocm_aiter_ops.group_fp8_quant has no transpose_scale argument")
    ops = _function(["vllm._aiter_ops"], "rocm_aiter_ops")
    y, scale = ops.group_fp8_quant(x, p["group_size"])
    return _this_platform(case, {"y": y, "scale": scale})


def gemm_a8w8_blockscale(case):
    fn = _function(["aiter.ops.gemm_op_a8w8", "aiter"], "gemm_a8w8_blockscale")
    import torch
    x = _inputs(case)
    pre = case.variant == "bpreshuffle"
    # bpreshuffle stores x_scale as [K/128, M]: the [M, K/128] view the kernel indexes (inferred)
    x_scale = x["x_scale"].t() if pre else x["x_scale"]
    y = fn(x["XQ"], x["WQ"], x_scale, x["w_scale"], torch.bfloat16, isBpreshuffled=pre)
    return {"Y": y}


production = {
    "combine_topk_swa_indices[default]": combine_topk_swa_indices,
    "rocm_mxfp4_indexer_k_store[default]": rocm_mxfp4_indexer_k_store,
    "rocm_mxfp4_indexer_q_quant[default]": rocm_mxfp4_indexer_q_quant,
    "mxfp8_quant[default]": mxfp8_quant,
    "mxfp4_quant[scale_rule=even]": mxfp4_quant,
    "mxfp4_quant[scale_rule=even,scale_layout=shuffled]": mxfp4_quant,
    "fp8_group_quant": fp8_group_quant,
    "gemm_a8w8_blockscale": gemm_a8w8_blockscale,
}
