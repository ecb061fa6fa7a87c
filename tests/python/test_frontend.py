"""The Python package against the CLI: suites and cases, inputs and their
dtypes, torch tensors, judging (verdicts, metrics, report text identical to
the CLI's for the C example plug-in with the same planted bug), bad
outputs, and both actuals writers."""

import os

import h5py
import numpy as np
import pytest

import dsv4check
import impls
from conftest import SUITE, case_blocks, exe, plugin, run
from dsv4check import dtypes as D


@pytest.fixture(scope="module")
def suite():
    return dsv4check.Suite(SUITE)


def test_version():
    assert dsv4check.api_version() == dsv4check.API_VERSION
    assert dsv4check.version()


def test_suite_matches_cli_list(suite):
    rc, out, _ = run([exe(), "list", SUITE])
    assert rc == 0
    assert f"(suite ci): {len(suite)} cases" in out
    assert [c.name for c in suite] == [line.split()[0] for line in out.splitlines()[1:]]
    rc, out, _ = run([exe(), "list", SUITE, "--shard", "2/3", "--filter", "combine|mxfp8"])
    assert [c.name for c in suite.cases(filter="combine|mxfp8", shard="2/3")] == \
        [line.split()[0] for line in out.splitlines()[1:]]
    assert {c.op for c in suite.cases(op="mxfp8_quant")} == {"mxfp8_quant"}
    assert {c.variant for c in suite.cases(op="mxfp8_quant", variant="log2=exact")} == {"log2=exact"}
    with pytest.raises(dsv4check.Dsv4Error, match="--filter '\\('"):
        suite.cases(filter="(")


def test_case_fields(suite):
    c = suite["combine_mixed_prefill_c4"]
    assert (c.op, c.variant, c.origin) == ("combine_topk_swa_indices", "default", "cases/ci/indices.yaml:16:5")
    assert c.params["query_lens"] == [1, 1, 37, 300] and c.params["compress_ratio"] == 4
    assert c.params["invalid_frac"] == 0.0  # defaults are filled in
    assert "prefill" in c.tags and c.golden.endswith("data/ci/combine_mixed_prefill_c4.h5")
    assert list(c.output_dtypes.items()) == [("combined_indices", "int32"), ("combined_lens", "int32")]
    with pytest.raises(KeyError):
        suite["no_such_case"]


def test_inputs_and_dtypes(suite):
    c = suite["mxfp8_special_bf16_default"]
    x = c.inputs["x"]
    assert x.dtype == np.uint16 and c.dtype("x") == "bfloat16"
    np.testing.assert_array_equal(c.float32("x").view(np.uint32) >> 16, x)
    np.testing.assert_array_equal(c.golden_inputs()["x"], x)  # the generator makes the golden's inputs
    g = suite["gemm_bpre_m16_k512"]
    assert g.dtype("XQ") == "float8_e4m3fn" and g.inputs["XQ"].dtype == np.uint8
    codes = np.arange(256, dtype=np.uint8)
    vals = D.to_float32(codes, "float8_e4m3fn")
    assert vals[0x7E] == 448 and vals[0x08] == 2.0 ** -6 and vals[0x01] == 2.0 ** -9 and np.isnan(vals[0x7F])
    assert D.to_float32(codes, "float8_e4m3fnuz")[0x7F] == 240
    assert D.to_float32(np.array([127, 0, 255], np.uint8), "float8_e8m0fnu")[0] == 1.0
    assert list(D.to_float32(np.array([[0x21]], np.uint8), "float4_e2m1fn_x2")[0]) == [0.5, 1.0]
    bits = D.float32_to_bf16(np.array([1.0, 1.00390625, 1.01171875, -2.5], np.float32))
    assert list(bits) == [0x3F80, 0x3F80, 0x3F82, 0xC020]  # ties to even


def test_inputs_torch(suite):
    torch = pytest.importorskip("torch")
    t = suite["mxfp8_special_bf16_default"].inputs_torch("cpu")
    assert t["x"].dtype == torch.bfloat16
    np.testing.assert_array_equal(t["x"].float().numpy(), suite["mxfp8_special_bf16_default"].float32("x"))
    g = suite["gemm_bpre_m16_k512"]
    if hasattr(torch, "float8_e4m3fn"):
        assert g.inputs_torch()["XQ"].dtype == torch.float8_e4m3fn
    else:
        with pytest.raises(TypeError, match="has no torch.float8_e4m3fn"):
            g.inputs_torch()
    assert g.inputs_torch(raw=True)["XQ"].dtype == torch.uint8


@pytest.mark.parametrize("impl", ["numpy_impl", "torch_impl"])
def test_implementations_pass(suite, impl):
    if impl == "torch_impl":
        pytest.importorskip("torch")
    provider = dsv4check.Provider(getattr(impls, impl), impl)
    judged = 0
    for c in suite.cases(filter="combine|mxfp8"):
        fn = provider.lookup(c.op, c.variant)
        if fn:
            v = c.judge(fn(c))
            assert v.passed, str(v)
            judged += 1
    assert judged >= 18


def test_planted_bug_report_equals_c_plugin(suite):
    """The numpy combine with the example plug-in's planted bug, judged from
    Python, prints what `dsv4check run --impl libexample_wrong.so` prints,
    case by case (timings aside)."""
    wrong = plugin("libexample_wrong.so")
    rc, out, err = run([exe(), "run", SUITE, "--filter", "combine", "--impl", wrong])
    assert rc == 1, err
    cli = case_blocks(out)
    compared = 0
    for c in suite.cases(filter="combine", variant="default"):
        v = c.judge(impls.combine_numpy(c, plant_bug=True), impl=wrong, argv0=exe())
        assert case_blocks(v.report)[c.name] == cli[c.name]
        compared += 1
    assert compared == 15
    v = suite["combine_mixed_prefill_c4"].judge(impls.combine_numpy(suite["combine_mixed_prefill_c4"], True))
    m = v.outputs["combined_indices"]
    assert not v.passed and v.status == 1 and v.word == "FAIL" and not m.passed
    assert (m.kind, m.mismatches, m.first.index) == ("exact", 1, "[1, 2]")
    assert m.first.actual == m.first.expected + 1 and "window part" in m.first.where
    assert v.outputs["combined_lens"].passed and str(v) == v.report


def test_outputs_as_tuple_and_torch(suite):
    torch = pytest.importorskip("torch")
    c = suite["combine_decode_only_c4"]
    assert c.judge(impls.combine_torch(c)).passed  # a tuple of torch tensors, declared order
    with pytest.raises(ValueError, match="has 2 outputs"):
        c.judge((torch.zeros(1),))


def test_bad_outputs(suite):
    c = suite["combine_decode_only_c4"]
    ref = c.reference()
    v = c.judge({"combined_indices": ref["combined_indices"].astype(np.int64),
                 "combined_lens": ref["combined_lens"]})
    assert v.status == 2 and v.word == "BAD-INPUT"
    assert "output 'combined_indices' is int64, the op produces int32" in v.error
    v = c.judge({"combined_indices": ref["combined_indices"]})
    assert "output 'combined_lens' was not given" in v.error
    v = c.judge({**ref, "extra": ref["combined_lens"]})
    assert "'extra' is not an output of combine_topk_swa_indices" in v.error
    v = c.judge({"combined_indices": ref["combined_indices"].reshape(-1), "combined_lens": ref["combined_lens"]})
    assert "output 'combined_indices' has shape [" in v.error


def test_float32_for_bf16_only_when_exact(suite):
    c = suite["inv_rope_rows_all"]
    ref = c.reference()
    name = next(n for n, k in c.output_dtypes.items() if k == "bfloat16")
    as_f32 = {k: (D.bf16_to_float32(v) if k == name else v) for k, v in ref.items()}
    assert c.judge(as_f32).passed
    inexact = dict(as_f32)
    inexact[name] = as_f32[name] * np.float32(1 + 2 ** -20)
    inexact[name].flat[0] = np.float32(1 + 2 ** -20)
    v = c.judge(inexact)
    assert v.status == 2 and f"output '{name}' is float32, the op produces bfloat16" in v.error


@pytest.mark.parametrize("writer", ["h5py", "c"])
def test_actuals_writer(suite, tmp_path, writer):
    path = tmp_path / "actual.h5"
    cases = [suite["combine_decode_only_c4"], suite["mxfp8_special_bf16_default"], suite["inv_rope_rows_all"]]
    with dsv4check.ActualsWriter(path, writer=writer) as w:
        assert w.kind == writer
        for c in cases:
            w.add(c, c.reference())
        with pytest.raises(ValueError, match="added twice"):
            w.add(cases[0], cases[0].reference())
    assert sorted(os.listdir(tmp_path)) == ["actual.h5"]  # no temporary left
    with h5py.File(path, "r") as f:
        assert int(f.attrs["dsv4check_actuals"]) == 1
        for c in cases:
            g = f[c.name]
            assert g.attrs["op"] in (c.op, c.op.encode()) and g.attrs["variant"] in (c.variant, c.variant.encode())
            for name, arr in c.reference().items():
                d = g[name]
                kind = d.attrs["dtype"]
                assert (kind.decode() if isinstance(kind, bytes) else kind) == c.output_dtypes[name]
                assert d.dtype == D.storage(c.output_dtypes[name]) and d.fletcher32 and d.chunks
                np.testing.assert_array_equal(d[()], arr)


def test_actuals_writer_discards_on_error(suite, tmp_path):
    path = tmp_path / "actual.h5"
    with pytest.raises(RuntimeError):
        with dsv4check.ActualsWriter(path) as w:
            w.add(suite["combine_decode_only_c4"], suite["combine_decode_only_c4"].reference())
            raise RuntimeError("the kernel failed")
    assert os.listdir(tmp_path) == []
