"""Suites, cases, verdicts: the Python face of include/dsv4check.h."""

import ctypes
from dataclasses import dataclass
from typing import Optional

import numpy as np

from . import _lib as L
from . import dtypes as D
from .impl import outputs_of


def api_version():
    return L.lib().dsv4check_api_version()


def version():
    return L.text(L.lib().dsv4check_version())


def set_memory_limit(nbytes):
    """Upper bound on one case's tensors together (the CLI's --mem-limit)."""
    L.lib().dsv4check_set_memory_limit(int(nbytes))


def ops():
    """{op name: [variant names, default first]}."""
    lib = L.lib()
    out = {}
    for i in range(lib.dsv4check_op_count()):
        op = lib.dsv4check_op_name(i)
        out[L.text(op)] = [L.text(lib.dsv4check_op_variant_name(op, k))
                           for k in range(lib.dsv4check_op_variant_count(op))]
    return out


def op_outputs(op):
    """{output name: logical dtype the kernel produces}, in declared order."""
    lib = L.lib()
    o = L.enc(op)
    n = lib.dsv4check_op_output_count(o)
    if n < 0:
        raise L.Dsv4Error(L.EINPUT, f"unknown op '{op}'")
    return {L.text(lib.dsv4check_op_output_name(o, k)): D.name(lib.dsv4check_op_output_dtype(o, k))
            for k in range(n)}


def _tensor_set(ptr):
    """{name: numpy array (a copy)} and {name: logical dtype} of a C tensor
    set, which is freed."""
    lib = L.lib()
    arrays, kinds, ideal_of = {}, {}, {}
    try:
        t = L.Tensor()
        for k in range(lib.dsv4check_tensors_count(ptr)):
            lib.dsv4check_tensors_get(ptr, k, ctypes.byref(t))
            name = L.text(t.name)
            shape = tuple(t.shape[d] for d in range(t.ndim))
            kind = D.name(t.dtype)
            if t.nbytes:
                raw = (ctypes.c_char * t.nbytes).from_address(t.data)
                arrays[name] = np.frombuffer(raw, dtype=D.storage(kind)).reshape(shape).copy()
            else:
                arrays[name] = np.zeros(shape, dtype=D.storage(kind))
            kinds[name] = kind
            if t.output_dtype >= 0:
                ideal_of[name] = D.name(t.output_dtype)
    finally:
        lib.dsv4check_tensors_free(ptr)
    return arrays, kinds, ideal_of


@dataclass
class Mismatch:
    index: str
    where: str
    expected: float
    actual: float


@dataclass
class OutputMetrics:
    """One output's comparison, as the reports print it."""
    name: str
    verdict: str  # pass, warn, fail
    kind: str     # exact, float, index_set, mx
    rule: str
    count: int
    compared: int
    mismatches: int
    max_abs: float
    max_rel: float
    max_ulp: float
    worst_ratio: float
    nmse: float
    cosine: float
    first: Optional[Mismatch]
    hint: str
    message: str

    @property
    def passed(self):
        return self.verdict != "fail"


class Verdict:
    """The judgement of one case: status (the CLI's exit code for it), the
    per-output metrics, and str(verdict) = the CLI's report for the case."""

    WORDS = {L.OK: "pass", L.EFAIL: "fail", L.EINPUT: "bad input", L.ERUNTIME: "error", L.ESKIP: "skip"}

    def __init__(self, ptr):
        lib = L.lib()
        try:
            self.status = lib.dsv4check_verdict_status(ptr)
            self.word = L.text(lib.dsv4check_verdict_word(ptr))
            self.case = L.text(lib.dsv4check_verdict_case(ptr))
            self.error = L.text(lib.dsv4check_verdict_error(ptr))
            self.report = L.text(lib.dsv4check_verdict_report(ptr))
            self.seconds = lib.dsv4check_verdict_seconds(ptr)
            self.outputs = {}
            m = L.Metrics()
            for k in range(lib.dsv4check_verdict_output_count(ptr)):
                lib.dsv4check_verdict_output(ptr, k, ctypes.byref(m))
                first = Mismatch(L.text(m.first_index), L.text(m.first_where), m.first_expected,
                                 m.first_actual) if m.has_first else None
                name = L.text(m.name)
                self.outputs[name] = OutputMetrics(
                    name, ("pass", "warn", "fail")[m.verdict], L.text(m.kind), L.text(m.rule), m.count,
                    m.compared, m.mismatches, m.max_abs, m.max_rel, m.max_ulp, m.worst_ratio, m.nmse,
                    m.cosine, first, L.text(m.hint), L.text(m.message))
        finally:
            lib.dsv4check_verdict_free(ptr)

    @property
    def passed(self):
        return self.status == L.OK

    @property
    def skipped(self):
        return self.status == L.ESKIP

    def __str__(self):
        return self.report

    def __repr__(self):
        return f"<Verdict {self.case}: {self.word}>"


class Case:
    """One case of a suite (or the one case of a golden file)."""

    def __init__(self, suite, ptr, owned=False):
        self._suite = suite  # keeps the C suite alive
        self._ptr = ptr
        self._owned = owned
        lib = L.lib()
        self.name = L.text(lib.dsv4check_case_name(ptr))
        self.op = L.text(lib.dsv4check_case_op(ptr))
        self.variant = L.text(lib.dsv4check_case_variant(ptr))
        self.seed = lib.dsv4check_case_seed(ptr)
        self.golden = L.text(lib.dsv4check_case_golden(ptr)) or None
        self.origin = L.text(lib.dsv4check_case_origin(ptr))
        self._params = None
        self._inputs = None
        self._output_dtypes = None

    @property
    def tags(self):
        lib = L.lib()
        return [L.text(lib.dsv4check_case_tag(self._ptr, k)) for k in range(lib.dsv4check_case_tag_count(self._ptr))]

    @property
    def params(self):
        """{name: int, float, str or [int]}, defaults filled in."""
        if self._params is None:
            lib, p, self._params = L.lib(), L.Param(), {}
            for k in range(lib.dsv4check_case_param_count(self._ptr)):
                lib.dsv4check_case_param(self._ptr, k, ctypes.byref(p))
                if p.kind == L.PARAM_INT:
                    v = p.i
                elif p.kind == L.PARAM_FLOAT:
                    v = p.f
                elif p.kind == L.PARAM_STRING:
                    v = L.text(p.s)
                else:
                    v = [p.list[j] for j in range(p.n)]
                self._params[L.text(p.name)] = v
        return self._params

    def __del__(self):
        if getattr(self, "_owned", False) and self._ptr:
            L.lib().dsv4check_case_free(self._ptr)
            self._ptr = None

    def __repr__(self):
        return f"<Case {self.name} [{self.op} {self.variant}]>"

    # ---- inputs ----

    def _load_inputs(self, source):
        """The inputs, and (from the same C tensors) the outputs' dtypes as the
        op allocates them for these inputs."""
        lib = L.lib()
        ins, outs = ctypes.c_void_p(), ctypes.c_void_p()
        L.call(lib.dsv4check_case_inputs, self._ptr, source, ctypes.byref(ins))
        try:
            if self._output_dtypes is None:
                L.call(lib.dsv4check_case_outputs, self._ptr, ins, ctypes.byref(outs))
                _, self._output_dtypes, _ = _tensor_set(outs)
        finally:
            arrays, kinds, _ = _tensor_set(ins)
        return arrays, kinds

    @property
    def inputs(self):
        """{name: numpy array}: from the generator (bit-identical to the
        golden's inputs, which `run` checks), or the golden file's for a
        golden-file case.  bfloat16 as uint16 bits, float8 / e8m0 / fp4 as
        uint8 codes: see .input_dtypes and .float32(name)."""
        if self._inputs is None:
            self._inputs, self.input_dtypes = self._load_inputs(L.INPUTS_AUTO)
        return self._inputs

    def golden_inputs(self):
        """The inputs stored in the case's golden file."""
        return self._load_inputs(L.INPUTS_GOLDEN)[0]

    def dtype(self, name):
        """The logical dtype of an input or output."""
        if name in self.output_dtypes:
            return self.output_dtypes[name]
        self.inputs
        return self.input_dtypes[name]

    def float32(self, name):
        """An input decoded to float32 values."""
        return D.to_float32(self.inputs[name], self.dtype(name))

    def inputs_torch(self, device="cpu", raw=False):
        """{name: torch tensor} with the real dtypes (bfloat16, float8_e4m3fn,
        ...); a dtype this torch lacks is a TypeError naming it, unless
        raw=True (then its storage: uint8 codes, int16 bits)."""
        return {k: D.to_torch(v, self.dtype(k), device, raw) for k, v in self.inputs.items()}

    # ---- outputs ----

    @property
    def output_dtypes(self):
        """{output name: logical dtype} as the op allocates them for this case
        (a variant may change one, e.g. fp8=fnuz), in declared order."""
        if self._output_dtypes is None:
            self.inputs
        return self._output_dtypes

    def _c_set(self, fn, *args):
        out = ctypes.c_void_p()
        L.call(fn, self._ptr, *args, ctypes.byref(out))
        return _tensor_set(out)

    def initial_outputs(self):
        """{name: numpy array} of every output the implementation must write,
        shaped and typed as the op allocates them, with their initial
        contents (some ops define them: -1 padding, a cache updated in place)."""
        return self._c_set(L.lib().dsv4check_case_outputs, None)[0]

    def reference(self, ideal=False):
        """The CPU reference outputs: in the kernel dtypes (what `--impl ref`
        produces), or ideal=True: float outputs as the double ideal."""
        return self._c_set(L.lib().dsv4check_case_reference, None, 1 if ideal else 0)[0]

    def expected(self):
        """What a judgement compares with: the golden's outputs, else the ideal."""
        return self._c_set(L.lib().dsv4check_case_expected)[0]

    def judge(self, outputs, impl=None, verbose=False, repro_dir=None, argv0=None):
        """Judges outputs ({name: numpy array or torch tensor}, or a sequence
        in declared order) as `dsv4check run` judges an implementation's; a
        Verdict.  impl names the implementation in the reproduce line."""
        named = outputs_of(self, outputs)
        keep, ts = [], (L.Tensor * max(1, len(named)))()
        for k, (name, value) in enumerate(named.items()):
            kind, arr = D.as_output(value, self.output_dtypes.get(name, ""))
            shape = (ctypes.c_int64 * max(1, arr.ndim))(*arr.shape)
            nm = L.enc(name)
            keep += [arr, shape, nm]
            ts[k] = L.Tensor(nm, D.CODE.get(kind, -1), -1, arr.ndim, shape, arr.ctypes.data, arr.nbytes)
        opts = L.JudgeOpts(L.enc(impl), L.enc(argv0), 1 if verbose else 0, L.enc(repro_dir))
        out = ctypes.c_void_p()
        L.call(L.lib().dsv4check_judge, self._ptr, ts, len(named), ctypes.byref(opts), ctypes.byref(out))
        return Verdict(out)

    # ---- variants and selection ----

    def with_variant(self, variant):
        """This case with another variant of its op, judged against that
        variant's live reference."""
        out = ctypes.c_void_p()
        L.call(L.lib().dsv4check_case_with_variant, self._ptr, L.enc(variant), ctypes.byref(out))
        return Case(self._suite, out.value, owned=True)

    def selected(self, filter=None, shard=None):
        """Whether `dsv4check run --filter filter --shard K/N` runs this case
        (shard: (K, N) or "K/N")."""
        k, n = _shard(shard)
        sel = ctypes.c_int()
        L.call(L.lib().dsv4check_case_selected, self._ptr, L.enc(filter), k, n, ctypes.byref(sel))
        return bool(sel.value)


def _shard(shard):
    if shard is None:
        return 0, 0
    if isinstance(shard, str):
        k, _, n = shard.partition("/")
        return int(k), int(n)
    return int(shard[0]), int(shard[1])


class Suite:
    """A YAML suite (README.md "Writing cases"), or with Suite.golden(path)
    a golden file as a suite of its one case."""

    def __init__(self, path, _golden=False):
        self.path = str(path)
        ptr = ctypes.c_void_p()
        loader = L.lib().dsv4check_golden_load if _golden else L.lib().dsv4check_suite_load
        L.call(loader, L.enc(self.path), ctypes.byref(ptr))
        self._ptr = ptr.value
        lib = L.lib()
        self.name = L.text(lib.dsv4check_suite_name(self._ptr))
        self._cases = [Case(self, lib.dsv4check_suite_case(self._ptr, i))
                       for i in range(lib.dsv4check_suite_count(self._ptr))]

    @classmethod
    def golden(cls, path):
        return cls(path, _golden=True)

    def __del__(self):
        ptr = getattr(self, "_ptr", None)
        if ptr:
            L.lib().dsv4check_suite_free(ptr)
            self._ptr = None

    def __len__(self):
        return len(self._cases)

    def __iter__(self):
        return iter(self._cases)

    def __getitem__(self, name):
        for c in self._cases:
            if c.name == name:
                return c
        raise KeyError(name)

    def cases(self, op=None, variant=None, filter=None, shard=None):
        """The cases in suite order, by op, variant, --filter regular
        expression (POSIX extended, on the name or op/name, as the CLI) and
        --shard K/N."""
        return [c for c in self._cases
                if (op is None or c.op == op) and (variant is None or c.variant == variant)
                and ((filter is None and shard is None) or c.selected(filter, shard))]
