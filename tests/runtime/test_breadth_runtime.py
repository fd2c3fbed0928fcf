"""Runtime pieces the frontend-breadth work added: the dict-keys leaf, the closure-cell accessor
and namedtuple / structseq output plans."""
import collections
from collections import OrderedDict

import pytest
import torch

import xcompile._C as C

from .runtime_helpers import check


def _keys_guard(keys):
    root = C.RootGuard(0)
    root.local(0, "d").add_dict_keys(tuple(keys), f"DICT_KEYS {keys!r}")
    return root


def test_dict_keys_same_keys_same_order_pass():
    root = _keys_guard(("a", "b"))
    assert check(root, {"a": 1, "b": 2})
    assert check(root, {"a": torch.ones(1), "b": None})
    assert check(root, OrderedDict(a=1, b=2))          # dict subclasses are dicts


@pytest.mark.parametrize("d", [
    {"a": 1, "c": 2},            # same length, another key (the bug a length check misses)
    {"b": 1, "a": 2},            # same keys, another order (iteration was unrolled in order)
    {"a": 1},                    # shorter
    {"a": 1, "b": 2, "c": 3},    # longer
    {},
])
def test_dict_keys_different_keys_fail(d):
    assert not check(_keys_guard(("a", "b")), d)


def test_dict_keys_non_dict_fails_without_raising():
    root = _keys_guard(("a",))
    assert not check(root, ["a"])
    assert not check(root, None)


def test_dict_keys_compares_by_type_then_value():
    root = _keys_guard((1, "x"))
    assert check(root, {1: 0, "x": 0})
    assert check(root, {int("1"): 0, "".join(["x"]): 0})     # equal, not identical
    assert not check(root, {1.0: 0, "x": 0})                  # 1.0 == 1 but another type
    assert not check(root, {True: 0, "x": 0})


class _BadEq:
    def __hash__(self):
        return 0

    def __eq__(self, other):
        raise RuntimeError("boom")


def test_dict_keys_raising_eq_fails_cleanly():
    root = C.RootGuard(0)
    k = _BadEq()
    root.local(0, "d").add_dict_keys((k,), "DICT_KEYS")
    assert check(root, {k: 1})                # identical key: never compared
    assert not check(root, {_BadEq(): 1})     # == raises: the guard fails, no error leaks


def test_dict_keys_rejects_non_tuple():
    with pytest.raises(TypeError):
        C.RootGuard(0).local(0, "d").add_dict_keys(["a"], "x")


def _make_closure():
    v = 1

    def f():
        return v
    return f


def test_closure_cell_accessor_fills_the_cell():
    f = _make_closure()
    root = C.RootGuard(1)
    node = root.closure_cell(0, "v")
    node.set_slot(0)
    assert "closure[0]" in root.dump()
    entry = C.CacheEntry.graph(root, lambda cell: (cell,), 1, ("out", 0))
    C.cache_add(f.__code__, entry)
    cf = C.CompiledFunction(f, None)
    assert cf() is f.__closure__[0]
    g = _make_closure()                       # same code, another cell
    assert C.CompiledFunction(g, None)() is g.__closure__[0]


Point = collections.namedtuple("Point", "x y")


def _plan_entry(plan, outs):
    return C.CacheEntry.graph(C.RootGuard(0), lambda: outs, 0, plan)


def _run(entry):
    def f():
        return "eager"
    C.cache_add(f.__code__, entry)
    return C.CompiledFunction(f, None)()


def test_namedtuple_output_plan():
    t = torch.ones(2)
    r = _run(_plan_entry(("namedtuple", Point, [("out", 0), ("const", 3)]), (t,)))
    assert type(r) is Point and r.x is t and r.y == 3


def test_structseq_output_plan():
    x = torch.randn(3, 4)
    eager = torch.max(x, 1)
    r = _run(_plan_entry(("namedtuple", type(eager), [("out", 0), ("out", 1)]), tuple(eager)))
    assert type(r) is type(eager)
    assert r.values is eager.values and r.indices is eager.indices


def test_nested_namedtuple_plan():
    r = _run(_plan_entry(("tuple", [("namedtuple", Point, [("const", 1), ("list", [("out", 0)])])]), (5,)))
    assert r == (Point(1, [5]),)


@pytest.mark.parametrize("plan", [
    ("namedtuple", list, []),             # not a tuple subclass
    ("namedtuple", Point),                # no parts
    ("namedtuple", "Point", []),          # not a type
])
def test_bad_namedtuple_plans(plan):
    with pytest.raises(ValueError):
        C.CacheEntry.graph(C.RootGuard(0), lambda: (), 0, plan)


def test_rewatch_rebaselines_module_tree_and_dict_leaves():
    m = torch.nn.Linear(2, 2)
    root = C.RootGuard(0)
    root.local(0, "m").add_module_tree(m, "MODULE_TREE")
    d = {"a": 1}
    root.local(1, "d").add_dict_unchanged(d, "DICT_UNCHANGED")
    assert check(root, m, d)
    m.cache = torch.ones(1)                   # what a side effect of the entry does
    d["b"] = 2
    assert not check(root, m, d)
    root.rewatch()
    assert check(root, m, d)
    m.other = 1                               # later changes are still seen
    assert not check(root, m, d)


def test_rewatch_sees_submodules_added_before_it():
    m = torch.nn.Sequential(torch.nn.Linear(2, 2))
    root = C.RootGuard(0)
    root.local(0, "m").add_module_tree(m, "MODULE_TREE")
    m.append(torch.nn.ReLU())
    root.rewatch()
    assert check(root, m)
    m[1].flag = True                          # the new submodule's __dict__ is watched too
    assert not check(root, m)


def test_rewatch_rebaselines_changed_dicts_and_watches_new_ones():
    """rewatch() after an entry's effects: only the dicts that changed are snapshotted again (no
    Python call, no re-enumeration), and a dict newly stored in a module's __dict__ is watched."""
    m = torch.nn.Sequential(torch.nn.Linear(2, 2))
    root = C.RootGuard(0)
    root.local(0, "m").add_module_tree(m, "MODULE_TREE")
    m[0].counter = 1
    assert not check(root, m)
    root.rewatch()
    assert check(root, m)
    m[0].state = {"k": 1}
    root.rewatch()
    assert check(root, m)
    m[0].state["k"] = 2                       # the new dict is watched
    assert not check(root, m)


def test_dict_unchanged_rewatch_keeps_an_unchanged_baseline():
    d = {"a": 1}
    root = C.RootGuard(0)
    root.local(0, "d").add_dict_unchanged(d, "DICT_UNCHANGED")
    root.rewatch()
    assert check(root, d)
    d["a"] = 2
    assert not check(root, d)
    root.rewatch()
    assert check(root, d)
