"""compile()'s interfaces as torch.compile users know them (issue #19 item 13): unknown inductor
options raise, known ones apply; a compiled module survives copy.deepcopy, pickle and torch.save
(the copy is compiled again with the same arguments)."""
from __future__ import annotations

import copy
import io
import pickle
import warnings

import pytest
import torch

import xcompile
from xcompile import config


@pytest.fixture(autouse=True)
def _reset():
    xcompile.reset()
    yield
    xcompile.reset()


def test_unknown_option_raises_like_torch():
    with pytest.raises(RuntimeError, match="Unexpected optimization option no_such_option"):
        xcompile.compile(lambda x: x, options={"no_such_option": 1})


def test_known_option_applies_while_building():
    seen = []
    orig = xcompile.backends.registry.lookup_backend("inductor")

    def spy(gm, example_inputs):
        seen.append(config.kernel_fusion)
        return orig(gm, example_inputs)

    f = xcompile.compile(lambda x: x.sin() + 1, options={"kernel_fusion": False})
    f._xcompile_callback.backend = spy
    x = torch.randn(3)
    torch.testing.assert_close(f(x), x.sin() + 1)
    assert seen == [False] and config.kernel_fusion is True


def test_options_on_a_backend_without_options_warn():
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        xcompile.compile(lambda x: x, backend="eager", options={"kernel_fusion": False})
    assert any("takes no options" in str(x.message) for x in w)


@pytest.mark.parametrize("how", ["deepcopy", "pickle", "torch.save"])
def test_compiled_module_copies(how):
    m = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU())
    cm = xcompile.compile(m, backend="eager", fullgraph=True)
    x = torch.randn(2, 3)
    cm(x)
    if how == "deepcopy":
        c = copy.deepcopy(cm)
    elif how == "pickle":
        c = pickle.loads(pickle.dumps(cm))
    else:
        buf = io.BytesIO()
        torch.save(cm, buf)
        buf.seek(0)
        c = torch.load(buf, weights_only=False)
    assert isinstance(c, xcompile.api.OptimizedModule) and c._orig_mod is not m
    torch.testing.assert_close(c(x), m(x))
    assert c._xcompile_callback.fullgraph and c._xcompile_callback.backend_arg == "eager"
    with torch.no_grad():
        c._orig_mod[0].weight.add_(1)                 # a real copy: the original is unchanged
    assert not torch.equal(c._orig_mod[0].weight, m[0].weight)


# -- the module's forward, however it is set (issue #19 item 6) -------------------------------------------------
def test_instance_forward_function_is_called_without_self():
    m = torch.nn.Linear(3, 3)
    m.forward = lambda x: x * 2
    x = torch.randn(3)
    torch.testing.assert_close(xcompile.compile(m, backend="eager")(x), x * 2)


def test_instance_forward_bound_to_another_object():
    class Other:
        k = 5

        def meth(self, x):
            return x * self.k

    m = torch.nn.Linear(3, 3)
    m.forward = Other().meth
    x = torch.randn(3)
    torch.testing.assert_close(xcompile.compile(m, backend="eager")(x), x * 5)


def test_forward_replaced_after_compile_runs_the_new_forward():
    m = torch.nn.Linear(3, 3)
    cm = xcompile.compile(m, backend="eager")
    x = torch.randn(3)
    torch.testing.assert_close(cm(x), m(x))
    m.forward = lambda x: x * 100
    torch.testing.assert_close(cm(x), x * 100)
    del m.forward
    torch.testing.assert_close(cm(x), torch.nn.functional.linear(x, m.weight, m.bias))


def test_forward_replaced_on_the_class_runs_the_new_forward():
    class M(torch.nn.Module):
        def forward(self, x):
            return x + 1

    m = M()
    cm = xcompile.compile(m, backend="eager")
    x = torch.randn(3)
    torch.testing.assert_close(cm(x), x + 1)
    M.forward = lambda self, x: x - 1
    torch.testing.assert_close(cm(x), x - 1)


def test_module_with_call_and_no_forward():
    class C(torch.nn.Module):
        def __call__(self, x):
            return x + 7

    x = torch.randn(3)
    torch.testing.assert_close(xcompile.compile(C(), backend="eager")(x), x + 7)


# -- edge values (issue #19 item 7) --------------------------------------------------------------------------
def test_trace_time_op_error_reaches_the_users_except_clause():
    def f(x):
        try:
            y = x[10]
        except IndexError:
            y = x * 0
        return y

    x = torch.randn(3)
    torch.testing.assert_close(xcompile.compile(f, backend="eager")(x), x * 0)


def test_overflowing_python_scalar_raises_overflow_error():
    with pytest.raises(OverflowError):
        xcompile.compile(lambda x: x * 2**64, backend="eager")(torch.ones(3))


def test_numpy_array_method_runs_eagerly():
    np = pytest.importorskip("numpy")
    assert xcompile.compile(lambda a: a.mean(), backend="eager")(np.arange(4.0)) == 1.5


@pytest.mark.parametrize("backend", ["eager", "inductor"])
@pytest.mark.parametrize("op", ["max", "min", "argmax", "amax"])
def test_reduction_of_an_empty_tensor_raises_like_eager(backend, op):
    """inductor returned -inf for t.max() of an empty tensor; eager raises."""
    fn = {"max": lambda t: t.max(), "min": lambda t: t.min(), "argmax": lambda t: t.argmax(),
          "amax": lambda t: t.amax(0)}[op]
    with pytest.raises((RuntimeError, IndexError)) as eager:
        fn(torch.ones(0))
    with pytest.raises(type(eager.value)) as compiled:       # eager's own type (IndexError for argmax)
        xcompile.compile(fn, backend=backend)(torch.ones(0))
    assert str(eager.value).split("\n")[0] in str(compiled.value)
    x = torch.randn(0, 3)
    torch.testing.assert_close(xcompile.compile(lambda t: t.amax(1), backend=backend)(x), x.amax(1))
