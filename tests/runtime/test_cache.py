"""The per-code cache: entries, order, states, clearing, entry objects and output plans."""
import gc
import weakref

import pytest
import torch

import xcompile._C as C


def always_entry(fn=None, n_slots=0, plan=("const", None)):
    return C.CacheEntry.graph(C.RootGuard(n_slots), fn or (lambda: ()), 0, plan)


def eq_entry(index, value, out):
    """An entry whose guard is locals[index] == value and whose result is the constant `out`."""
    root = C.RootGuard(0)
    root.local(index, "a").add_equals_match(value, f"a == {value!r}")
    return C.CacheEntry.graph(root, lambda: (), 0, ("const", out))


def f(a):
    return ("eager", a)


def test_entries_order_and_move_to_front():
    e1, e2, e3 = eq_entry(0, 1, "one"), eq_entry(0, 2, "two"), eq_entry(0, 3, "three")
    for e in (e1, e2, e3):
        C.cache_add(f.__code__, e)
    assert C.cache_entries(f.__code__) == [e3, e2, e1]
    assert C.cache_entries(f) == [e3, e2, e1]  # a function stands for its code
    cf = C.CompiledFunction(f, None)
    assert cf(1) == "one"
    assert C.cache_entries(f) == [e1, e3, e2]
    assert cf(2) == "two" and cf(2) == "two"
    assert C.cache_entries(f) == [e2, e1, e3]
    assert (e1.hits, e2.hits, e3.hits) == (1, 2, 0)
    assert cf(4) == ("eager", 4)  # miss, no callback: runs f
    assert C.cache_entries(f) == [e2, e1, e3]


def test_clear_and_clear_all():
    def g(a):
        return a

    C.cache_add(f, always_entry())
    C.cache_add(g, always_entry())
    C.cache_clear(f)
    assert C.cache_entries(f) == [] and len(C.cache_entries(g)) == 1
    C.cache_add(f, always_entry())
    C.cache_clear_all()
    assert C.cache_entries(f) == [] and C.cache_entries(g) == []
    C.cache_clear(lambda: None)  # no state yet: fine


def test_states():
    def g():
        pass

    assert C.get_code_state(g) == C.NORMAL == 0
    C.set_code_state(g.__code__, C.SKIP)
    assert C.get_code_state(g) == C.SKIP == 1
    C.set_code_state(g, C.NO_NEW)
    assert C.get_code_state(g.__code__) == C.NO_NEW == 2
    C.cache_clear(g)
    assert C.get_code_state(g) == C.NORMAL  # clearing lifts the size limit
    C.set_code_state(g, C.SKIP_ALL)
    assert C.get_code_state(g) == C.SKIP_ALL == 3
    C.cache_clear(g)
    assert C.get_code_state(g) == C.SKIP_ALL          # kept, as SKIP is
    with pytest.raises(ValueError):
        C.set_code_state(g, 4)
    with pytest.raises(TypeError):
        C.get_code_state(42)
    with pytest.raises(TypeError):
        C.cache_add(g, "not an entry")


def test_skip_all_runs_everything_below_without_the_callback():
    """SKIP runs a frame eagerly and still hooks the frames it calls; SKIP_ALL hooks none of them
    (torch's higher-order ops run torch.compile below themselves)."""
    def inner(x):
        return x + 1

    def skipped(x):
        return inner(x)

    def skipped_all(x):
        return inner(x)

    C.set_code_state(skipped, C.SKIP)
    C.set_code_state(skipped_all, C.SKIP_ALL)
    seen = []
    prev = C.set_callback(lambda code, *a: seen.append(code.co_name))
    try:
        assert skipped(1) == 2
        assert skipped_all(1) == 2
    finally:
        C.set_callback(prev)
    assert seen == ["inner"]                       # from skipped only


def test_entry_objects():
    root = C.RootGuard(1)
    compiled = lambda x: (x,)  # noqa: E731
    plan = ("out", 0)
    g = C.CacheEntry.graph(root, compiled, 1, plan)
    assert g.kind == "graph" and g.guard is root and g.compiled_fn is compiled
    assert g.runner is None and g.output_plan is plan and g.hits == 0 and g.n_inputs == 1
    runner = lambda *a: None  # noqa: E731
    c = C.CacheEntry.code(root, runner)
    assert c.kind == "code" and c.runner is runner and c.compiled_fn is None and c.output_plan is None
    with pytest.raises(ValueError):
        C.CacheEntry.graph(root, compiled, 2, plan)  # more inputs than slots
    with pytest.raises(ValueError):
        C.CacheEntry.graph(root, 3, 1, plan)  # not callable
    with pytest.raises(TypeError):
        C.CacheEntry.graph("root", compiled, 1, plan)


def test_entries_die_with_their_code():
    ns = {}
    exec("def h(x):\n    return x\n", ns)  # noqa: S102  (a program made by the test)

    class Fn:
        def __call__(self):
            return ()

    artifact = Fn()
    ref = weakref.ref(artifact)
    C.cache_add(ns["h"], always_entry(artifact))
    del artifact
    gc.collect()
    assert ref() is not None  # held by the cache
    del ns["h"]
    gc.collect()
    assert ref() is None  # code object freed -> its extra and entries freed


def test_cache_clear_all_survives_reentrant_frees():
    # Releasing an entry frees the only function holding another cached code object.
    ns = {}
    exec("def a(x):\n    return x\ndef b(x):\n    return x\n", ns)  # noqa: S102  (a program made by the test)
    a, b = ns.pop("a"), ns.pop("b")
    holder = lambda: b  # noqa: F821,E731  (keeps b, and so b's code, alive through the entry)
    C.cache_add(a, always_entry(holder))
    C.cache_add(b, always_entry())
    del holder, b
    C.cache_clear_all()
    assert C.cache_entries(a) == []


# ---- output plans ---------------------------------------------------------------------------

def run_plan(plan, outs, slot_values=(1, 2)):
    def target(p, q):
        raise AssertionError("hit expected")

    root = C.RootGuard(2)
    root.local(0, "p").set_slot(0)
    root.local(1, "q").set_slot(1)
    C.cache_add(target, C.CacheEntry.graph(root, lambda p, q: outs, 2, plan))
    try:
        return C.CompiledFunction(target, None)(*slot_values)
    finally:
        C.cache_clear(target)


@pytest.mark.parametrize("plan,outs,expected", [
    (("out", 0), (7,), 7),
    (("out", 1), [7, 8], 8),
    (("const", "c"), (), "c"),
    (("slot", 1), (), 2),
    (("tuple", []), (), ()),
    (("tuple", [("out", 0), ("slot", 0)]), (5,), (5, 1)),
    (("list", [("out", 0), ("const", 3)]), (5,), [5, 3]),
    (("dict", ["a", 1], [("out", 0), ("tuple", [("slot", 1)])]), (5,), {"a": 5, 1: (2,)}),
])
def test_output_plans(plan, outs, expected):
    assert run_plan(plan, outs) == expected


def test_output_plan_errors():
    with pytest.raises(IndexError):
        run_plan(("out", 3), (1,))
    with pytest.raises(TypeError, match="tuple or list"):
        run_plan(("out", 0), torch.ones(1))
    root = C.RootGuard(1)
    for bad in [("what", 1), ("out", -1), ("slot", 1), ("tuple", 3), "out", ("dict", ["a"], [])]:
        with pytest.raises((ValueError, TypeError)):
            C.CacheEntry.graph(root, lambda: (), 0, bad)


def test_unfilled_input_slot_is_an_error():
    def target(p):
        raise AssertionError

    root = C.RootGuard(1)  # nothing sets slot 0
    C.cache_add(target, C.CacheEntry.graph(root, lambda p: (p,), 1, ("out", 0)))
    with pytest.raises(RuntimeError, match="slot 0"):
        C.CompiledFunction(target, None)(1)


def test_namedtuple_plan_is_built_without_the_callback():
    import collections

    Pair = collections.namedtuple("Pair", "a b")

    def target(p):
        raise AssertionError

    root = C.RootGuard(1)
    root.local(0, "p").set_slot(0)
    C.cache_add(target, C.CacheEntry.graph(root, lambda p: (p, p + 1), 1,
                                           ("namedtuple", Pair, [("out", 0), ("out", 1)])))
    seen = []
    gc.collect()          # no weakref callback (e.g. a WeakSet's "remove") runs while the callback is set
    gc.disable()
    prev = C.set_callback(lambda code, *a: seen.append(code))
    try:
        out = target(1)  # hit in the eval-frame hook, callback active
    finally:
        C.set_callback(prev)
        gc.enable()
    assert out == Pair(1, 2) and type(out) is Pair
    assert Pair.__new__.__code__ not in seen  # Pair.__new__ (Python code) ran without a callback


def test_code_objects_with_other_extras_free_cleanly():
    """torch.compile also stores state on code objects; freeing those codes calls our free
    function with an empty (NULL) slot. Regression test for a crash."""
    import subprocess
    import sys

    script = (
        "import gc, torch, xcompile._C as C\n"
        "def mine(x):\n    return x\n"
        "C.cache_add(mine, C.CacheEntry.graph(C.RootGuard(0), lambda: (), 0, ('const', 1)))\n"
        "ns = {}\n"
        "exec('def theirs(x):\\n    return x + 1\\n', ns)\n"
        "f = torch.compile(ns['theirs'], backend='eager')\n"
        "f(torch.ones(2))\n"
        "torch._dynamo.reset()\n"
        "del f, ns\n"
        "gc.collect()\n"
        "C.cache_clear_all()\n"
        "print('ok')\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-2000:]
