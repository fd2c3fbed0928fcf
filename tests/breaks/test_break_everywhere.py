"""Stress test of the resume machinery: every conformance program, with a graph break injected
before the k-th graph op of every trace (the prefix, each resume function, each callee), must
still equal eager: outputs, inputs after the call, module and program state, gradients.

k = 0 breaks before every op (each op then runs eagerly between resume functions); k = 2 leaves
small graphs between the breaks. Frames whose break cannot resume (loops, try blocks) run
eagerly; the program must be right either way."""
from __future__ import annotations

import os

import pytest

from conformance.cases import ALL_CASES, CASE_IDS
from conformance.harness import XCompile, run_case
from xcompile.frontend.exc import Unsupported
from xcompile.frontend.graph_builder import GraphBuilder

_injected = {"n": 0}


class _Counter:
    """The harness counts graphs for whole-frame capture; here any number is right."""

    def __init__(self):
        import xcompile.testing
        self.inner = xcompile.testing.CompileCounter()
        self.frame_count = 1
        self.op_count = 1

    def __call__(self, gm, example_inputs):
        return self.inner(gm, example_inputs)


class BreakingCompiler(XCompile):
    name = "xcompile with injected graph breaks"

    def counter(self):
        return _Counter()

    def compile(self, fn, backend):
        import xcompile
        return xcompile.compile(fn, backend=backend)       # fullgraph=False


@pytest.fixture
def break_before_op(monkeypatch):
    def install(k: int):
        original = GraphBuilder.call

        def call(self, *args, **kwargs):
            n = self.__dict__.get("_injected_count", 0)
            self._injected_count = n + 1
            if n == k:
                _injected["n"] += 1
                raise Unsupported("injected graph break (test)", "test only")
            return original(self, *args, **kwargs)

        monkeypatch.setattr(GraphBuilder, "call", call)
    return install


_FULL = os.environ.get("XCOMPILE_TEST_FULL") == "1"
_CASES = [(c, i) for c, i in zip(ALL_CASES, CASE_IDS)]
# The full table is slow (each program is traced many times): a deterministic sample by default.
_SAMPLE = _CASES if _FULL else _CASES[::3]


@pytest.mark.parametrize("k", [0, 1, 2, 3] if _FULL else [0, 2])
@pytest.mark.parametrize("case", [c for c, _ in _SAMPLE], ids=[i for _, i in _SAMPLE])
def test_program_with_injected_breaks(case, k, break_before_op):
    break_before_op(k)
    run_case(case, BreakingCompiler())


def test_breaks_were_injected():
    assert _injected["n"] > 0 or not _SAMPLE
