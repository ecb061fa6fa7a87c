"""python3 -m dsv4check run / identify / bench-overhead and the pytest
plug-in, end to end, with the implementations of impls.py."""

import json
import os
import re
import sys

import pytest

from conftest import ROOT, SUITE, case_blocks, exe, needs_actual, plugin, py, run

FILTER = "combine|mxfp8"


def _torch_or_skip(impl):
    if impl.startswith("torch") or impl.startswith("wrong_torch"):
        pytest.importorskip("torch")


@needs_actual
@pytest.mark.parametrize("impl", ["numpy_impl", "torch_impl"])
def test_run_passes(tmp_path, impl):
    _torch_or_skip(impl)
    junit = tmp_path / "ci.xml"
    rc, out, err = py("run", SUITE, "--impl", f"impls:{impl}", "--filter", FILTER, "--junit", str(junit), "-j", "2")
    assert rc == 0, out + err
    passed = len(re.findall(r"^PASS ", out, re.M))
    assert passed >= 18 and re.search(rf"summary: {passed} passed, 0 failed, \d+ skipped", out)
    assert "<testsuite" in junit.read_text()


@needs_actual
def test_run_with_the_c_writer():
    """Without h5py the actuals file is written through the C API: same verdicts."""
    rc, out, err = py("run", SUITE, "--impl", "impls:numpy_impl", "--filter", "mxfp8|combine_c128",
                      DSV4CHECK_ACTUALS_WRITER="c")
    assert rc == 0, out + err
    assert re.search(r"summary: 4 passed, 0 failed, \d+ skipped", out), out


@needs_actual
@pytest.mark.parametrize("impl", ["wrong_numpy_impl", "wrong_torch_impl"])
def test_run_planted_bug_equals_c_plugin(tmp_path, impl):
    """The Python path with the example plug-in's planted bug reports what
    the C plug-in with that bug reports, case by case, and exits the same."""
    _torch_or_skip(impl)
    rc_c, out_c, _ = run([exe(), "run", SUITE, "--filter", "combine", "--impl", plugin("libexample_wrong.so")])
    rc_py, out_py, err = py("run", SUITE, "--impl", f"impls:{impl}", "--filter", "combine",
                            "--json", str(tmp_path / "r.json"), TMPDIR=str(tmp_path))
    assert rc_c == rc_py == 1, err
    c_blocks, py_blocks = case_blocks(out_c), case_blocks(out_py)
    failing = [n for n, b in c_blocks.items() if b.startswith("FAIL")]
    assert len(failing) >= 10
    for name in failing:
        assert py_blocks[name] == c_blocks[name]
    def summary(text):
        return next(l for l in text.splitlines() if l.startswith("summary:"))
    assert summary(out_c) == summary(out_py)
    assert "actuals kept at" in err  # the reproduce commands read it
    report = json.loads((tmp_path / "r.json").read_text())
    assert report  # written by the CLI, as for a plug-in
    # the planted mxfp8 bug fails naming its element
    rc, out, _ = py("run", SUITE, "--impl", f"impls:{impl}", "--filter", "^mxfp8_heads_f32$", TMPDIR=str(tmp_path))
    assert rc == 1 and "first [0, 1023]" in out


@needs_actual
def test_run_missing_case_not_provided():
    rc, out, err = py("run", SUITE, "--impl", "impls:missing_impl", "--filter", "combine")
    assert rc == 0, out + err
    line = next(l for l in out.splitlines() if "combine_mixed_prefill_c4" in l and l.startswith("SKIP"))
    assert line
    assert "not provided" in out.split(line, 1)[1].splitlines()[1]
    assert re.search(r"summary: \d+ passed, 0 failed, 3 skipped", out)


@needs_actual
def test_run_raising_implementation_is_an_error(tmp_path):
    (tmp_path / "boom.py").write_text("def f(case):\n    raise RuntimeError('kernel launch failed')\n"
                                      "impl = {'combine_topk_swa_indices': f}\n")
    rc, out, err = py("run", SUITE, "--impl", "boom:impl", "--filter", "^combine_c128$", TMPDIR=str(tmp_path),
                      PYTHONPATH=f"{tmp_path}{os.pathsep}{os.path.join(ROOT, 'python')}")
    assert rc == 3
    assert "kernel launch failed" in err and "1 case(s) raised in boom:impl" in err


def test_run_bad_impl_spec():
    rc, _, err = py("run", SUITE, "--impl", "no_colon")
    assert rc == 2 and "expected MODULE:NAME" in err
    rc, _, err = py("run", SUITE, "--impl", "no_such_module_xyz:impl")
    assert rc == 2 and "no_such_module_xyz" in err


@pytest.mark.parametrize("impl,expect", [("numpy_impl", 0), ("wrong_numpy_impl", 1), ("torch_impl", 0)])
def test_pytest_plugin(tmp_path, impl, expect):
    _torch_or_skip(impl)
    rc, out, err = run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "dsv4check.pytest_plugin",
                        "--dsv4-suite", os.path.join(ROOT, SUITE), "--dsv4-impl", f"impls:{impl}",
                        "--dsv4-filter", FILTER, "-rs", "-v"], cwd=str(tmp_path))
    assert rc == expect, out + err
    ids = re.findall(r"::(\S+) (PASSED|FAILED|SKIPPED)", out)
    names = {n for n, _ in ids}
    assert "combine_mixed_prefill_c4" in names and "combine_sweep[topk=512,compress_ratio=4]" in names
    assert "not provided: impls:" in out and "mxfp8_quant [log2=exact]" in out
    if expect:
        # the failure is the CLI's report of the case
        assert "FAIL      combine_mixed_prefill_c4  [combine_topk_swa_indices default]" in out
        assert "first [1, 2]: expected 1117, actual 1118 (request 1, position 7, window part" in out
    else:
        assert not [n for n, s in ids if s == "FAILED"]


def test_pytest_plugin_needs_impl(tmp_path):
    rc, out, err = run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "dsv4check.pytest_plugin",
                        "--dsv4-suite", os.path.join(ROOT, SUITE)], cwd=str(tmp_path))
    assert rc != 0 and "--dsv4-suite needs --dsv4-impl" in out + err


def test_identify():
    rc, out, err = py("identify", SUITE, "--impl", "impls:numpy_impl")
    assert rc == 0, err
    sections = out.split("\n\n") if "\n\n" in out else [out]
    assert "combine_topk_swa_indices: 15 case(s)" in out
    assert re.search(r"^  default +matches bit for bit \(15 of 15 cases\)", out, re.M)
    assert re.search(r"^  width_guard=col0 +does not match", out, re.M)
    assert re.search(r"^  log2=exact +does not match \(1 of 3 cases fail\)", out, re.M)
    assert "nearest that does not match: log2=exact, first at mxfp8_log2_edge_f32: data [0, 0]" in out
    assert out.count("  => default") == 2 and sections


def test_identify_nothing_provided(tmp_path):
    (tmp_path / "none.py").write_text("impl = {}\n")
    rc, _, err = py("identify", SUITE, "--impl", "none:impl",
                    PYTHONPATH=f"{tmp_path}{os.pathsep}{os.path.join(ROOT, 'python')}")
    assert rc == 77 and "provides no op" in err


def test_bench_overhead():
    rc, out, err = py("bench-overhead", SUITE, "--filter", "combine|mxfp8")
    assert rc == 0, err
    m = re.search(r"Python path beyond the kernel +([0-9.]+) ms/case", out)
    assert m and float(m.group(1)) > 0, out
