"""Torch-free smoke test of the runtime: eval-frame hook, cache, CompiledFunction, guards.

Runs against any build of the extension passed in as a module, so the same checks run
  * under CPython 3.11 through pytest (test_runtime_smoke.py, with xcompile._C), and
  * under CPython 3.12, where no torch is installed, on the torch-free test build made by
    check_py312_compile.sh:  python3.12 runtime_smoke.py <dir containing _C>.
The 3.12 run matters most for the hook: there a skipped frame must be cleared and popped by
us, and a bug shows up here as a leak, a crash or a corrupted frame stack.
"""
from __future__ import annotations

import gc
import sys
import weakref

_CHECKS = []


def check(fn):
    _CHECKS.append(fn)
    return fn


class Obj:
    pass


def _identity_entry(C, code, n_args=1, fn=None, plan=("out", 0)):
    """An entry whose guard accepts any frame and passes locals[0..n_args) as the inputs."""
    root = C.RootGuard(n_args)
    for i in range(n_args):
        root.local(i, f"a{i}").set_slot(i)
    entry = C.CacheEntry.graph(root, fn or (lambda *a: a), n_args, plan)
    C.cache_add(code, entry)
    return entry


def _with_callback(C, cb, fn, *args, **kwargs):
    prev = C.set_callback(cb)
    try:
        return fn(*args, **kwargs)
    finally:
        C.set_callback(prev)


@check
def hook_hit_skips_frame_and_does_not_leak(C):
    def f(x):
        raise AssertionError("frame body must not run on a hit")

    entry = _identity_entry(C, f.__code__)
    x = Obj()
    ref = weakref.ref(x)
    base = sys.getrefcount(x)
    prev = C.set_callback(lambda *a: None)
    try:
        assert C.hook_installed()
        for _ in range(10000):
            assert f(x) is x
    finally:
        C.set_callback(prev)
    assert not C.hook_installed()
    assert sys.getrefcount(x) == base
    assert entry.hits == 10000
    C.cache_clear(f)
    del x
    gc.collect()
    assert ref() is None


@check
def hook_miss_calls_callback_once(C):
    calls = []

    def f(a, b=5, *rest, k=1, **kw):
        return ("eager", a, b, rest, k, kw)

    def cb(code, f_locals, f_globals, f_builtins, closure):
        calls.append((code, dict(f_locals), f_globals is globals(), closure))
        root = C.RootGuard(1)
        root.local(0, "a").add_equals_match(f_locals["a"], f"a == {f_locals['a']!r}")
        root.local(0, "a").set_slot(0)
        entry = C.CacheEntry.graph(root, lambda a: (a * 10,), 1, ("out", 0))
        C.cache_add(code, entry)
        return entry

    assert _with_callback(C, cb, f, 1) == 10
    assert _with_callback(C, cb, f, 1, 2, 3, k=4) == 10  # hit: same a
    assert len(calls) == 1
    code, loc, is_globals, closure = calls[0]
    assert code is f.__code__ and is_globals and closure is None
    assert loc == {"a": 1, "b": 5, "rest": (), "k": 1, "kw": {}}
    assert _with_callback(C, cb, f, 2) == 20
    assert len(calls) == 2 and len(C.cache_entries(f)) == 2
    assert f(3) == ("eager", 3, 5, (), 1, {})  # no callback: plain Python
    C.cache_clear(f)


@check
def callback_returning_none_runs_frame(C):
    seen = []
    n = [0]

    def f(x):
        n[0] += 1
        return x + 1

    def cb(code, *rest):
        seen.append(code.co_name)
        return None

    assert _with_callback(C, cb, f, 1) == 2
    assert n[0] == 1 and seen == ["f"]


@check
def states_skip_and_no_new(C):
    calls = []

    def f(x):
        return g(x) + 1

    def g(x):
        return x * 2

    def cb(code, *rest):
        calls.append(code.co_name)
        return None

    C.set_code_state(f, C.SKIP)
    assert C.get_code_state(f.__code__) == 1
    assert _with_callback(C, cb, f, 1) == 3
    assert calls == ["g"]  # f skipped, its callee still hooked
    C.set_code_state(f, C.NO_NEW)
    calls.clear()
    assert _with_callback(C, cb, f, 1) == 3
    assert calls == ["g"]
    _identity_entry(C, f.__code__, fn=lambda x: (x - 100,))
    assert _with_callback(C, cb, f, 1) == -99  # NO_NEW still uses existing entries
    C.cache_clear_all()
    assert C.get_code_state(f) == C.NORMAL  # NO_NEW resets on clear; SKIP would stay
    C.set_code_state(f, C.SKIP)
    C.cache_clear_all()
    assert C.get_code_state(f) == C.SKIP
    C.set_code_state(f, C.NORMAL)


@check
def nesting_and_callback_scopes(C):
    log = []

    def inner(x):
        log.append(("inner", C.get_callback() is not None))
        return x

    def outer(x):
        return inner(x)

    def graph(x):  # the "compiled" artifact: runs with callback None, calls inner untraced
        log.append(("graph", C.get_callback()))
        return (inner(x),)

    def cb(code, f_locals, *rest):
        log.append(("cb", code.co_name, C.get_callback()))
        if code is outer.__code__:
            return _identity_entry(C, code, fn=graph)
        return None

    assert _with_callback(C, cb, outer, 7) == 7
    assert log == [("cb", "outer", None), ("graph", None), ("inner", False)]
    # A code entry's runner runs with the callback active: inner is hooked.
    C.cache_clear(outer)
    log.clear()
    root = C.RootGuard(0)
    runner = lambda x, closure: inner(x) + 1  # noqa: E731  (outer has free variables: + closure)
    C.set_code_state(runner, C.SKIP)  # as the frontend marks transformed code
    C.cache_add(outer, C.CacheEntry.code(root, runner))
    assert _with_callback(C, cb, outer, 7) == 8
    assert log == [("cb", "inner", None), ("inner", True)]
    C.cache_clear(outer)


@check
def exceptions_restore_callback_and_hook(C):
    class Boom(Exception):
        pass

    def f(x):
        return x

    def raising_cb(*a):
        raise Boom("from callback")

    def kbd_graph(x):
        raise KeyboardInterrupt

    def cb():
        pass

    for trigger in ("callback", "graph"):
        C.cache_clear(f)
        if trigger == "graph":
            _identity_entry(C, f.__code__, fn=kbd_graph)
        callback = raising_cb if trigger == "callback" else (lambda *a: None)
        prev = C.set_callback(callback)
        try:
            f(1)
        except (Boom, KeyboardInterrupt):
            pass
        else:
            raise AssertionError("expected an exception")
        assert C.get_callback() is callback and C.hook_installed()
        assert C.set_callback(prev) is callback
        assert not C.hook_installed()
    C.cache_clear(f)
    assert C.set_callback(cb) is None and C.hook_installed()
    assert C.set_callback(None) is cb and not C.hook_installed()


@check
def deep_recursion_crosses_stack_chunks(C):
    # Hits at every depth. `leaf` has a bigger frame than `down`, so whenever the data-stack
    # chunk runs out while descending, it is a (skipped) leaf frame that opens the new chunk:
    # on 3.12 our pop must then free and unlink that chunk.
    def leaf(a, b, c, d, e, f, g, h):
        i = j = k = m = n = o = p = q = r = s = t = u = v = w = x = y = 0  # noqa: F841
        raise AssertionError("hit expected")

    _identity_entry(C, leaf.__code__, fn=lambda a: (a,))

    def down(n, acc):
        if n == 0:
            return acc
        return down(n - 1, acc + leaf(n, 0, 0, 0, 0, 0, 0, 0))

    assert leaf.__code__.co_nlocals > down.__code__.co_nlocals + 8
    for depth in (300, 450, 600):
        assert _with_callback(C, lambda *a: None, down, depth, 0) == sum(range(depth + 1))
    C.cache_clear(leaf)


@check
def generators_are_not_hooked(C):
    calls = []

    def gen(n):
        yield from range(n)

    def cb(code, *rest):
        calls.append(code.co_name)
        return None

    assert _with_callback(C, cb, lambda: list(gen(3))) == [0, 1, 2]
    assert calls == ["<lambda>"]


@check
def compiled_function_fast_path(C):
    runs = []

    def f(x, y=10, *, z=100):
        runs.append(1)
        raise AssertionError("no Python frame for f on a fast-path hit")

    root = C.RootGuard(3)
    root.local(0, "x").set_slot(0)
    root.local(1, "y").set_slot(1)
    root.local(2, "z").set_slot(2)
    root.local(1, "y").add_equals_match(10, "y == 10")
    C.cache_add(f, C.CacheEntry.graph(root, lambda x, y, z: (x + y + z,), 3, ("out", 0)))
    cf = C.CompiledFunction(f, lambda *a: None)
    assert cf(1) == 111 and cf(2, 10) == 112
    assert cf(1, y=10) == 111  # kwargs: through the hook, same entry
    assert cf(3, z=100) == 113
    try:
        cf(1, 11)  # guard fails, callback returns None: f runs (and raises)
    except AssertionError:
        pass
    else:
        raise AssertionError("f body should have run")
    assert len(runs) == 1
    x = Obj()
    base = sys.getrefcount(x)
    cfx = C.CompiledFunction(lambda a: a, None)
    _identity_entry(C, cfx.fn.__code__, fn=lambda a: (a,))
    for _ in range(10000):
        assert cfx(x) is x
    assert sys.getrefcount(x) == base
    C.cache_clear(f)


@check
def compiled_function_binding(C):
    class K:
        def method(self, v):
            return ("eager", self, v)

    calls = []

    def cb(code, f_locals, *rest):
        calls.append(dict(f_locals))
        root = C.RootGuard(2)
        root.local(0, "self").set_slot(0)
        root.local(1, "v").set_slot(1)
        entry = C.CacheEntry.graph(root, lambda s, v: (s, v), 2, ("tuple", [("out", 1), ("slot", 0)]))
        C.cache_add(code, entry)
        return entry

    k = K()
    cf = C.CompiledFunction(K.method, cb, bound_self=k)
    assert cf(5) == (5, k)
    K.compiled = C.CompiledFunction(K.method, cb)  # as a method: __get__ binds like a function
    assert k.compiled(6) == (6, k)
    assert K.__dict__["compiled"].__get__(None, K) is K.__dict__["compiled"]
    assert len(calls) == 1 and calls[0] == {"self": k, "v": 5}
    cf.__wrapped__ = K.method
    assert cf.__dict__["__wrapped__"] is K.method and "CompiledFunction" in repr(cf)
    C.cache_clear(K.method)


@check
def module_call_trampoline(C):
    class Mod:
        __call__ = C.module_call_trampoline

    def forward(self, x, scale=2):
        return ("eager", x * scale)

    m = Mod()
    m._xc_call = C.CompiledFunction(forward, None, bound_self=m)
    assert m(3) == ("eager", 6) and m(3, scale=3) == ("eager", 9)
    _identity_entry(C, forward.__code__, n_args=2, fn=lambda s, x: (x + 1,))
    assert m(3) == 4
    del m._xc_call
    try:
        m(1)
    except AttributeError:
        pass
    else:
        raise AssertionError("missing _xc_call must raise")
    C.cache_clear(forward)


@check
def guard_leaves_and_accessors(C):
    gl = {"G": 3}
    bl = {"len": len}
    d = {"a": [1, (2, "s")], 5: None}
    root = C.RootGuard(1)
    n = root.local(0, "d")
    n.add_type_match(dict, "TYPE d")
    n.add_length_check(2, "LEN d")
    n.item("a").item(1).item(1).add_equals_match("s", "EQ s")
    n.item("a").item(-1).item(0).add_equals_match(2, "EQ 2")
    n.item(5).add_id_match(None, "ID None")
    root.global_("G").add_equals_match(3, "EQ G")
    root.global_("len").add_id_match(len, "ID len")
    n.set_slot(0)
    assert root.local(0, "d") is not None and root.local(0, "d").item("a") is n.item("a")
    assert root.check([d], gl, bl, None)
    d["a"][1] = (2, "t")
    assert root.check_verbose([d], gl, bl, None) == (False, "EQ s")
    assert root.last_failure() == "EQ s"
    d["a"][1] = (2, "s")
    assert root.check([d], gl, bl)
    del d[5]
    assert root.check_verbose([d], gl, bl)[1] == "LEN d"
    d[5] = None
    assert not root.check([d], {}, bl) and root.last_failure().startswith("cannot read G['G']")
    assert not root.check([], gl, bl) and "L['d']" in root.last_failure()
    text = root.dump()
    lines = text.splitlines()
    assert lines[0] == "RootGuard(n_slots=1)" and "  L['d']  -> slot 0" in lines
    assert "        L['d']['a'][1][1]" in lines and "          EQ s" in lines

    watched = {"k": 1}
    r2 = C.RootGuard(0)
    r2.local(0, "w").add_dict_unchanged(watched, "DICT w")
    assert r2.check([watched], {}, {})
    watched["k"] = 1  # same contents: version changes, snapshot equal
    assert r2.check([watched], {}, {})
    watched["k"] = 2
    assert not r2.check([watched], {}, {})
    assert not r2.check([dict(watched)], {}, {})

    def make_closure():
        z = Obj()

        def inner():
            return z
        return inner, z

    inner, z = make_closure()
    r3 = C.RootGuard(0)
    r3.closure(0, "z").add_id_match(z, "ID z")
    assert r3.check([], {}, {}, inner.__closure__)
    assert not r3.check([], {}, {}, None)
    for v in (None, True, 1, 1.5, float("nan"), "s", b"b", (1, (2.0, "x"))):
        r4 = C.RootGuard(0)
        r4.local(0, "v").add_equals_match(v, "EQ")
        assert r4.check([v], {}, {}), v
    for v, other in ((True, 1), (1, True), (1, 1.0), (0.0, -0.0), ("s", b"s"), ((1, 2), [1, 2]),
                     ((1, 2), (1, 2, 3)), (None, 0)):
        r4 = C.RootGuard(0)
        r4.local(0, "v").add_equals_match(v, "EQ")
        assert not r4.check([other], {}, {}), (v, other)


@check
def output_plans(C):
    def f(a, b):
        raise AssertionError

    root = C.RootGuard(2)
    root.local(0, "a").set_slot(0)
    root.local(1, "b").set_slot(1)
    plan = ("dict", ["x", "y"], [("tuple", [("out", 0), ("const", None)]), ("list", [("slot", 1)])])
    C.cache_add(f, C.CacheEntry.graph(root, lambda a: [a + 1], 1, plan))
    cf = C.CompiledFunction(f, None)
    assert cf(1, "b") == {"x": (2, None), "y": ["b"]}
    C.cache_clear(f)
    for bad in (("nope", 0), ("slot", 5), ("out",), ("dict", ["k"], [])):
        try:
            C.CacheEntry.graph(root, lambda a: (a,), 1, bad)
        except (ValueError, TypeError):
            pass
        else:
            raise AssertionError(f"bad plan accepted: {bad}")


def run_all(C, verbose=False):
    """Runs every check against module C; raises on the first failure."""
    assert C.get_callback() is None and not C.hook_installed()
    for fn in _CHECKS:
        fn(C)
        assert C.get_callback() is None, fn.__name__
        assert not C.hook_installed(), fn.__name__
        if verbose:
            print(f"  ok  {fn.__name__}")
    C.cache_clear_all()
    return len(_CHECKS)


if __name__ == "__main__":
    sys.path.insert(0, sys.argv[1])
    import _C  # the test build

    n = run_all(_C, verbose=True)
    print(f"runtime_smoke: {n} checks passed on Python {sys.version.split()[0]}")
