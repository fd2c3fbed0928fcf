"""Sets from outside the frame (finding FH7): writes (add / discard / update / clear) are recorded
without reading the set and replayed after the graph; only the set's type is guarded, so a set that
grows every call does not recompile.  Reading the contents is a graph break that says why."""
from __future__ import annotations

import pytest
import torch
import torch.nn as nn

import xcompile
from xcompile.testing import CompileCounter


@pytest.fixture(autouse=True)
def _reset():
    xcompile.reset()
    yield
    xcompile.reset()


SEEN: set = set()


def _add_global(x, name):
    SEEN.add(name)
    SEEN.discard("gone")
    return x * 2


def test_global_set_writes_are_replayed_without_recompiling():
    SEEN.clear()
    SEEN.update({"gone", "kept"})
    cnt = CompileCounter()
    f = xcompile.compile(_add_global, backend=cnt)
    for i in range(4):
        SEEN.add(i)                               # other contents each call: not guarded
        x = torch.randn(3)
        torch.testing.assert_close(f(x, "n"), x * 2)
    assert SEEN == {"kept", "n", 0, 1, 2, 3}
    assert cnt.frame_count == 1


def test_set_argument_update_and_clear_in_order():
    def f(s, x):
        s.update(["a", "b"], ("c",))
        s.clear()
        s.add("d")
        s.add(3)
        s.discard("zz")
        return x + 1
    cnt = CompileCounter()
    cf = xcompile.compile(f, backend=cnt)
    for _ in range(2):
        a, b = {"x"}, {"x"}
        torch.testing.assert_close(cf(a, torch.ones(2)), f(b, torch.ones(2)))
        assert a == b == {"d", 3}
    assert cnt.frame_count == 1


def test_register_buffer_in_forward():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("a", torch.zeros(2))

        def forward(self, x):
            self.register_buffer("cache", x * 2, persistent=False)
            self.register_buffer("a", self.a + 1)          # persistent: discard from the set
            return self.cache + self.a

    torch.manual_seed(0)
    m, e = M(), M()
    cnt = CompileCounter()
    cm = xcompile.compile(m, backend=cnt)
    for _ in range(2):
        x = torch.randn(2)
        torch.testing.assert_close(cm(x), e(x))
        torch.testing.assert_close(m.cache, e.cache)
        torch.testing.assert_close(m.a, e.a)
        assert m._non_persistent_buffers_set == e._non_persistent_buffers_set == {"cache"}
        assert list(m.state_dict()) == list(e.state_dict()) == ["a"]
    assert cnt.frame_count == 2                 # the module tree changed after call 1 (torch: 2 too)


def test_state_dict_write_then_read_in_one_trace():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("a", torch.zeros(2))

        def forward(self, x):
            self._buffers["a"] = self.a + 1           # the later read sees the new buffer, and the
            return x + self.a                         # next call does not reuse the baked old one

    m, e = M(), M()
    cm = xcompile.compile(m, backend=CompileCounter())
    for _ in range(3):
        x = torch.randn(2)
        torch.testing.assert_close(cm(x), e(x))
        torch.testing.assert_close(m.a, e.a)


def test_reading_a_set_from_outside_breaks_with_its_reason():
    acts = {"relu"}

    def f(x, act):
        y = x + 1
        if act in acts:
            return y.relu()
        return y

    from xcompile import log

    class Seen:
        def __init__(self):
            self.reasons = []

        def on_break(self, record):
            self.reasons.append(record.reason)

        def on_graph(self, code, gm, guards):
            pass

    seen = Seen()
    cf = xcompile.compile(f, backend=CompileCounter())
    x = torch.randn(4)
    log.add_observer(seen)
    try:
        torch.testing.assert_close(cf(x, "relu"), f(x, "relu"))
        torch.testing.assert_close(cf(x, "tanh"), f(x, "tanh"))
    finally:
        log.remove_observer(seen)
    assert seen.reasons and all("reading the contents of a set from outside the frame" in r
                                for r in seen.reasons), seen.reasons


def test_unhashable_add_raises_like_eager():
    s = set()

    def f(x):
        try:
            s.add([1])
        except TypeError:
            return x - 1
        return x

    cnt = CompileCounter()
    x = torch.randn(2)
    torch.testing.assert_close(xcompile.compile(f, backend=cnt)(x), x - 1)
    assert s == set() and cnt.frame_count == 1
