"""Guard trees: accessors, memoization, ordering, root leaves, dump and failure reporting."""
import collections

import pytest
import torch

import xcompile._C as C

from .runtime_helpers import check

# ---- accessors ------------------------------------------------------------------------------

def test_local_accessor_and_out_of_range():
    root = C.RootGuard(0)
    root.local(2, "c").add_equals_match(3, "c == 3")
    assert check(root, 1, 2, 3)
    assert not check(root, 1, 2)
    assert root.last_failure() == "cannot read L['c']"
    assert root.check((1, 2, 3), {}, {})  # tuples work too
    with pytest.raises(TypeError):
        root.check({"c": 3}, {}, {})


def test_global_accessor_reads_globals_then_builtins():
    root = C.RootGuard(0)
    root.global_("len").add_id_match(len, "len is builtin len")
    assert check(root, g={}, b={"len": len})
    assert not check(root, g={"len": max}, b={"len": len})  # globals shadow builtins
    assert not check(root, g={}, b={})
    assert root.last_failure() == "cannot read G['len']"
    assert not check(root, g=None, b=None)  # non-dicts fail cleanly


def test_closure_accessor():
    def make():
        x = 10
        y = []

        def inner():
            return x, y
        return inner

    inner = make()
    names = inner.__code__.co_freevars
    root = C.RootGuard(0)
    root.closure(names.index("x"), "x").add_equals_match(10, "x == 10")
    root.closure(names.index("y"), "y").add_type_match(list, "y is list")
    assert check(root, closure=inner.__closure__)
    assert not check(root, closure=None)
    assert not check(root, closure=(inner.__closure__[0],))
    empty_cell = (lambda: None).__closure__  # None: no cells
    assert empty_cell is None

    def make_empty():
        def inner():
            return z
        if False:
            z = 1
        return inner

    assert not check(root, closure=make_empty().__closure__ + make_empty().__closure__)


def test_attr_accessor():
    class A:
        def __init__(self):
            self.w = 3

        @property
        def boom(self):
            raise RuntimeError("property raised")

    root = C.RootGuard(0)
    a = root.local(0, "a")
    a.attr("w").add_equals_match(3, "a.w == 3")
    assert check(root, A())
    obj = A()
    del obj.w
    assert not check(root, obj)
    assert root.last_failure() == "cannot read L['a'].w"
    root2 = C.RootGuard(0)
    root2.local(0, "a").attr("boom").add_type_match(int, "never")
    assert not check(root2, A())  # an exception inside a guard never escapes


def test_item_accessor_fast_paths_and_generic():
    class Seq:
        def __getitem__(self, i):
            return i * 2

    root = C.RootGuard(0)
    root.local(0, "s").item(1).add_equals_match(2, "s[1] == 2")
    root.local(0, "s").item(-1).add_equals_match(3, "s[-1] == 3")
    assert check(root, [1, 2, 3])
    assert check(root, (1, 2, 3))
    assert not check(root, [1, 2])
    assert not check(root, [])
    root_generic = C.RootGuard(0)
    root_generic.local(0, "s").item(4).add_equals_match(8, "s[4] == 8")
    assert check(root_generic, Seq())
    assert not check(root_generic, 5)  # not subscriptable: fails cleanly


def test_item_accessor_dicts():
    root = C.RootGuard(0)
    node = root.local(0, "d")
    node.item("k").add_equals_match(1, "d['k'] == 1")
    node.item(("t", 1)).add_equals_match(2, "d[('t', 1)] == 2")
    assert check(root, {"k": 1, ("t", 1): 2})
    assert check(root, collections.OrderedDict(k=1, **{}) | {("t", 1): 2})
    assert not check(root, {"k": 1})
    assert root.last_failure() == "cannot read L['d'][('t', 1)]"
    unhashable = C.RootGuard(0)
    unhashable.local(0, "d").item(["list"]).add_equals_match(1, "never")
    assert not check(unhashable, {"k": 1})


def test_children_are_memoized_by_key_and_type():
    root = C.RootGuard(0)
    assert root.local(0, "a") is root.local(0, "a")
    assert root.local(0, "a") is not root.local(1, "b")
    assert root.global_("g") is root.global_("g")
    assert root.closure(0, "c") is root.closure(0, "c")
    node = root.local(0, "a")
    assert node.attr("x") is node.attr("x")
    assert node.item(1) is node.item(1)
    assert node.item(1) is not node.item(True)
    assert node.item(1) is not node.item(1.0)
    assert node.item("x") is not node.attr("x")
    assert node.item(1).path == "L['a'][1]" and node.attr("x").path == "L['a'].x"


def test_float_compare_leaf():
    # a symbolic float's guards (frontend/shapes.py: FLOAT_COMPARE): relations to constants, as
    # Python compares (nan: only != holds); an int or a float subclass fails
    root = C.RootGuard(0)
    root.local(0, "lr").add_float_compare([(3, 0.0), (0, 0.75), (4, 0.5)], "0 <= lr < 0.75, lr != 0.5")
    for v, ok in [(0.0, True), (-0.0, True), (0.3, True), (0.74, True), (0.75, False), (-1e-300, False),
                  (0.5, False), (float("nan"), False), (float("-inf"), False), (0, False), (True, False)]:
        assert check(root, v) is ok, v
    root = C.RootGuard(0)
    root.local(0, "m").add_float_compare([(4, 0.0)], "m != 0")
    assert check(root, float("nan")) and check(root, 0.9) and not check(root, -0.0)
    with pytest.raises(ValueError):
        C.RootGuard(0).local(0, "x").add_float_compare([(7, 1.0)], "bad")


# ---- ordering, reporting --------------------------------------------------------------------

def test_failed_leaf_moves_to_front():
    root = C.RootGuard(0)
    n = root.local(0, "v")
    n.add_type_match(int, "TYPE int")
    n.add_equals_match(5, "EQ 5")
    assert root.dump().splitlines()[2:] == ["    TYPE int", "    EQ 5"]
    assert root.check_verbose([6], {}, {}) == (False, "EQ 5")
    assert root.dump().splitlines()[2:] == ["    EQ 5", "    TYPE int"]
    assert root.check_verbose([5], {}, {}) == (True, "")
    assert root.last_failure() == "EQ 5"  # the most recent failure is remembered


def test_failed_child_moves_to_front():
    root = C.RootGuard(0)
    root.local(0, "a").add_equals_match(1, "a == 1")
    root.local(1, "b").add_equals_match(2, "b == 2")
    assert not check(root, 1, 3)
    assert [ln.strip() for ln in root.dump().splitlines()[1:]] == ["L['b']", "b == 2", "L['a']", "a == 1"]


def test_last_failure_empty_until_something_fails():
    root = C.RootGuard(0)
    root.local(0, "a").add_equals_match(1, "a == 1")
    assert root.last_failure() == ""
    assert check(root, 1)
    assert root.last_failure() == ""


def test_dump_format():
    root = C.RootGuard(2)
    root.add_global_state("GLOBAL_STATE")
    x = root.local(0, "x")
    x.add_tensor_match(torch.ones(2), "TENSOR_MATCH: L['x']")
    x.set_slot(0)
    root.local(1, "m").attr("w").set_slot(1)
    root.add_no_aliasing([0, 1], "NO_ALIASING: L['x'], L['m'].w")
    assert root.dump() == (
        "RootGuard(n_slots=2)\n"
        "  GLOBAL_STATE\n"
        "  L['x']  -> slot 0\n"
        "    TENSOR_MATCH: L['x']\n"
        "  L['m']\n"
        "    L['m'].w  -> slot 1\n"
        "  NO_ALIASING: L['x'], L['m'].w\n"
    )
    assert root.n_slots == 2
    with pytest.raises(AttributeError):
        root.n_slots = 3
    with pytest.raises((IndexError, ValueError)):
        x.set_slot(2)
    with pytest.raises((IndexError, ValueError)):
        root.add_no_aliasing([0, 5], "bad")


# ---- root leaves ----------------------------------------------------------------------------

def test_no_aliasing():
    root = C.RootGuard(3)
    for i in range(3):
        root.local(i, f"t{i}").set_slot(i)
    root.add_no_aliasing([0, 1, 2], "NO_ALIASING")
    a, b, c = torch.ones(1), torch.ones(1), torch.ones(1)
    assert check(root, a, b, c)
    assert not check(root, a, b, a)
    assert root.last_failure() == "NO_ALIASING"
    assert check(root, a, b, c)


@pytest.mark.parametrize("n", [17, 300])
def test_no_aliasing_over_many_slots(n):
    """Past 16 slots the objects are sorted, not compared pair by pair (an optimizer's 1,500)."""
    root = C.RootGuard(n)
    for i in range(n):
        root.local(i, f"t{i}").set_slot(i)
    root.add_no_aliasing(list(range(n)), "NO_ALIASING")
    ts = [torch.ones(1) for _ in range(n)]
    assert check(root, *ts)
    for i, j in ((0, n - 1), (n // 2, n // 2 + 1), (n - 2, 3)):
        aliased = list(ts)
        aliased[i] = aliased[j]
        assert not check(root, *aliased), (i, j)
        assert root.last_failure() == "NO_ALIASING"
    assert check(root, *ts)


def test_same_object():
    root = C.RootGuard(2)
    root.local(0, "a").set_slot(0)
    root.local(1, "b").set_slot(1)
    root.add_same_object([0, 1], "SAME: L['a'] is L['b']")
    x = torch.ones(1)
    assert check(root, x, x)
    assert not check(root, x, torch.ones(1))
    assert root.last_failure() == "SAME: L['a'] is L['b']"
    with pytest.raises(ValueError):
        root.add_same_object([], "empty")
    with pytest.raises((IndexError, ValueError)):
        root.add_same_object([0, 2], "bad")


@pytest.mark.parametrize("context", [
    pytest.param(torch.no_grad, id="no_grad"),
    pytest.param(torch.inference_mode, id="inference_mode"),
    pytest.param(lambda: torch.autocast("cpu", dtype=torch.bfloat16), id="autocast-cpu"),
])
def test_global_state(context):
    root = C.RootGuard(0)
    root.add_global_state("GLOBAL_STATE")
    assert check(root)
    with context():
        assert not check(root)
        inner = C.RootGuard(0)
        inner.add_global_state("GLOBAL_STATE (inside)")
        assert check(inner)
    assert not check(inner)
    assert check(root)


def test_global_state_autocast_dtype():
    with torch.autocast("cpu", dtype=torch.bfloat16):
        root = C.RootGuard(0)
        root.add_global_state("GLOBAL_STATE")
        assert check(root)
    with torch.autocast("cpu", dtype=torch.float16):
        assert not check(root)


# ---- attribute access on nn.Module (C fast path mirroring Module.__getattr__) -----------------

class Block(torch.nn.Module):
    const = "class attribute"

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(2, 2)
        self.register_buffer("buf", torch.zeros(1))
        self.plain = 5

    @property
    def prop(self):
        return ("property", self.plain)


@pytest.mark.parametrize("name", ["lin", "buf", "plain", "prop", "const", "training", "forward"])
def test_module_attr_matches_python_getattr(name):
    m = Block()
    root = C.RootGuard(1)
    root.local(0, "m").attr(name).set_slot(0)
    e = C.CacheEntry.graph(root, lambda: (), 0, ("slot", 0))

    def target(m):
        raise AssertionError

    C.cache_add(target, e)
    got = C.CompiledFunction(target, None)(m)
    expected = getattr(m, name)
    assert got == expected if name in ("prop", "forward") else got is expected


def test_module_attr_parameters_and_missing():
    m = Block()
    root = C.RootGuard(0)
    root.local(0, "m").attr("lin").attr("weight").add_id_match(m.lin.weight, "ID weight")
    root.local(0, "m").attr("nope").add_id_match(None, "never")
    assert not check(root, m)
    assert root.last_failure() == "cannot read L['m'].nope"
    root = C.RootGuard(0)
    root.local(0, "m").attr("lin").attr("weight").add_id_match(m.lin.weight, "ID weight")
    assert check(root, m)
    m.lin.weight = torch.nn.Parameter(torch.ones(2, 2))
    assert not check(root, m)


def test_module_attr_follows_a_patched_getattr():
    class Patched(Block):
        pass

    m = Patched()
    root = C.RootGuard(0)
    root.local(0, "m").attr("virtual").add_equals_match(42, "virtual == 42")
    assert not check(root, m)  # Module.__getattr__: no such attribute
    Patched.__getattr__ = lambda self, name: 42 if name == "virtual" else None
    assert check(root, m)  # the type changed: attributes now resolve through the new hook
    del Patched.__getattr__
    assert not check(root, m)


def test_keyboard_interrupt_inside_a_guard_is_not_swallowed():
    class Interrupting:
        @property
        def attr(self):
            raise KeyboardInterrupt

    root = C.RootGuard(0)
    root.local(0, "o").attr("attr").add_equals_match(1, "o.attr == 1")
    # A process started with SIGINT ignored (CI, background jobs) drops pending interrupts:
    # give this test Python's own handler, as an interactive session has.
    import signal
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        _interrupt_after_guard(root, Interrupting())
    finally:
        signal.signal(signal.SIGINT, old)


def _interrupt_after_guard(root, obj):
    with pytest.raises(KeyboardInterrupt):
        result = check(root, obj)  # the guard fails without raising ...
        assert result is False
        for _ in range(1000):  # ... and Ctrl-C is delivered at the next bytecodes
            pass
