"""A list that outlives the call and is only appended to (``history.append(loss)``) needs no
guard on its length or items: one compile serves every call, and the appends land on the real
list after the graph.  Reading the list (len, iteration, indexing, ``in``, truth) still guards
its length, so a frame that appends and then reads gives eager's answer on every call."""
import pytest
import torch
from torch import nn

import xcompile
from xcompile.testing import CompileCounter

from .util import same


@pytest.fixture(autouse=True)
def _reset():
    xcompile.reset()
    yield
    xcompile.reset()


def _run_both(make, calls=5, *, fullgraph=True, args=lambda i: (torch.randn(3),)):
    """Build the program twice (eager, compiled); call each ``calls`` times on the same inputs;
    compare every result and the state (``make`` returns (fn, state getter))."""
    fe, state_e = make()
    fc, state_c = make()
    cnt = CompileCounter()
    cf = xcompile.compile(fc, backend=cnt, fullgraph=fullgraph)
    for i in range(calls):
        a = args(i)
        same(cf(*a), fe(*a), f"call {i}")
        same(state_c(), state_e(), f"state after call {i}")
    return cnt


def _global_program(body):
    """``body`` with a private global HISTORY (a fresh list) per build."""
    def make():
        g = {"HISTORY": [], "torch": torch}
        fn = type(body)(body.__code__, g, body.__name__)
        return fn, lambda: g["HISTORY"]
    return make


def _append_only(x):
    y = x * 2
    HISTORY.append(y.sum())         # noqa: F821 (a private global, see _global_program)
    return y


def test_append_to_a_global_list_compiles_once():
    cnt = _run_both(_global_program(_append_only))
    assert cnt.frame_count == 1


def test_guards_of_an_append_only_list_do_not_mention_length_or_items():
    fn, _ = _global_program(_append_only)()
    c = xcompile.compile(fn, backend="eager")
    c(torch.randn(3))
    c(torch.randn(3))
    out = xcompile.explain(fn)(torch.randn(3))
    guards = "\n".join(str(g) for g in out.out_guards)
    assert "LENGTH_CHECK" not in guards and "G['HISTORY'][" not in guards
    assert "G['HISTORY']" in guards                      # its type is still checked


def _extend_and_clear(x):
    if x.shape[0] > 100:
        HISTORY.clear()             # noqa: F821
    HISTORY.extend([x.sum(), x.mean()])   # noqa: F821
    return x + 1


def test_extend_compiles_once():
    cnt = _run_both(_global_program(_extend_and_clear))
    assert cnt.frame_count == 1


def _clear_then_append(x):
    HISTORY.clear()                 # noqa: F821
    HISTORY.append(x * 3)           # noqa: F821
    HISTORY.append(x.sum())         # noqa: F821
    return x


def test_clear_then_append_compiles_once():
    cnt = _run_both(_global_program(_clear_then_append))
    assert cnt.frame_count == 1


def _append_then_len(x):
    HISTORY.append(x.sum())         # noqa: F821
    return x * len(HISTORY)         # noqa: F821


def test_append_then_read_len_guards_the_length_and_matches_eager():
    cnt = _run_both(_global_program(_append_then_len), calls=4, fullgraph=False)
    assert cnt.frame_count == 4                          # each call sees a new length (as torch.compile)


def _read_then_append(x):
    if HISTORY:                     # noqa: F821  (truth reads the length)
        x = x + HISTORY[-1]         # noqa: F821
    HISTORY.append(x.sum())         # noqa: F821
    return x


def test_truth_and_indexing_before_the_append_match_eager():
    _run_both(_global_program(_read_then_append), calls=3, fullgraph=False)


def _append_then_iterate(x):
    HISTORY.append(x.sum())         # noqa: F821
    total = sum(HISTORY)            # noqa: F821
    return x + total, x.sum() in HISTORY   # noqa: F821


def test_append_then_iterate_matches_eager():
    _run_both(_global_program(_append_then_iterate), calls=3, fullgraph=False)


def test_list_passed_as_argument():
    def step(x, hist):
        hist.append(x * 2)
        hist.append(x.sum())
        return x - 1

    def make():
        hist = []
        return (lambda x: step(x, hist)), (lambda: hist)
    fe, state_e = make()
    hist_c = []
    cnt = CompileCounter()
    cf = xcompile.compile(step, backend=cnt, fullgraph=True)
    for i in range(5):
        x = torch.randn(3)
        same(cf(x, hist_c), fe(x))
        same(hist_c, state_e())
    assert cnt.frame_count == 1
    other = [torch.ones(2)]                              # another list: appends land on *it*
    cf(torch.zeros(3), other)
    assert len(other) == 3 and len(hist_c) == 10 and cnt.frame_count == 1


def test_same_list_through_two_arguments_reading_one_of_them():
    def f(x, a, b):
        a.append(x)
        return x * len(b)
    cnt = CompileCounter()
    cf = xcompile.compile(f, backend=cnt, fullgraph=True)
    la, le = [], []
    for _ in range(3):
        x = torch.randn(2)
        same(cf(x, la, la), f(x, le, le))
    same(la, le)
    p, q = [1], [1]
    same(cf(torch.ones(2), p, q), torch.ones(2))        # not the same list any more: len(q) == 1
    assert len(p) == 2 and len(q) == 1


class Tracker(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.history = []

    def forward(self, x):
        y = self.lin(x).relu()
        self.history.append(y.mean())
        return y


def test_module_list_attribute_append_compiles_once():
    torch.manual_seed(0)
    me = Tracker()
    mc = Tracker()
    mc.load_state_dict(me.state_dict())
    cnt = CompileCounter()
    cm = xcompile.compile(mc, backend=cnt, fullgraph=True)
    for _ in range(5):
        x = torch.randn(2, 4)
        same(cm(x), me(x))
    same(mc.history, me.history)
    assert cnt.frame_count == 1


def test_appends_across_a_graph_break_in_program_order():
    def make():
        hist = []

        def f(x):
            hist.append(x + 1)
            xcompile.graph_break()
            hist.append(x * 2)
            return x
        return f, lambda: hist
    fe, state_e = make()
    fc, state_c = make()
    cnt = CompileCounter()
    cf = xcompile.compile(fc, backend=cnt)
    for _ in range(4):
        x = torch.randn(3)
        same(cf(x), fe(x))
        same(state_c(), state_e())
    assert cnt.frame_count == 2                           # the prefix and the resume, once each
