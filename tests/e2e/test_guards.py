"""Each guard kind passes when it should and fails when it must.

Pattern for every kind: call once (1 compile); call again with fresh values of the same kind
(no compile: the guard passes); call with the property changed (exactly 1 recompile, result
equal to eager); call with the original property again (no compile: the first entry is hit).
"""
import sys

import pytest
import torch
import torch.nn as nn

from .util import Calls

THIS = sys.modules[__name__]


def _t(*shape, dtype=torch.float32, **kw):
    return lambda: torch.randn(*shape, dtype=dtype, **kw)


def _args(*factories, **kw_factories):
    def make():
        args = tuple(f() if callable(f) else f for f in factories)
        kwargs = {k: (f() if callable(f) else f) for k, f in kw_factories.items()}
        return args, kwargs
    return make


def _mul_add(x, y):
    return x * 2 + y


def _scaled(x, n):
    return x * n + 1


def _flag(x, mode, use_bias):
    out = torch.tanh(x) if mode == "tanh" else torch.relu(x)
    return out + 1 if use_bias else out


def _maybe(x, bias):
    return x if bias is None else x + bias


def _list_sum(xs):
    out = xs[0]
    for x in xs[1:]:
        out = out + x
    return out


def _dict_in(d):
    return {k: v * 2 for k, v in d.items()}


def _grad_sensitive(x):
    return x.sin() * 3


def _nc(*shape):
    return lambda: torch.randn(*reversed(shape)).t()


_META = "cuda" if torch.cuda.is_available() else "meta"

# name -> (fn, base inputs, changed inputs)
SCENARIOS = {
    "dtype": (_mul_add, _args(_t(3, 4), _t(3, 4)), _args(_t(3, 4, dtype=torch.float64), _t(3, 4))),
    "dtype_int": (_mul_add, _args(_t(3, 4), _t(3, 4)),
                  _args(lambda: torch.randint(0, 9, (3, 4)), lambda: torch.randint(0, 9, (3, 4)))),
    "shape": (_mul_add, _args(_t(3, 4), _t(3, 4)), _args(_t(5, 4), _t(5, 4))),
    "rank": (_mul_add, _args(_t(3, 4), _t(3, 4)), _args(_t(2, 3, 4), _t(4))),
    "stride": (_mul_add, _args(_t(3, 4), _t(3, 4)), _args(_nc(3, 4), _t(3, 4))),
    "device": (_mul_add, _args(_t(3, 4), _t(3, 4)),
               _args(_t(3, 4, device=_META), _t(3, 4, device=_META))),
    "requires_grad": (_grad_sensitive, _args(_t(3, 4)), _args(_t(3, 4, requires_grad=True))),
    "constant_int": (_scaled, _args(_t(3), 2), _args(_t(3), 3)),
    "constant_bool_and_str": (_flag, _args(_t(3), "relu", True), _args(_t(3), "tanh", True)),
    "constant_none_vs_tensor": (_maybe, _args(_t(3), None), _args(_t(3), _t(3))),
    "constant_type_int_vs_float_tensor": (_scaled, _args(_t(3), 2), _args(_t(3), _t(3))),
    "list_length": (_list_sum, lambda: (([torch.randn(3) for _ in range(2)],), {}),
                    lambda: (([torch.randn(3) for _ in range(3)],), {})),
    "dict_keys": (_dict_in, lambda: (({"a": torch.randn(2)},), {}),
                  lambda: (({"a": torch.randn(2), "b": torch.randn(2)},), {})),
}


@pytest.mark.parametrize("kind", list(SCENARIOS))
def test_guard_kind(cc, kind):
    fn, base, changed = SCENARIOS[kind]
    cnt = cc.counter()
    calls = Calls(cc.compile(fn, cnt, fullgraph=True), fn, cnt)
    calls.check(base, compiles=1, what="first call")
    calls.check(base, compiles=1, what="fresh values, same guards")
    calls.check(changed, compiles=2, what=f"{kind} changed")
    calls.check(changed, compiles=2, what=f"{kind} changed, again")
    calls.check(base, compiles=2, what="original again")


def test_list_input_mutation_guards_not_confused(cc):
    """A list argument mutated between calls (new length) recompiles, then both entries hit."""
    cnt = cc.counter()
    f = cc.compile(_list_sum, cnt, fullgraph=True)
    xs = [torch.randn(3), torch.randn(3)]
    torch.testing.assert_close(f(xs), _list_sum(xs))
    xs.append(torch.randn(3))
    torch.testing.assert_close(f(xs), _list_sum(xs))
    xs.pop()
    torch.testing.assert_close(f(xs), _list_sum(xs))
    assert cnt.frame_count == 2


def _inplace_then_read(a, b):
    a.add_(1)
    return b * 2


def test_tensor_aliasing(cc):
    """The same tensor passed twice must not reuse a graph traced for two distinct tensors."""
    cnt = cc.counter()
    calls = Calls(cc.compile(_inplace_then_read, cnt, fullgraph=True), _inplace_then_read, cnt)
    distinct = _args(_t(3), _t(3))

    def aliased():
        x = torch.randn(3)
        return (x, x), {}
    calls.check(distinct, compiles=1, what="distinct")
    calls.check(aliased, compiles=2, what="aliased")
    calls.check(distinct, compiles=2, what="distinct again")


def test_grad_mode(cc):
    cnt = cc.counter()
    calls = Calls(cc.compile(_grad_sensitive, cnt, fullgraph=True), _grad_sensitive, cnt)
    inp = _args(_t(3, requires_grad=True))
    calls.check(inp, compiles=1, what="grad enabled")
    with torch.no_grad():
        out = calls.check(inp, compiles=2, what="no_grad")
    assert not out.requires_grad
    out = calls.check(inp, compiles=2, what="grad enabled again")
    assert out.requires_grad


# --------------------------------------------------------------------------- globals

G_SCALE = 2
G_TENSOR = torch.ones(3)


def _g_helper(x):
    return x + 1


def _g_other_helper(x):
    return x - 1


def _uses_globals(x):
    return _g_helper(x * G_SCALE) + G_TENSOR


@pytest.mark.parametrize("name, new_value", [
    ("G_SCALE", 3),
    ("G_TENSOR", torch.ones(2, 3)),
    ("_g_helper", _g_other_helper),
])
def test_global_rebound(cc, monkeypatch, name, new_value):
    cnt = cc.counter()
    calls = Calls(cc.compile(_uses_globals, cnt, fullgraph=True), _uses_globals, cnt)
    base = _args(_t(3))
    calls.check(base, compiles=1, what="first call")
    original = getattr(THIS, name)
    monkeypatch.setattr(THIS, name, new_value)
    calls.check(base, compiles=2, what=f"global {name} rebound")
    calls.check(base, compiles=2, what=f"global {name} rebound, again")
    monkeypatch.setattr(THIS, name, original)
    calls.check(base, compiles=2, what=f"global {name} restored")


def test_global_tensor_same_metadata_is_read_fresh(cc, monkeypatch):
    """A global rebound to a tensor of identical metadata may reuse the graph, but must use the new value."""
    cnt = cc.counter()
    f = cc.compile(_uses_globals, cnt, fullgraph=True)
    x = torch.randn(3)
    torch.testing.assert_close(f(x), _uses_globals(x))
    monkeypatch.setattr(THIS, "G_TENSOR", torch.full((3,), 5.0))
    torch.testing.assert_close(f(x), _uses_globals(x))
    G_TENSOR.mul_(2)  # in-place update of the (new) global
    torch.testing.assert_close(f(x), _uses_globals(x))
    assert cnt.frame_count <= 2


def test_new_global_defined_later(cc, monkeypatch, request):
    """A name missing at trace time (resolved to a builtin) that later appears as a global."""
    if cc.name == "torch.compile":
        # Found while validating this suite (torch 2.13): the cached graph keeps using the builtin.
        request.applymarker(pytest.mark.xfail(strict=True, reason="torch.compile misses a global "
                                              "that shadows a builtin after tracing"))
    def uses_abs(x):
        return abs(x) + 1
    cnt = cc.counter()
    calls = Calls(cc.compile(uses_abs, cnt, fullgraph=True), uses_abs, cnt)
    base = _args(_t(3))
    calls.check(base, compiles=1, what="builtin abs")
    monkeypatch.setitem(uses_abs.__globals__, "abs", lambda t: t * 10)
    calls.check(base, compiles=2, what="global abs shadows the builtin")
    monkeypatch.delitem(uses_abs.__globals__, "abs")
    calls.check(base, compiles=2, what="builtin abs again")


# --------------------------------------------------------------------------- modules


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3)
        self.depth = 2
        self.act = "relu"

    def forward(self, x):
        for _ in range(self.depth):
            x = self.fc(x)
        return torch.relu(x) if self.act == "relu" else torch.tanh(x)


def _module_calls(cc):
    torch.manual_seed(0)
    mod = Net()
    cnt = cc.counter()
    opt = cc.compile(mod, cnt, fullgraph=True)
    return mod, Calls(opt, mod, cnt), _args(_t(2, 3))


@pytest.mark.parametrize("attr, value", [("depth", 3), ("act", "tanh")])
def test_module_attribute_reassigned(cc, attr, value):
    mod, calls, base = _module_calls(cc)
    calls.check(base, compiles=1, what="first call")
    original = getattr(mod, attr)
    setattr(mod, attr, value)
    calls.check(base, compiles=2, what=f"mod.{attr} reassigned")
    calls.check(base, compiles=2, what=f"mod.{attr} reassigned, again")
    setattr(mod, attr, original)
    calls.check(base, compiles=2, what=f"mod.{attr} restored")


def test_module_attribute_added_and_deleted(cc):
    """A new attribute that shadows a class attribute is seen, and so is its deletion."""
    class WithClassAttr(nn.Module):
        scale = 2

        def forward(self, x):
            return x * self.scale

    mod = WithClassAttr()
    cnt = cc.counter()
    calls = Calls(cc.compile(mod, cnt, fullgraph=True), mod, cnt)
    base = _args(_t(3))
    calls.check(base, compiles=1, what="class attribute")
    mod.scale = 5
    calls.check(base, compiles=2, what="instance attribute shadows it")
    del mod.scale
    calls.check(base, compiles=2, what="instance attribute deleted")


def test_parameter_replaced(cc):
    mod, calls, base = _module_calls(cc)
    calls.check(base, compiles=1, what="first call")
    original = mod.fc.weight
    mod.fc.weight = nn.Parameter(torch.randn(3, 3))
    n = 1 + cc.recompiles_on_parameter_swap
    calls.check(base, compiles=n, what="parameter replaced")
    calls.check(base, compiles=n, what="parameter replaced, again")
    mod.fc.weight = original
    calls.check(base, compiles=n, what="parameter restored")


def test_parameter_replaced_with_other_shape(cc):
    mod, calls, base = _module_calls(cc)
    calls.check(base, compiles=1, what="first call")
    mod.fc = nn.Linear(3, 3, bias=False)
    calls.check(base, compiles=2, what="submodule replaced by one without bias")


def test_parameter_updated_in_place_needs_no_recompile(cc):
    mod, calls, base = _module_calls(cc)
    calls.check(base, compiles=1, what="first call")
    with torch.no_grad():
        mod.fc.weight.mul_(-2)
        mod.fc.bias.add_(1)
    calls.check(base, compiles=1, what="parameters updated in place")
    opt = torch.optim.SGD(mod.parameters(), lr=0.1)
    mod(torch.randn(2, 3)).sum().backward()
    opt.step()
    calls.check(base, compiles=1, what="after an optimizer step")


def test_train_eval_toggle(cc):
    torch.manual_seed(0)
    mod = nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3))
    cnt = cc.counter()
    calls = Calls(cc.compile(mod, cnt, fullgraph=True), mod, cnt)
    base = _args(_t(4, 3))
    mod.eval()
    calls.check(base, compiles=1, what="eval")
    mod.train()
    calls.check(base, compiles=2, what="train")
    mod.eval()
    calls.check(base, compiles=2, what="eval again")


def test_forward_hook_added_and_removed(cc):
    mod, calls, base = _module_calls(cc)
    calls.check(base, compiles=1, what="first call")
    handle = mod.register_forward_hook(lambda m, inp, out: out * 10)
    out = calls.compiled(torch.ones(2, 3))
    torch.testing.assert_close(out, mod(torch.ones(2, 3)))
    handle.remove()
    torch.testing.assert_close(calls.compiled(torch.ones(2, 3)), mod(torch.ones(2, 3)))
