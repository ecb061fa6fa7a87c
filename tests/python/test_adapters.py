"""The production adapters (python/dsv4check/adapters) against the stand-in
modules of tests/python/standins: every mapped argument lands where the
production signature wants it, the results come back in the production
form, an absent module makes its cases not provided with one line, and a
wrong mapping is caught."""

import os
import re
import sys

import pytest

torch = pytest.importorskip("torch")

from conftest import ROOT, SUITE, run  # noqa: E402

STANDINS = os.path.join(ROOT, "tests", "python", "standins")
ENV = dict(DSV4CHECK_STANDIN_SUITE=os.path.join(ROOT, SUITE), DSV4CHECK_DEVICE="cpu")


def _pytest(tmp_path, filter, standins=True, **extra):
    path = os.pathsep.join(([STANDINS] if standins else []) + [os.path.join(ROOT, "python")])
    return run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "dsv4check.pytest_plugin",
                "--dsv4-suite", os.path.join(ROOT, SUITE), "--dsv4-impl", "dsv4check.adapters:production",
                "--dsv4-filter", filter, "-rs", "-v"], cwd=str(tmp_path), PYTHONPATH=path, **{**ENV, **extra})


def _counts(out):
    return {k: len(re.findall(rf" {k}( |$)", out, re.M)) for k in ("PASSED", "FAILED", "SKIPPED")}


OPS = "combine|idx_kstore|idx_qquant|mxfp8|mxfp4|fp8_group|gemm"


def test_adapters_on_ocp_platform(tmp_path):
    rc, out, err = _pytest(tmp_path, OPS, DSV4CHECK_STANDIN_FNUZ="0")
    n = _counts(out)
    failed = re.findall(r"::(\S+) FAILED", out)
    # the only failures: cases of the e4m3fnuz variants, which an OCP-fp8 kernel cannot pass
    assert all("fnuz" in f for f in failed), out[-4000:] + err
    for name in ("combine_mixed_prefill_c4", "idx_kstore_c4_h64", "idx_qquant_h64", "mxfp8_heads_f32",
                 "mxfp4_shuffled", "fp8_group_special_default", "fp8_group_special_impl_triton"):
        assert re.search(rf"::{re.escape(name)} PASSED", out), name
    assert n["PASSED"] >= 25


def test_adapters_on_fnuz_platform(tmp_path):
    rc, out, err = _pytest(tmp_path, "fp8_group_special_(fp8_fnuz|impl_triton_fp8_fnuz)", DSV4CHECK_STANDIN_FNUZ="1")
    assert rc == 0 and _counts(out)["PASSED"] == 2, out + err


def test_absent_module_is_not_provided(tmp_path):
    rc, out, err = _pytest(tmp_path, "^combine_c128$", standins=False)
    assert rc == 0, out + err
    assert re.search(r"SKIPPED .*not provided: vllm.models.deepseek_v41.amd.rocm is not importable "
                     r"\(ModuleNotFoundError: No module named 'vllm'\)", out), out


def test_wrong_mapping_is_caught(monkeypatch):
    monkeypatch.syspath_prepend(STANDINS)
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    import dsv4check
    from dsv4check import adapters
    case = dsv4check.Suite(SUITE)["idx_qquant_h64"]
    assert case.judge(adapters.rocm_mxfp4_indexer_q_quant(case)).passed
    rocm = __import__("vllm.models.deepseek_v41.amd.rocm", fromlist=["x"])
    x, p = case.inputs_torch("cpu"), case.params
    with pytest.raises(AssertionError, match="argument 'softmax_scale'"):  # the two scales swapped
        rocm.rocm_mxfp4_indexer_q_quant(x["positions"], x["index_q"], x["index_q_cos_sin_cache"],
                                        x["index_weights"], p["head_scale"], p["softmax_scale"])
    with pytest.raises(AssertionError, match="argument 'index_q'"):  # bf16 passed as float32
        rocm.rocm_mxfp4_indexer_q_quant(x["positions"], x["index_q"].float(), x["index_q_cos_sin_cache"],
                                        x["index_weights"], p["softmax_scale"], p["head_scale"])
    combine = dsv4check.Suite(SUITE)["combine_mixed_prefill_c4"]
    t = combine.inputs_torch("cpu")
    with pytest.raises(AssertionError, match="int32 tensors"):
        rocm.combine_topk_swa_indices(t["topk_indices"].long(), t["query_start_loc"], t["seq_lens"],
                                      t["gather_lens"], 128, 4, 512, combine.params["M"], combine.params["N"])


def test_identify_through_adapters():
    path = os.pathsep.join([STANDINS, os.path.join(ROOT, "python")])
    rc, out, err = run([sys.executable, "-m", "dsv4check", "identify", SUITE, "--impl",
                        "dsv4check.adapters:production", "--filter", "combine|mxfp8|mxfp4"], PYTHONPATH=path, **ENV)
    assert rc == 0, err
    assert re.search(r"^mxfp8_quant: 3 case\(s\)", out, re.M) and "  => default\n" in out
    assert re.search(r"^mxfp4_quant: \d+ case\(s\)", out, re.M)
    assert re.search(r"^  scale_rule=even +matches bit for bit", out, re.M)
