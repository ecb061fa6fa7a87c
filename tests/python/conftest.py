"""Shared fixtures of the Python front end's tests (make unit-tests runs
them from the repository root with PYTHONPATH=python:tests/python)."""

import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SUITE = os.path.join("cases", "ci.yaml")


def exe():
    return os.environ.get("DSV4CHECK", os.path.join("build", "dsv4check"))


def plugin(name):
    """build/tests/<name> beside the CLI under test (the example plug-ins)."""
    return os.path.join(os.path.dirname(exe()), "tests", name)


def env(**extra):
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join([os.path.join(ROOT, "python"), os.path.join(ROOT, "tests", "python")] +
                                      ([e["PYTHONPATH"]] if e.get("PYTHONPATH") else []))
    e.update(extra)
    return e


def run(cmd, cwd=ROOT, **extra):
    """(exit code, stdout, stderr) of a command line (a list)."""
    p = subprocess.run(cmd, cwd=cwd, env=env(**extra), capture_output=True, text=True, timeout=600)
    return p.returncode, p.stdout, p.stderr


def py(*args, **extra):
    return run([sys.executable, "-m", "dsv4check", *args], **extra)


def cli_has_actual():
    return "--actual" in run([exe(), "run", "--help"])[1]


needs_actual = pytest.mark.skipif(not cli_has_actual(), reason="this dsv4check has no run --actual yet")


def case_blocks(text):
    """{case name: its console lines} of a dsv4check run's output, timings
    cut and the implementation's name in reproduce lines replaced by IMPL."""
    blocks, name = {}, None
    for line in text.splitlines():
        m = re.match(r"^(PASS|WARN|FAIL|BAD-INPUT|SKIP|ERROR) +(\S+)  \[", line)
        if m:
            name = m.group(2)
            blocks[name] = [re.sub(r"\] [0-9.]+ s$", "]", line)]
        elif line.startswith("    ") and name:
            blocks[name].append(re.sub(r" --(impl|actual) \S+", " IMPL", line))
        else:
            name = None
    return {k: "\n".join(v) for k, v in blocks.items()}
