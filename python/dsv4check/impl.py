"""Implementations under test, named MODULE:NAME on the command line.

NAME is a dict {op: callable(case) -> outputs}, or an object with a method
per op name.  A key "op[variant]" provides that variant only; a plain "op"
provides every variant.  An object may also define supports(op, variant).
A callable returns {output name: numpy array or torch tensor}, or a tuple
in the op's declared output order; raising NotProvided(reason) means the
implementation does not provide this case (reported as not provided).
"""

import importlib
import os
import sys


class NotProvided(Exception):
    """Raised by an implementation for a case it does not provide."""


def load(spec):
    """The implementation MODULE:NAME (NAME may be dotted; the current
    directory is importable)."""
    module, sep, attr = spec.partition(":")
    if not sep or not module or not attr:
        raise ValueError(f"--impl {spec}: expected MODULE:NAME")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    obj = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return Provider(obj, spec)


class Provider:
    def __init__(self, obj, label):
        self.obj = obj
        self.label = label

    def lookup(self, op, variant):
        """The callable providing op in variant, or None."""
        obj = self.obj
        if isinstance(obj, dict):
            fn = obj.get(f"{op}[{variant}]", obj.get(op))
        else:
            supports = getattr(obj, "supports", None)
            if callable(supports) and not supports(op, variant):
                return None
            fn = getattr(obj, op, None)
        return fn if callable(fn) else None

    def ops(self):
        """The op names this implementation names (dict keys or methods)."""
        if isinstance(self.obj, dict):
            return sorted({k.split("[", 1)[0] for k in self.obj})
        return sorted(n for n in dir(self.obj) if not n.startswith("_") and callable(getattr(self.obj, n)))


def outputs_of(case, result):
    """An implementation's result as {output name: value}: a mapping as is, a
    tuple or list (or a single value) in the op's declared output order."""
    if isinstance(result, dict):
        return dict(result)
    names = list(case.output_dtypes)
    if not isinstance(result, (tuple, list)):
        result = (result,)
    if len(result) != len(names):
        raise ValueError(f"{case.op} has {len(names)} outputs ({', '.join(names)}); the implementation "
                         f"returned {len(result)} values")
    return dict(zip(names, result))
