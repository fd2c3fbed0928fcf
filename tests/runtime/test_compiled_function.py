"""CompiledFunction: the vectorcall fast path, binding, fallbacks, hooks and the trampoline."""
import gc
import sys
import weakref

import pytest
import torch
import torch.nn as nn
import torch.nn.modules.module as nn_module

import xcompile._C as C


def slots_guard(n, names=None):
    root = C.RootGuard(n)
    for i in range(n):
        root.local(i, (names or [f"a{i}" for i in range(n)])[i]).set_slot(i)
    return root


def add_graph(fn, compiled, n, plan=("out", 0), guard=None):
    e = C.CacheEntry.graph(guard or slots_guard(n), compiled, n, plan)
    C.cache_add(fn, e)
    return e


class FrameCounter:
    """Counts Python frames started for one code object (sys.setprofile)."""

    def __init__(self, code):
        self.code, self.n = code, 0

    def _profile(self, frame, event, arg):
        if event == "call" and frame.f_code is self.code:
            self.n += 1

    def __enter__(self):
        sys.setprofile(self._profile)
        return self

    def __exit__(self, *exc):
        sys.setprofile(None)


class Recorder:
    def __init__(self, make=lambda code, f_locals: None):
        self.calls = []
        self.make = make

    def __call__(self, code, f_locals, f_globals, f_builtins, closure):
        self.calls.append((code.co_name, dict(f_locals)))
        return self.make(code, f_locals)


def compile_on_miss(compiled, n):
    """A callback that builds a slot-per-argument entry running `compiled`."""
    def make(code, f_locals):
        return add_graph(code, compiled, n)
    return Recorder(make)


# ---- fast path ------------------------------------------------------------------------------

def test_fast_path_hit_runs_no_python_frame():
    def f(x):
        return x + 1

    cb = compile_on_miss(lambda x: (x * 2,), 1)
    cf = C.CompiledFunction(f, cb)
    x = torch.ones(3)
    with FrameCounter(f.__code__) as frames:
        first = cf(x)
        for _ in range(10):
            out = cf(x)
    assert frames.n == 0
    assert torch.equal(first, x * 2) and torch.equal(out, x * 2)
    assert len(cb.calls) == 1 and cb.calls[0][0] == "f"
    assert C.cache_entries(f)[0].hits == 10


def test_defaults_and_keyword_only_defaults_bind_without_a_frame():
    def f(a, b=10, *, c=100):
        raise AssertionError("no frame expected")

    cb = compile_on_miss(lambda a, b, c: (a + b + c,), 3)
    cf = C.CompiledFunction(f, cb)
    assert cf(1) == 111 and cf(1, 2) == 103
    assert cb.calls == [("f", {"a": 1, "b": 10, "c": 100})]
    f.__defaults__ = (20,)  # read per call
    assert cf(1) == 121
    f.__kwdefaults__ = {"c": 200}
    assert cf(1) == 221


def test_missing_and_extra_arguments_raise_like_python():
    def f(a, b):
        return a

    cf = C.CompiledFunction(f, compile_on_miss(lambda a, b: (a,), 2))
    with pytest.raises(TypeError):
        cf(1)
    with pytest.raises(TypeError):
        cf(1, 2, 3)

    def g(*, k):
        return k

    with pytest.raises(TypeError):
        C.CompiledFunction(g, None)()


def test_kwargs_go_through_the_hook():
    def f(a, b=1):
        raise AssertionError("no frame expected")

    cb = compile_on_miss(lambda a, b: (a - b,), 2)
    cf = C.CompiledFunction(f, cb)
    with FrameCounter(f.__code__) as frames:
        assert cf(a=5, b=2) == 3  # miss: compiled in the hook
        assert cf(5, b=2) == 3  # hit in the hook
        assert cf(5, 2) == 3  # hit on the fast path
    assert frames.n == 0  # the hook never evaluated f's frame
    assert len(cb.calls) == 1
    assert C.get_callback() is None


def test_varargs_functions_use_the_hook():
    def f(*xs):
        raise AssertionError

    cb = Recorder(lambda code, f_locals: add_graph(code, lambda xs: (sum(xs),), 1))
    cf = C.CompiledFunction(f, cb)
    assert cf(1, 2, 3) == 6 and cf(4) == 4
    assert cb.calls == [("f", {"xs": (1, 2, 3)})]


def test_generator_functions_run_eagerly():
    def gen(n):
        yield from range(n)

    cb = Recorder()
    assert list(C.CompiledFunction(gen, cb)(3)) == [0, 1, 2]
    assert cb.calls == []


def test_states_skip_and_no_new_on_the_fast_path():
    def callee(x):
        return x + 1

    def f(x):
        return callee(x) * 2

    cb = Recorder()
    cf = C.CompiledFunction(f, cb)
    C.set_code_state(f, C.SKIP)
    assert cf(1) == 4
    assert [c[0] for c in cb.calls] == ["callee"]  # f skipped, its callees compiled
    C.set_code_state(f, C.NO_NEW)
    cb.calls.clear()
    assert cf(1) == 4
    assert [c[0] for c in cb.calls] == ["callee"]  # no callback for f, callee still hooked
    add_graph(f, lambda x: (-x,), 1)
    assert cf(1) == -1  # NO_NEW keeps using existing entries
    assert C.get_callback() is None and not C.hook_installed()


def test_miss_with_callback_none_runs_eagerly():
    def f(x):
        return x + 1

    cf = C.CompiledFunction(f, None)
    assert cf(1) == 2
    assert C.cache_entries(f) == []


def test_callback_returning_none_runs_fn_once_without_second_lookup():
    def callee(x):
        return x

    def f(x):
        return callee(x)

    cb = Recorder()
    cf = C.CompiledFunction(f, cb)
    assert cf(3) == 3
    assert [c[0] for c in cb.calls] == ["f", "callee"]  # f asked once, then its callee


def test_errors_in_compiled_fn_propagate_and_restore():
    def f(x):
        return x

    def boom(x):
        raise RuntimeError("kernel failed")

    add_graph(f, boom, 1)
    cf = C.CompiledFunction(f, Recorder())
    with pytest.raises(RuntimeError, match="kernel failed"):
        cf(1)
    assert C.get_callback() is None and not C.hook_installed()


def test_code_entry_runs_runner_with_callback():
    def callee(x):
        return x + 1

    def f(x, y=2):
        raise AssertionError

    seen = []

    def runner(x, y):
        seen.append(C.get_callback() is cb)
        return callee(x) * y

    cb = Recorder()
    C.set_code_state(runner, C.SKIP)
    C.cache_add(f, C.CacheEntry.code(C.RootGuard(0), runner))
    cf = C.CompiledFunction(f, cb)
    assert cf(1) == 4
    assert seen == [True] and [c[0] for c in cb.calls] == ["callee"]


# ---- binding: bound_self, __get__ ------------------------------------------------------------

class Thing:
    def method(self, x, scale=2):
        return ("eager", x * scale)


def test_bound_self_is_prepended():
    t = Thing()
    cb = compile_on_miss(lambda s, x, scale: ((s, x * scale),), 3)
    cf = C.CompiledFunction(Thing.method, cb, bound_self=t)
    assert cf(3) == (t, 6)
    assert cf(3, scale=3) == (t, 9)  # keyword path prepends too
    assert cf.bound_self is t and cf.fn is Thing.method and cf.callback is cb
    assert cb.calls[0][1] == {"self": t, "x": 3, "scale": 2}


def test_get_binds_like_a_function():
    class K:
        pass

    cb = compile_on_miss(lambda s, x, scale: (("compiled", x * scale),), 3)
    K.m = C.CompiledFunction(Thing.method, cb)
    k = K()
    assert k.m(2) == ("compiled", 4)
    bound = k.m
    assert bound.__self__ is k and bound.__func__ is K.__dict__["m"]
    assert K.m is K.__dict__["m"]
    assert cb.calls[0][1]["self"] is k


def test_dict_repr_and_attributes():
    def f(x):
        """doc"""
        return x

    cf = C.CompiledFunction(f, None)
    cf.__wrapped__ = f
    cf.__name__ = f.__name__
    cf.__doc__ = f.__doc__
    assert cf.__dict__ == {"__wrapped__": f, "__name__": "f", "__doc__": "doc"}
    assert "CompiledFunction" in repr(cf) and "f" in repr(cf)
    assert cf.hooks_module is None and cf.bound_self is None
    with pytest.raises(TypeError):
        C.CompiledFunction(len, None)  # not a Python function
    with pytest.raises(TypeError):
        C.CompiledFunction(f, 3)
    ref = weakref.ref(cf)
    del cf
    assert ref() is None


def test_cycles_are_collected():
    def f(x):
        return x

    holder = {}
    cf = C.CompiledFunction(f, lambda *a: holder)  # callback -> holder -> cf  # noqa: F821
    holder["cf"] = cf
    ref = weakref.ref(cf)
    del cf, holder
    gc.collect()
    assert ref() is None


def test_fast_path_does_not_leak():
    def f(x, y=None):
        return x

    x, extra = torch.ones(2), object()
    cb = compile_on_miss(lambda x, y: (x,), 2)
    cf = C.CompiledFunction(f, cb, bound_self=None)
    cf(x)
    counts = (sys.getrefcount(x), sys.getrefcount(extra), sys.getrefcount(cb), sys.getrefcount(f))
    for _ in range(10000):
        cf(x)
        cf(x, extra)  # miss at first, then a hit of its own entry
    assert (sys.getrefcount(x), sys.getrefcount(extra), sys.getrefcount(cb), sys.getrefcount(f)) == counts


# ---- hooks_module and the trampoline ---------------------------------------------------------

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(2, 2)

    def forward(self, x):
        return self.lin(x)


def net_callback():
    # compiles Net.forward only, to a marker so tests can tell compiled from eager
    def make(code, f_locals):
        if code is not Net.forward.__code__:
            return None
        return add_graph(code, lambda s, x: (("compiled", s, x),), 2)
    return Recorder(make)


def test_hooks_module_without_hooks_takes_the_fast_path():
    m = Net()
    cb = net_callback()
    cf = C.CompiledFunction(type(m).forward, cb, bound_self=m, hooks_module=m)
    x = torch.ones(2)
    assert cf(x) == ("compiled", m, x)
    assert cf.hooks_module is m


@pytest.mark.parametrize("register", [
    lambda m, fn: m.register_forward_hook(lambda mod, args, out: fn()),
    lambda m, fn: m.register_forward_pre_hook(lambda mod, args: fn()),
    lambda m, fn: nn_module.register_module_forward_hook(lambda mod, args, out: fn()),
    lambda m, fn: nn_module.register_module_forward_pre_hook(lambda mod, args: fn()),
])
def test_hooks_force_the_module_call(register):
    m = Net()
    cb = net_callback()
    cf = C.CompiledFunction(type(m).forward, cb, bound_self=m, hooks_module=m)
    x = torch.ones(2)
    fired = []
    handle = register(m, lambda: fired.append(C.get_callback() is not None))
    try:
        out = cf(x)
    finally:
        handle.remove()
    assert out == ("compiled", m, x)  # forward still compiled, reached through Module.__call__
    assert len(fired) >= 1  # the hook ran eagerly (traced or not is the callback's business)
    fired.clear()
    assert cf(x) == ("compiled", m, x)
    assert fired == []


def test_hook_dicts_recollected_when_replaced():
    m = Net()
    cf = C.CompiledFunction(type(m).forward, net_callback(), bound_self=m, hooks_module=m)
    x = torch.ones(2)
    assert cf(x)[0] == "compiled"
    from collections import OrderedDict
    m._forward_hooks = OrderedDict({0: lambda mod, a, o: "hooked"})  # a new dict object
    assert cf(x) == "hooked"


class OptimizedModuleLike(nn.Module):
    """What the Python side does: OptimizedModule.__call__ is the trampoline."""

    __call__ = C.module_call_trampoline

    def __init__(self, mod, callback):
        super().__init__()
        self._orig_mod = mod
        self.__dict__["_xc_call"] = C.CompiledFunction(
            type(mod).forward, callback, bound_self=mod, hooks_module=mod)


def test_module_call_trampoline():
    m = Net()
    cb = net_callback()
    opt = OptimizedModuleLike(m, cb)
    x = torch.ones(2)
    assert opt(x) == ("compiled", m, x)
    assert opt(x=x) == ("compiled", m, x)
    assert opt.__call__(x) == ("compiled", m, x)  # bound through __get__
    assert type(opt).__call__ is C.module_call_trampoline
    assert "trampoline" in repr(C.module_call_trampoline)
    del opt.__dict__["_xc_call"]
    with pytest.raises(AttributeError, match="_xc_call"):
        opt(x)
    with pytest.raises(TypeError):
        C.module_call_trampoline()


def test_trampoline_forwards_to_any_callable():
    class Wrapper:
        __call__ = C.module_call_trampoline

    w = Wrapper()
    w._xc_call = lambda *a, **k: (a, k)
    assert w(1, 2, k=3) == ((1, 2), {"k": 3})
