"""Side effects end to end: what the compiled function leaves behind equals what eager leaves,
call after call, on the objects of *that* call (effect slots are fetched by the guard), with
every backend; graphs without side effects keep the direct entry."""
import collections

import pytest
import torch
from torch import nn

import xcompile
from xcompile import _C
from xcompile.testing import CompileCounter

from .util import same


@pytest.fixture(autouse=True)
def _reset():
    xcompile.reset()
    yield
    xcompile.reset()


# -- closure cells: the cell of the function being called, not the one traced --------------------------------
def _make_accumulator():
    total = torch.zeros(3)

    def fn(x):
        nonlocal total
        total = total + x
        return total * 1
    return fn


def test_nonlocal_rebind_goes_to_the_callers_cell():
    cnt = CompileCounter()
    f, g = _make_accumulator(), _make_accumulator()          # same code object, different cells
    cf = xcompile.compile(f, backend=cnt, fullgraph=True)
    cg = xcompile.compile(g, backend=cnt, fullgraph=True)
    x = torch.ones(3)
    cf(x)
    cf(x)
    cg(x)
    assert torch.equal(f.__closure__[0].cell_contents, torch.full((3,), 2.0))
    assert torch.equal(g.__closure__[0].cell_contents, torch.full((3,), 1.0))
    assert cnt.frame_count == 1                               # one entry serves both closures


# -- globals -------------------------------------------------------------------------------------------------
COUNTERS = {"calls": 0}
RESULT = None


def _bump_global(x):
    global RESULT
    RESULT = x * 2
    COUNTERS["calls"] = COUNTERS["calls"] + 1     # read and written: recompiles, stays correct
    return x + 1


def test_global_writes_applied_each_call():
    global RESULT
    RESULT = None
    COUNTERS["calls"] = 0
    f = xcompile.compile(_bump_global, backend="eager", fullgraph=True)
    for i in range(3):
        x = torch.randn(2)
        same(f(x), x + 1)
        same(RESULT, x * 2)
        assert COUNTERS["calls"] == i + 1


def _delete_global(x):
    global DOOMED
    del DOOMED
    return x * 2


def test_global_delete():
    global DOOMED
    DOOMED = 1
    f = xcompile.compile(_delete_global, backend="eager", fullgraph=True)
    same(f(torch.ones(2)), torch.full((2,), 2.0))
    assert "DOOMED" not in globals()


# -- modules -------------------------------------------------------------------------------------------------
class Caching(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        y = self.fc(x)
        self.last = y.detach()
        self.history = [y.sum().detach()]
        return y


class Stepping(nn.Module):
    def __init__(self):
        super().__init__()
        self.steps = 0

    def forward(self, x):
        self.steps = self.steps + 1          # the graph bakes the value read: must recompile
        return x * self.steps


def test_module_write_only_attributes_do_not_recompile():
    torch.manual_seed(0)
    m, e = Caching(), Caching()
    e.load_state_dict(m.state_dict())
    cnt = CompileCounter()
    cm = xcompile.compile(m, backend=cnt, fullgraph=True)
    for _ in range(4):
        x = torch.randn(2, 4)
        same(cm(x), e(x))
        same(m.last, e.last)
        same(m.history, e.history)
    assert cnt.frame_count == 1


def test_module_read_then_write_recompiles_and_stays_correct():
    m, e = Stepping(), Stepping()
    cnt = CompileCounter()
    cm = xcompile.compile(m, backend=cnt, fullgraph=True)
    for i in range(3):
        x = torch.randn(3)
        same(cm(x), e(x))
        assert m.steps == e.steps == i + 1
    assert cnt.frame_count == 3


class BufferCounter(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("n", torch.zeros((), dtype=torch.int64))

    def forward(self, x):
        self.n += 1                                  # in place: the buffer object stays the same
        return x * self.n


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_inplace_buffer_update_keeps_the_buffer_object(backend):
    m, e = BufferCounter(), BufferCounter()
    buf = m.n
    cnt = xcompile.testing.CompileCounterWithBackend(backend)
    cm = xcompile.compile(m, backend=cnt, fullgraph=True)
    for _ in range(3):
        x = torch.randn(3)
        same(cm(x), e(x))
    assert m.n is buf and int(m.n) == 3
    assert cnt.frame_count == 1


# -- every backend applies the same effects ------------------------------------------------------------------
class State:
    def __init__(self):
        self.x = torch.zeros(3)


def _effects_everywhere(s, xs, d, a):
    s.x = s.x + a
    xs.append(a * 2)
    d["k"] = xs[0] - a
    return a.sin()


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_effects_with_each_backend(backend):
    cnt = xcompile.testing.CompileCounterWithBackend(backend)
    f = xcompile.compile(_effects_everywhere, backend=cnt, fullgraph=True)
    for _ in range(2):
        a = torch.randn(3)
        s1, s2 = State(), State()
        xs1, xs2 = [torch.ones(3)], [torch.ones(3)]
        d1, d2 = {"k": None}, {"k": None}
        same(f(s1, xs1, d1, a), _effects_everywhere(s2, xs2, d2, a))
        same(s1.x, s2.x)
        same(xs1, xs2)
        same(d1, d2)
    assert cnt.frame_count == 1


# -- identity and the objects of each call -------------------------------------------------------------------
def _append_and_return(xs, x):
    xs.append(x * 2)
    return xs


def test_mutated_input_returned_is_the_same_object():
    f = xcompile.compile(_append_and_return, backend="eager", fullgraph=True)
    xs = [torch.ones(1)]
    out = f(xs, torch.ones(1))
    assert out is xs and len(xs) == 2
    ys = [torch.zeros(1)]
    assert f(ys, torch.ones(1)) is ys and len(ys) == 2 and len(xs) == 2


def _store_on(o, x):
    o.value = x + 1
    return x


def test_effects_target_the_object_passed_in_each_call():
    cnt = CompileCounter()
    f = xcompile.compile(_store_on, backend=cnt, fullgraph=True)
    a, b = State(), State()
    f(a, torch.ones(2))
    f(b, torch.zeros(2))
    same(a.value, torch.full((2,), 2.0))
    same(b.value, torch.ones(2))
    assert cnt.frame_count == 1


def _dict_keys_then_write(d, x):
    d["out"] = sum(v for k, v in d.items() if k != "out") * x
    return x


def test_dict_mutation_with_key_guard():
    cnt = CompileCounter()
    f = xcompile.compile(_dict_keys_then_write, backend=cnt, fullgraph=True)
    d1 = {"a": torch.ones(2), "out": None}
    f(d1, torch.full((2,), 3.0))
    same(d1["out"], torch.full((2,), 3.0))
    d2 = {"b": torch.ones(2), "out": None}            # same length, other key: new entry
    f(d2, torch.ones(2))
    assert list(d2) == ["b", "out"] and cnt.frame_count == 2


def _no_effects(x):
    return x * 2


def test_graphs_without_effects_keep_the_direct_entry():
    cnt = CompileCounter()
    xcompile.compile(_no_effects, backend=cnt, fullgraph=True)(torch.ones(2))
    xcompile.compile(_append_and_return, backend=cnt, fullgraph=True)([], torch.ones(2))
    plain = _C.cache_entries(_no_effects)[0].compiled_fn
    wrapped = _C.cache_entries(_append_and_return)[0].compiled_fn
    assert not hasattr(plain, "effect_plan")
    assert "list contents" in repr(wrapped.effect_plan)


def _ordered_default(od, dd, x):
    od["z"] = x
    od.move_to_end("a")
    dd["new"].append(x * 2)
    return x + 1


def test_ordered_dict_and_defaultdict_inputs():
    f = xcompile.compile(_ordered_default, backend="eager", fullgraph=True)
    od1, od2 = collections.OrderedDict(a=1, b=2), collections.OrderedDict(a=1, b=2)
    dd1, dd2 = collections.defaultdict(list), collections.defaultdict(list)
    x = torch.randn(2)
    same(f(od1, dd1, x), _ordered_default(od2, dd2, x))
    assert list(od1.items())[:2] == list(od2.items())[:2] and list(od1) == list(od2)
    assert type(od1) is collections.OrderedDict and list(dd1) == list(dd2)
    same(dd1["new"], dd2["new"])


def _append_then_len(a, b, x):
    a.append(x)
    return len(b) * x


def test_one_list_passed_twice_does_not_serve_two_lists():
    f = xcompile.compile(_append_then_len, backend="eager", fullgraph=True)
    xs = [torch.ones(1)]
    same(f(xs, xs, torch.ones(1)), torch.full((1,), 2.0))
    p, q = [torch.ones(1)], [torch.ones(1)]
    same(f(p, q, torch.ones(1)), torch.ones(1))        # eager: len(q) == 1
    assert len(p) == 2 and len(q) == 1


def _write_a_read_b(a, b, x):
    a.value = x * 2
    return b.value + 1


def test_one_object_passed_twice_does_not_serve_two_objects():
    f = xcompile.compile(_write_a_read_b, backend="eager", fullgraph=True)
    o = State()
    same(f(o, o, torch.ones(2)), torch.full((2,), 3.0))
    p, q = State(), State()
    q.value = torch.zeros(2)
    same(f(p, q, torch.ones(2)), torch.ones(2))        # reads q's own value
    same(p.value, torch.full((2,), 2.0))
    same(q.value, torch.zeros(2))
