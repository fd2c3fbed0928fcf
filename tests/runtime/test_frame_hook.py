"""The PEP 523 hook: when it runs, what it skips, and that it always restores its state."""
import sys
import threading

import pytest
import torch

import xcompile._C as C


def entry_for(code, compiled=lambda *a: a, n=1, plan=("out", 0), guard=None):
    root = guard or C.RootGuard(n)
    if guard is None:
        for i in range(n):
            root.local(i, f"a{i}").set_slot(i)
    e = C.CacheEntry.graph(root, compiled, n, plan)
    C.cache_add(code, e)
    return e


class Recorder:
    """A compile callback that records code names and returns `make(code, f_locals)`."""

    def __init__(self, make=lambda code, f_locals: None):
        self.names = []
        self.make = make

    def __call__(self, code, f_locals, f_globals, f_builtins, closure):
        self.names.append(code.co_name)
        return self.make(code, f_locals)


def run_with(cb, fn, *args, **kwargs):
    prev = C.set_callback(cb)
    try:
        return fn(*args, **kwargs)
    finally:
        assert C.set_callback(prev) is cb


def test_hook_installed_only_while_a_callback_is_set():
    assert not C.hook_installed()
    cb = Recorder()
    assert C.set_callback(cb) is None
    assert C.hook_installed() and C.get_callback() is cb
    assert C.set_callback(cb) is cb  # replacing keeps it installed
    assert C.hook_installed()
    assert C.set_callback(None) is cb
    assert not C.hook_installed() and C.get_callback() is None
    with pytest.raises(TypeError):
        C.set_callback(3)


def test_callback_is_thread_local():
    cb = Recorder()
    seen = {}

    def worker():
        def in_thread(x):
            return x + 1
        seen["callback"] = C.get_callback()
        seen["result"] = in_thread(1)

    prev = C.set_callback(cb)
    try:
        t = threading.Thread(target=worker)
        t.start()
        t.join()
    finally:
        C.set_callback(prev)
    assert seen == {"callback": None, "result": 2}
    assert "in_thread" not in cb.names


def test_callback_in_two_threads_counts_installs():
    cb = Recorder()
    started, release = threading.Event(), threading.Event()

    def worker():
        C.set_callback(cb)
        started.set()
        release.wait()
        C.set_callback(None)

    t = threading.Thread(target=worker)
    t.start()
    started.wait()
    try:
        assert C.hook_installed() and C.get_callback() is None
        prev = C.set_callback(cb)
        C.set_callback(prev)
        assert C.hook_installed()  # the other thread still has one
    finally:
        release.set()
        t.join()
    assert not C.hook_installed()


def test_module_and_class_bodies_and_generators_are_not_hooked():
    cb = Recorder()
    src = "class K:\n    y = 1\nz = K.y\ndef gen():\n    yield 1\nw = list(gen())\n"

    def body():
        exec(src, {})  # noqa: S102  (a program made by the test)
    audit_hooks = []
    real_cb = cb

    def cb_outside_audit_hooks(code, *rest):
        # Python audit hooks run as frames on exec (filelock >= 4.3 adds one on 3.12+:
        # _audit_fork_safety); they are the hook's to see, not this test's subject
        if code.co_filename != "<string>" and code.co_filename != __file__:
            audit_hooks.append(code.co_name)
            return None
        return real_cb(code, *rest)
    run_with(cb_outside_audit_hooks, body)
    assert cb.names == ["body"]


def test_hit_returns_without_running_the_frame():
    body_runs = []

    def f(x, y):
        body_runs.append(1)
        return "eager"

    entry_for(f.__code__, lambda x, y: (x * y,), n=2)
    assert run_with(Recorder(), f, 6, 7) == 42
    assert run_with(Recorder(), f, x=2, y=3) == 6  # keywords bind in the frame before the hook
    assert body_runs == []


def test_args_that_are_cells_are_read_raw():
    def f(x):
        def inner():
            return x
        return inner()

    entry_for(f.__code__, lambda x: (("compiled", x),))
    assert run_with(Recorder(), f, 5) == ("compiled", 5)


def test_closure_is_passed_and_guarded():
    def outer():
        k = 3

        def f(x):
            return x + k
        return f

    f = outer()
    got = {}

    def make(code, f_locals):
        got["closure"] = None
        root = C.RootGuard(1)
        root.local(0, "x").set_slot(0)
        root.closure(0, "k").add_equals_match(3, "k == 3")
        return entry_for(code, lambda x: (x * 100,), guard=root)

    cb = Recorder(make)
    assert run_with(cb, f, 1) == 100
    assert run_with(cb, f, 2) == 200
    assert cb.names == ["f"]
    f.__closure__[0].cell_contents = 4
    cb.make = lambda code, f_locals: None
    assert run_with(cb, f, 1) == 5  # guard failed: eager with the new closure value
    assert cb.names == ["f", "f"]


def test_callback_arguments():
    got = []

    def f(a, *args, b=2, **kw):
        return a

    def cb(code, f_locals, f_globals, f_builtins, closure):
        got.append((code, f_locals, f_globals, f_builtins, closure))
        return None

    run_with(cb, f, 1, 9, c=3)
    code, f_locals, f_globals, f_builtins, closure = got[0]
    assert code is f.__code__ and f_globals is globals() and closure is None
    assert f_builtins is __builtins__ or f_builtins is getattr(__builtins__, "__dict__", None)
    assert f_locals == {"a": 1, "args": (9,), "b": 2, "kw": {"c": 3}}


def test_entry_from_callback_with_failing_guard_runs_frame():
    def f(x):
        return ("eager", x)

    def make(code, f_locals):
        root = C.RootGuard(0)
        root.local(0, "x").add_equals_match(-1, "x == -1")  # fails for this call
        e = C.CacheEntry.graph(root, lambda: (), 0, ("const", "compiled"))
        C.cache_add(code, e)
        return e

    cb = Recorder(make)
    assert run_with(cb, f, 1) == ("eager", 1)
    assert run_with(cb, f, -1) == "compiled"  # the entry exists, hit
    assert cb.names == ["f"]


def test_callback_must_return_entry_or_none():
    def f(x):
        return x

    with pytest.raises(TypeError, match="CacheEntry or None"):
        run_with(Recorder(lambda c, l: 42), f, 1)  # noqa: E741


def test_callback_errors_propagate_to_the_caller():
    def f(x):
        return x

    def cb(*a):
        raise ValueError("fullgraph=True: graph break")

    def caller():
        return f(1) + 1

    with pytest.raises(ValueError, match="fullgraph"):
        run_with(cb, caller)


def test_keyboard_interrupt_inside_compiled_fn_restores_state():
    def f(x):
        return x

    def interrupted(x):
        assert C.get_callback() is None  # graphs run without a callback
        raise KeyboardInterrupt

    entry_for(f.__code__, interrupted)
    cb = Recorder()
    prev = C.set_callback(cb)
    try:
        with pytest.raises(KeyboardInterrupt):
            f(1)
        assert C.get_callback() is cb and C.hook_installed()
    finally:
        C.set_callback(prev)
    assert not C.hook_installed()


def test_graph_can_call_the_same_function_eagerly():
    calls = []

    def f(n):
        calls.append(n)
        return n

    entry_for(f.__code__, lambda n: (f(n + 1) * 10,))  # inside the graph: no callback, eager
    assert run_with(Recorder(), f, 1) == 20
    assert calls == [2]


def test_hit_and_miss_paths_do_not_leak():
    def f(x):
        return x

    def g(x):
        return x

    x = torch.ones(2)
    entry_for(f.__code__)
    cb = Recorder()
    base = sys.getrefcount(x)
    prev = C.set_callback(cb)
    try:
        for _ in range(10000):
            f(x)
            g(x)  # miss every time: callback, then the frame runs
    finally:
        C.set_callback(prev)
    assert sys.getrefcount(x) == base
    assert sys.getrefcount(cb) == 2
    assert len(cb.names) == 10000 and set(cb.names) == {"g"}


def test_code_entry_runner_gets_all_frame_arguments():
    def f(a, b=2, *args, k=3, **kw):
        raise AssertionError

    got = []

    def runner(*frame_args):
        got.append(frame_args)
        return "ran"

    C.set_code_state(runner, C.SKIP)
    C.cache_add(f, C.CacheEntry.code(C.RootGuard(0), runner))
    assert run_with(Recorder(), f, 1, 5, 6, k=7, z=8) == "ran"
    assert f.__code__.co_varnames[:5] == ("a", "b", "k", "args", "kw")
    assert got == [(1, 5, 7, (6,), {"z": 8})]  # co_varnames order: keyword-only before *args
    assert C.cache_entries(f)[0].hits == 1
