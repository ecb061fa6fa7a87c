"""pytest -p dsv4check.pytest_plugin --dsv4-suite SUITE --dsv4-impl MODULE:NAME

One test per case of the suite (ids = case names, under the suite's path):
the implementation runs on the case's inputs and its outputs are judged; a
failure shows the CLI's report for the case; a case the implementation
does not provide (no callable for its op and variant, or NotProvided) is
skipped with the reason.  --dsv4-filter REGEX selects cases as the CLI's
--filter does; -k works on the case names as usual.
"""

import pytest

from .core import Suite
from .impl import NotProvided, load, outputs_of


def pytest_addoption(parser):
    g = parser.getgroup("dsv4check")
    g.addoption("--dsv4-suite", action="append", default=[], metavar="SUITE.yaml",
                help="a dsv4check suite: one test per case (repeatable)")
    g.addoption("--dsv4-impl", metavar="MODULE:NAME", help="the implementation under test")
    g.addoption("--dsv4-filter", metavar="REGEX", help="only cases whose name or op/name matches")
    g.addoption("--dsv4-verbose", action="store_true", help="report every output's metrics on failure")


class Dsv4Failure(Exception):
    """A case failed: the message is the CLI's report of it."""


class SuiteNode(pytest.Collector):
    def __init__(self, *, suite, provider, filter, **kw):
        super().__init__(**kw)
        self.suite, self.provider, self.filter = suite, provider, filter

    def collect(self):
        for case in self.suite.cases(filter=self.filter):
            yield CaseItem.from_parent(self, name=case.name, case=case)


class CaseItem(pytest.Item):
    def __init__(self, *, case, **kw):
        super().__init__(**kw)
        self.case = case

    def runtest(self):
        provider = self.parent.provider
        case = self.case
        fn = provider.lookup(case.op, case.variant)
        if fn is None:
            pytest.skip(f"not provided: {provider.label} does not provide {case.op} [{case.variant}]")
        try:
            outputs = outputs_of(case, fn(case))
        except NotProvided as e:
            pytest.skip(f"not provided: {e}")
        verdict = case.judge(outputs, impl=provider.label, verbose=self.config.getoption("dsv4_verbose"))
        if verdict.skipped:
            pytest.skip(verdict.error)
        if not verdict.passed:
            raise Dsv4Failure(str(verdict))

    def repr_failure(self, excinfo):
        if isinstance(excinfo.value, Dsv4Failure):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return self.case.origin, None, f"{self.case.name} [{self.case.op} {self.case.variant}]"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session, config, items):
    suites = config.getoption("dsv4_suite")
    if not suites:
        return
    spec = config.getoption("dsv4_impl")
    if not spec:
        raise pytest.UsageError("--dsv4-suite needs --dsv4-impl MODULE:NAME")
    provider = load(spec)
    for path in suites:
        node = SuiteNode.from_parent(session, name=path, nodeid=path, suite=Suite(path), provider=provider,
                                     filter=config.getoption("dsv4_filter"))
        items.extend(node.collect())
