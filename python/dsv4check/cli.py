"""python3 -m dsv4check: run, identify and bench-overhead for Python kernels.

run: the implementation's callables run here, in suite order, in this
process (one GPU context); their outputs go to an actuals file, and
`dsv4check run SUITE --actual FILE` judges it with the given report options,
so the console, JUnit, JSON, HTML, repro files and the exit code are the
CLI's, exactly as for a plug-in.  -j N and --shard K/N apply to the judging
(--shard also to which cases run here).
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
import traceback

from . import _lib as L
from .actuals import ActualsWriter
from .core import Suite
from .impl import NotProvided, load, outputs_of

# Options handed to `dsv4check run` as they are: (flag, takes a value).
PASS_THROUGH = [("-j", True), ("--shard", True), ("--junit", True), ("--json", True), ("--html", True),
                ("--repro-dir", True), ("--filter", True), ("--baseline", True), ("--drift-factor", True),
                ("--strict", False), ("--timeout", True), ("--mem-limit", True), ("-v", False)]


def _add_run_options(p):
    p.add_argument("suites", nargs="+", metavar="SUITE.yaml")
    p.add_argument("--impl", required=True, metavar="MODULE:NAME",
                   help="a dict {op or op[variant]: callable(case) -> outputs}, or an object with a method per op")
    p.add_argument("-j", "--jobs", dest="j", metavar="N", help="judge in N worker processes (dsv4check -j)")
    p.add_argument("--shard", metavar="K/N", help="only the cases of shard K of N (run here and judged)")
    p.add_argument("--filter", metavar="REGEX", help="only cases whose name or op/name matches (POSIX extended)")
    for flag in ("--junit", "--json", "--html"):
        p.add_argument(flag, metavar="FILE")
    p.add_argument("--repro-dir", metavar="DIR")
    p.add_argument("--baseline", metavar="JSON")
    p.add_argument("--drift-factor", metavar="F")
    p.add_argument("--strict", action="store_true")
    p.add_argument("--timeout", metavar="SECONDS")
    p.add_argument("--mem-limit", metavar="BYTES")
    p.add_argument("-v", "--verbose", dest="v", action="store_true")
    p.add_argument("--actual-out", metavar="FILE", help="keep the actuals file here (default: a temporary file)")
    p.add_argument("--dsv4check", metavar="EXE", help="the dsv4check executable (default: $DSV4CHECK, the "
                   "installed one or build/dsv4check)")


def _pass_through(args):
    out = []
    for flag, has_value in PASS_THROUGH:
        v = getattr(args, flag.lstrip("-").replace("-", "_"))
        if has_value and v is not None:
            out += [flag, str(v)]
        elif not has_value and v:
            out.append(flag)
    return out


def compute_actuals(suites, provider, path, filter=None, shard=None, log=sys.stderr):
    """Runs the provider on every selected case it provides and writes the
    actuals file; returns (cases written, cases that raised)."""
    written, failed = 0, []
    with ActualsWriter(path) as w:
        for suite in suites:
            for case in suite.cases(filter=filter, shard=shard):
                fn = provider.lookup(case.op, case.variant)
                if fn is None:
                    continue
                try:
                    w.add(case, outputs_of(case, fn(case)))
                    written += 1
                except NotProvided:
                    continue
                except Exception:  # the implementation's own error: reported, never judged
                    failed.append(case.name)
                    print(f"python: {case.name} [{case.op} {case.variant}]: {provider.label} raised:", file=log)
                    traceback.print_exc(file=log)
    return written, failed


def _supports_actual(exe):
    try:
        help_text = subprocess.run([exe, "run", "--help"], capture_output=True, text=True).stdout
    except OSError as e:
        raise L.Dsv4Error(L.EINPUT, f"cannot run {exe}: {e}") from e
    return "--actual" in help_text


def cmd_run(args):
    exe = args.dsv4check or L.cli_path()
    provider = load(args.impl)
    suites = [Suite(p) for p in args.suites]
    if not _supports_actual(exe):
        print(f"python3 -m dsv4check run: {exe} has no --actual option (build this tree's dsv4check)",
              file=sys.stderr)
        return L.EINPUT
    tmpdir = None
    path = args.actual_out
    if path is None:
        tmpdir = tempfile.mkdtemp(prefix="dsv4check-actual.")
        path = os.path.join(tmpdir, "actual.h5")
    try:
        _, failed = compute_actuals(suites, provider, path, args.filter, args.shard)
        sys.stdout.flush()
        cmd = [exe, "run", *args.suites, "--actual", path] + _pass_through(args)
        rc = subprocess.run(cmd).returncode
        if tmpdir and rc not in (L.OK, L.ESKIP):
            print(f"python: actuals kept at {path} (the reproduce commands above read it)", file=sys.stderr)
            tmpdir = None
    finally:
        if tmpdir:
            for f in os.listdir(tmpdir):
                os.unlink(os.path.join(tmpdir, f))
            os.rmdir(tmpdir)
    if failed:
        print(f"python: {len(failed)} case(s) raised in {provider.label} (not judged: see above): "
              f"{', '.join(failed)}", file=sys.stderr)
        if rc in (L.OK, L.EFAIL, L.ESKIP):
            rc = L.ERUNTIME  # as a plug-in that failed a case (bad input, exit 2, still wins)
    return rc


# ---- identify ----

def _bytes_equal(case, outputs, reference):
    """Whether outputs are the reference in the kernel dtypes, bit for bit."""
    from . import dtypes as D
    for name, ref in reference.items():
        if name not in outputs:
            return False
        _, arr = D.as_output(outputs[name], case.output_dtypes[name])
        if arr.shape != ref.shape or arr.tobytes() != ref.tobytes():
            return False
    return True


def identify(suite, provider, filter=None, out=sys.stdout):
    """For each op the provider names: runs it on the suite's cases of that
    op and judges its outputs against the reference of every variant on the
    same inputs.  Returns {op: [variants matched bit for bit or in bound]}."""
    from .core import ops as all_ops
    import numpy as np
    variants_of = all_ops()
    result = {}
    for op in provider.ops():
        if op not in variants_of:
            continue
        cases = [c for c in suite.cases(op=op, filter=filter) if provider.lookup(c.op, c.variant)]
        if not cases:
            continue
        print(f"{op}: {len(cases)} case(s) of {suite.path}", file=out)
        rows = []
        for v in variants_of[op]:
            exact = inbound = applicable = 0
            worst = None
            for case in cases:
                fn = provider.lookup(case.op, case.variant)
                derived = case.with_variant(v)
                try:
                    derived.inputs  # inputs this variant refuses leave the case out of its count
                except L.Dsv4Error:
                    continue
                try:
                    outputs = outputs_of(derived, fn(derived))
                except NotProvided:
                    continue
                applicable += 1
                verdict = derived.judge(outputs, impl=provider.label)
                if verdict.passed:
                    inbound += 1
                    exact += _bytes_equal(derived, outputs, derived.reference())
                else:
                    bad = sum(m.mismatches for m in verdict.outputs.values()) or np.inf
                    if worst is None or bad < worst[0]:
                        worst = (bad, case.name, verdict)
            rows.append((v, exact, inbound, applicable, worst))
        matched, failing = [], []
        for v, exact, inbound, n, worst in rows:
            if n == 0:
                what = "not applicable (every case's inputs are refused by this variant)"
            elif exact == n:
                what = f"matches bit for bit ({n} of {n} cases)"
                matched.append(v)
            elif inbound == n:
                what = f"matches within bound ({n} of {n} cases, {exact} bit for bit)"
                matched.append(v)
            else:
                what = f"does not match ({n - inbound} of {n} cases fail)"
                failing.append((n - inbound, worst[0] if worst else np.inf, v, worst))
            if 0 < n < len(cases):
                what += f"; {len(cases) - n} case(s) not applicable"
            print(f"  {v:40s} {what}", file=out)
        if failing:
            _, _, v, worst = min(failing, key=lambda f: (f[0], f[1]))
            if worst:
                _, name, verdict = worst
                m = next((m for m in verdict.outputs.values() if m.first), None)
                if m:
                    where = f" ({m.first.where})" if m.first.where else ""
                    detail = (f"{m.name} {m.first.index}: expected {m.first.expected:.9g}, "
                              f"actual {m.first.actual:.9g}{where}")
                else:
                    detail = verdict.error or verdict.word
                print(f"  nearest that does not match: {v}, first at {name}: {detail}", file=out)
        print(f"  => {', '.join(matched) if matched else 'no variant'}", file=out)
        result[op] = matched
    return result


def cmd_identify(args):
    provider = load(args.impl)
    suite = Suite(args.suite)
    result = identify(suite, provider, args.filter)
    if not result:
        print(f"identify: {args.impl} provides no op of {args.suite}", file=sys.stderr)
        return L.ESKIP
    return L.OK


# ---- bench-overhead ----

class _Replay:
    """An implementation whose 'kernel' hands back the reference outputs
    computed before the timing starts: the Python path without kernel time."""

    def __init__(self, suite):
        self.outputs = {c.name: c.reference() for c in suite}

    def supports(self, op, variant):
        return True

    def __getattr__(self, op):
        return lambda case: self.outputs[case.name]


def _generation_seconds(case):
    """The C generator's time for a case's inputs alone (no copies)."""
    import ctypes
    lib, out = L.lib(), ctypes.c_void_p()
    t = time.perf_counter()
    L.call(lib.dsv4check_case_inputs, case._ptr, L.INPUTS_GENERATE, ctypes.byref(out))
    t = time.perf_counter() - t
    lib.dsv4check_tensors_free(out)
    return t


def cmd_bench_overhead(args):
    """The Python path on a suite, phase by phase; the overhead is its time
    beyond the implementation's calls and the input generation (the C
    generator the CLI runs for a plug-in too), data copies included."""
    from .impl import Provider
    exe = args.dsv4check or L.cli_path()
    suite = Suite(args.suite)
    provider = load(args.impl) if args.impl else Provider(_Replay(suite), "replay of the reference")
    gen = {c.name: min(_generation_seconds(c) for _ in range(2)) for c in suite.cases(filter=args.filter)}
    t0 = time.perf_counter()
    fresh = Suite(args.suite)  # inputs of a fresh load are made on first use
    t_load = time.perf_counter() - t0
    n, t_inputs, t_call, t_write, t_gen = 0, 0.0, 0.0, 0.0, 0.0
    with tempfile.TemporaryDirectory(prefix="dsv4check-bench.") as d:
        path = os.path.join(d, "actual.h5")
        t_all = time.perf_counter()
        with ActualsWriter(path) as w:
            for case in fresh.cases(filter=args.filter):
                fn = provider.lookup(case.op, case.variant)
                if fn is None:
                    continue
                a = time.perf_counter()
                case.inputs
                b = time.perf_counter()
                outputs = outputs_of(case, fn(case))
                c = time.perf_counter()
                w.add(case, outputs)
                t_write += time.perf_counter() - c
                t_inputs += b - a
                t_call += c - b
                t_gen += gen[case.name]
                n += 1
        t_python = time.perf_counter() - t_all + t_load
        t_judge = None
        if _supports_actual(exe):
            a = time.perf_counter()
            cmd = [exe, "run", args.suite, "--actual", path] + (["--filter", args.filter] if args.filter else [])
            subprocess.run(cmd, stdout=subprocess.DEVNULL)
            t_judge = time.perf_counter() - a
    if n == 0:
        print("bench-overhead: no case provided", file=sys.stderr)
        return L.ESKIP
    ms = 1e3 / n
    print(f"bench-overhead: {n} cases of {args.suite}, implementation {provider.label}, writer {w.kind}")
    print(f"  suite load                          {t_load * ms:8.3f} ms/case")
    print(f"  inputs                              {t_inputs * ms:8.3f} ms/case, of which the C generator "
          f"{t_gen * ms:.3f}")
    print(f"  implementation calls (the kernel)   {t_call * ms:8.3f} ms/case")
    print(f"  outputs into the actuals file       {t_write * ms:8.3f} ms/case")
    print(f"  Python path beyond the kernel       {(t_python - t_call - t_gen) * ms:8.3f} ms/case "
          f"(besides the input generation a plug-in run does too; data copies included)")
    if t_judge is not None:
        print(f"  judging: {exe} run --actual        {t_judge * ms:8.3f} ms/case (as for a plug-in)")
    return L.OK


# ---- main ----

DEFAULT_SUITE = os.path.join(L.SOURCE_ROOT, "cases", "ci.yaml")

def main(argv=None):
    p = argparse.ArgumentParser(prog="python3 -m dsv4check", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run a Python implementation on suites; the CLI judges it")
    _add_run_options(r)
    i = sub.add_parser("identify", help="which variant of each op an implementation computes")
    i.add_argument("suite", nargs="?", default=DEFAULT_SUITE, metavar="SUITE.yaml",
                   help="default: this source tree's cases/ci.yaml")
    i.add_argument("--impl", required=True, metavar="MODULE:NAME")
    i.add_argument("--filter", metavar="REGEX")
    b = sub.add_parser("bench-overhead", help="time the Python path per case, kernel aside")
    b.add_argument("suite", nargs="?", default=DEFAULT_SUITE, metavar="SUITE.yaml",
                   help="default: this source tree's cases/ci.yaml")
    b.add_argument("--impl", metavar="MODULE:NAME", help="default: a replay of the reference outputs")
    b.add_argument("--filter", metavar="REGEX")
    b.add_argument("--dsv4check", metavar="EXE")
    args = p.parse_args(argv)
    if getattr(args, "suite", "") == DEFAULT_SUITE and not os.path.exists(DEFAULT_SUITE):
        p.error("give SUITE.yaml (an installed package has no source tree's cases/ci.yaml)")
    try:
        if args.command == "run":
            return cmd_run(args)
        if args.command == "identify":
            return cmd_identify(args)
        return cmd_bench_overhead(args)
    except L.Dsv4Error as e:
        print(f"python3 -m dsv4check {args.command}: {e}", file=sys.stderr)
        return e.code
    except (ImportError, AttributeError, ValueError) as e:
        print(f"python3 -m dsv4check {args.command}: {e}", file=sys.stderr)
        return L.EINPUT
