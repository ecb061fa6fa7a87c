"""ctypes bindings of include/dsv4check.h (libdsv4.so).

The library is found, in order: $DSV4CHECK_LIB; the library directory
`make install` recorded in _installed.py; build/libdsv4.so of the source tree
this package sits in (python/dsv4check -> ../../build); the loader's search
path (ldconfig, LD_LIBRARY_PATH).
"""

import ctypes
import ctypes.util
import os

API_VERSION = 1  # DSV4CHECK_API_VERSION this binding speaks

OK, EFAIL, EINPUT, ERUNTIME, ESKIP = 0, 1, 2, 3, 77
INPUTS_AUTO, INPUTS_GENERATE, INPUTS_GOLDEN = 0, 1, 2
PARAM_INT, PARAM_FLOAT, PARAM_STRING, PARAM_INTLIST = 0, 1, 2, 3
ERR_LEN = 1024

_HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_ROOT = os.path.dirname(os.path.dirname(_HERE))


class Dsv4Error(RuntimeError):
    """A call into libdsv4 failed; .code is the CLI's exit code for it."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


def _installed(name):
    try:
        from . import _installed as inst  # written by `make install`
    except ImportError:
        return None
    return getattr(inst, name, None)


def library_path():
    """Where libdsv4.so is loaded from (see the module docstring)."""
    env = os.environ.get("DSV4CHECK_LIB")
    if env:
        return env
    libdir = _installed("LIBDIR")
    if libdir and os.path.exists(os.path.join(libdir, "libdsv4.so")):
        return os.path.join(libdir, "libdsv4.so")
    tree = os.path.join(SOURCE_ROOT, "build", "libdsv4.so")
    if os.path.exists(tree):
        return tree
    found = ctypes.util.find_library("dsv4")
    if found:
        return found
    raise Dsv4Error(ERUNTIME, "libdsv4.so not found: run `make` (or `make install`), or set DSV4CHECK_LIB")


def cli_path():
    """The dsv4check executable: $DSV4CHECK, the installed one, build/dsv4check
    of the source tree, or `dsv4check` on PATH."""
    env = os.environ.get("DSV4CHECK")
    if env:
        return env
    bindir = _installed("BINDIR")
    if bindir and os.path.exists(os.path.join(bindir, "dsv4check")):
        return os.path.join(bindir, "dsv4check")
    tree = os.path.join(SOURCE_ROOT, "build", "dsv4check")
    if os.path.exists(tree):
        return tree
    return "dsv4check"


class Tensor(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("dtype", ctypes.c_int),
        ("output_dtype", ctypes.c_int),
        ("ndim", ctypes.c_int),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("data", ctypes.c_void_p),
        ("nbytes", ctypes.c_size_t),
    ]


class Param(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("kind", ctypes.c_int),
        ("i", ctypes.c_int64),
        ("f", ctypes.c_double),
        ("s", ctypes.c_char_p),
        ("n", ctypes.c_int),
        ("list", ctypes.POINTER(ctypes.c_int64)),
    ]


class JudgeOpts(ctypes.Structure):
    _fields_ = [
        ("impl", ctypes.c_char_p),
        ("argv0", ctypes.c_char_p),
        ("verbose", ctypes.c_int),
        ("repro_dir", ctypes.c_char_p),
    ]


class Metrics(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("verdict", ctypes.c_int),
        ("kind", ctypes.c_char_p),
        ("rule", ctypes.c_char_p),
        ("count", ctypes.c_int64),
        ("compared", ctypes.c_int64),
        ("mismatches", ctypes.c_int64),
        ("max_abs", ctypes.c_double),
        ("max_rel", ctypes.c_double),
        ("max_ulp", ctypes.c_double),
        ("worst_ratio", ctypes.c_double),
        ("nmse", ctypes.c_double),
        ("cosine", ctypes.c_double),
        ("has_first", ctypes.c_int),
        ("first_index", ctypes.c_char_p),
        ("first_where", ctypes.c_char_p),
        ("first_expected", ctypes.c_double),
        ("first_actual", ctypes.c_double),
        ("hint", ctypes.c_char_p),
        ("message", ctypes.c_char_p),
    ]


P = ctypes.c_void_p
S = ctypes.c_char_p
I = ctypes.c_int
ERR = (ctypes.c_char_p, ctypes.c_size_t)

_PROTOTYPES = {
    "dsv4check_api_version": (I, ()),
    "dsv4check_version": (S, ()),
    "dsv4check_set_memory_limit": (None, (ctypes.c_uint64,)),
    "dsv4check_dtype_name": (S, (I,)),
    "dsv4check_dtype_parse": (I, (S,)),
    "dsv4check_dtype_size": (ctypes.c_size_t, (I,)),
    "dsv4check_op_count": (I, ()),
    "dsv4check_op_name": (S, (I,)),
    "dsv4check_op_variant_count": (I, (S,)),
    "dsv4check_op_variant_name": (S, (S, I)),
    "dsv4check_op_variant_doc": (S, (S, I)),
    "dsv4check_op_output_count": (I, (S,)),
    "dsv4check_op_output_name": (S, (S, I)),
    "dsv4check_op_output_dtype": (I, (S, I)),
    "dsv4check_suite_load": (I, (S, ctypes.POINTER(P)) + ERR),
    "dsv4check_golden_load": (I, (S, ctypes.POINTER(P)) + ERR),
    "dsv4check_suite_free": (None, (P,)),
    "dsv4check_suite_name": (S, (P,)),
    "dsv4check_suite_count": (I, (P,)),
    "dsv4check_suite_case": (P, (P, I)),
    "dsv4check_case_name": (S, (P,)),
    "dsv4check_case_op": (S, (P,)),
    "dsv4check_case_variant": (S, (P,)),
    "dsv4check_case_seed": (ctypes.c_uint64, (P,)),
    "dsv4check_case_golden": (S, (P,)),
    "dsv4check_case_origin": (S, (P,)),
    "dsv4check_case_tag_count": (I, (P,)),
    "dsv4check_case_tag": (S, (P, I)),
    "dsv4check_case_param_count": (I, (P,)),
    "dsv4check_case_param": (I, (P, I, ctypes.POINTER(Param))),
    "dsv4check_case_selected": (I, (P, S, I, I, ctypes.POINTER(I)) + ERR),
    "dsv4check_case_with_variant": (I, (P, S, ctypes.POINTER(P)) + ERR),
    "dsv4check_case_free": (None, (P,)),
    "dsv4check_case_inputs": (I, (P, I, ctypes.POINTER(P)) + ERR),
    "dsv4check_case_outputs": (I, (P, P, ctypes.POINTER(P)) + ERR),
    "dsv4check_case_reference": (I, (P, P, I, ctypes.POINTER(P)) + ERR),
    "dsv4check_case_expected": (I, (P, ctypes.POINTER(P)) + ERR),
    "dsv4check_tensors_count": (I, (P,)),
    "dsv4check_tensors_get": (I, (P, I, ctypes.POINTER(Tensor))),
    "dsv4check_tensors_find": (I, (P, S)),
    "dsv4check_tensors_free": (None, (P,)),
    "dsv4check_judge": (I, (P, ctypes.POINTER(Tensor), I, ctypes.POINTER(JudgeOpts), ctypes.POINTER(P)) + ERR),
    "dsv4check_verdict_status": (I, (P,)),
    "dsv4check_verdict_word": (S, (P,)),
    "dsv4check_verdict_case": (S, (P,)),
    "dsv4check_verdict_error": (S, (P,)),
    "dsv4check_verdict_report": (S, (P,)),
    "dsv4check_verdict_seconds": (ctypes.c_double, (P,)),
    "dsv4check_verdict_output_count": (I, (P,)),
    "dsv4check_verdict_output": (I, (P, I, ctypes.POINTER(Metrics))),
    "dsv4check_verdict_free": (None, (P,)),
    "dsv4check_actuals_open": (I, (S, ctypes.POINTER(P)) + ERR),
    "dsv4check_actuals_add": (I, (P, S, S, S, ctypes.POINTER(Tensor), I) + ERR),
    "dsv4check_actuals_commit": (I, (P,) + ERR),
    "dsv4check_actuals_free": (None, (P,)),
}

_lib = None


def lib():
    """The loaded library, its prototypes declared and its API version checked."""
    global _lib
    if _lib is None:
        path = library_path()
        try:
            handle = ctypes.CDLL(path)
        except OSError as e:
            raise Dsv4Error(ERUNTIME, f"cannot load {path}: {e}") from e
        for name, (restype, argtypes) in _PROTOTYPES.items():
            fn = getattr(handle, name)
            fn.restype = restype
            fn.argtypes = list(argtypes)
        version = handle.dsv4check_api_version()
        if version != API_VERSION:
            raise Dsv4Error(EINPUT, f"{path} has API version {version}; this dsv4check package speaks {API_VERSION}")
        _lib = handle
    return _lib


def call(fn, *args):
    """Calls a fallible API function with a message buffer; raises Dsv4Error."""
    err = ctypes.create_string_buffer(ERR_LEN)
    rc = fn(*args, err, ERR_LEN)
    if rc != OK:
        raise Dsv4Error(rc, err.value.decode("utf-8", "replace"))


def text(b):
    return b.decode("utf-8", "replace") if b is not None else None


def enc(s):
    return s.encode("utf-8") if s is not None else None
