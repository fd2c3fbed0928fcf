"""The torch-function mode stack around a compiled call: ``with torch.device(d)`` /
``torch.set_default_device(d)`` (a DeviceContext mode) and user ``TorchFunctionMode``s.

Eager puts factory results on the context's device; a graph traced outside the context must not
be reused inside it (nor the reverse), and the compiled kernels' own buffers stay on their device.
"meta" stands in for a second device on a CPU-only machine.
"""
import numpy as np
import pytest
import torch

import xcompile
from xcompile.testing import CompileCounter, CompileCounterWithBackend

BACKENDS = ["eager", "aot_eager", "inductor"]


def factory(x):
    return torch.ones(3) * 2 + x.sum()


@pytest.fixture(autouse=True)
def _fresh():
    xcompile.reset()
    yield
    xcompile.reset()


@pytest.mark.parametrize("backend", BACKENDS)
def test_compiled_outside_then_called_inside_a_device_context(backend):
    cf = xcompile.compile(factory, backend=backend)
    x = torch.randn(3)
    torch.testing.assert_close(cf(x), factory(x))
    with torch.device("meta"):
        got, want = cf(x), factory(x)
    assert got.device == want.device == torch.device("meta")
    assert got.shape == want.shape and got.dtype == want.dtype
    out = cf(x)                                   # outside again: the first entry, on the CPU
    assert out.device.type == "cpu"
    torch.testing.assert_close(out, factory(x))


@pytest.mark.parametrize("backend", BACKENDS)
def test_compiled_inside_a_device_context_first(backend):
    cf = xcompile.compile(factory, backend=backend)
    x = torch.randn(3)
    with torch.device("meta"):
        assert cf(x).device.type == "meta"
    got = cf(x)
    assert got.device.type == "cpu"
    torch.testing.assert_close(got, factory(x))


def test_a_new_context_on_the_same_device_reuses_the_graph():
    counter = CompileCounter()
    cf = xcompile.compile(factory, backend=counter)
    x = torch.randn(3)
    for _ in range(3):
        with torch.device("cpu"):               # each `with` makes a new DeviceContext
            torch.testing.assert_close(cf(x), factory(x))
    assert counter.frame_count == 1
    cf(x)                                         # no mode at all: another entry
    assert counter.frame_count == 2


def test_set_default_device():
    cf = xcompile.compile(factory, backend="eager")
    x = torch.randn(3)
    cf(x)
    torch.set_default_device("meta")
    try:
        assert cf(x).device.type == "meta"
    finally:
        torch.set_default_device(None)
    assert cf(x).device.type == "cpu"


def test_explicit_device_is_kept_inside_a_context():
    def f(x):
        return torch.zeros(2, device="cpu") + x, torch.arange(3)

    cf = xcompile.compile(f, backend="aot_eager")
    x = torch.randn(2)
    with torch.device("meta"):
        a, b = cf(x)
        ea, eb = f(x)
    assert (a.device, b.device) == (ea.device, eb.device) == (torch.device("cpu"), torch.device("meta"))
    torch.testing.assert_close(a, ea)


class Times10(torch.overrides.TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        return out * 10 if func in (torch.add, torch.Tensor.add) else out


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_user_function_mode_sees_every_op(backend):
    def f(x):
        return x + 1

    counter = CompileCounterWithBackend(backend)
    cf = xcompile.compile(f, backend=counter)
    x = torch.zeros(2)
    torch.testing.assert_close(cf(x), torch.ones(2))
    with Times10():       # f runs eagerly (the mode's __torch_function__ frame may be compiled)
        torch.testing.assert_close(cf(x), torch.full((2,), 10.0))
    n = counter.frame_count
    torch.testing.assert_close(cf(x), torch.ones(2))
    assert counter.frame_count == n                # outside the mode: the first entry again
    assert all("mul" not in str(g.code) or "__torch_function__" in str(g) for g in counter.graphs[:1])


def test_numpy_inputs_move_to_the_default_device_and_writes_come_back():
    graphs = []

    def recording(gm, example_inputs):
        graphs.append(gm)
        return gm

    def writes(a):
        a[0] = 5.0
        return a.sum()

    with torch.device("meta"):
        cf = xcompile.compile(writes, backend=recording)
        with pytest.raises(NotImplementedError, match="meta"):   # a meta result has no data
            cf(np.zeros((2, 3), dtype=np.float32))
    code = graphs[0].code
    assert "device(type='meta')" in code and "copy_(" in code

    a = np.zeros((2, 3), dtype=np.float32)
    with torch.device("cpu"):                     # the same device: no copy, writes reach `a`
        out = xcompile.compile(writes, backend="inductor")(a)
    assert a[0].tolist() == [5.0, 5.0, 5.0] and float(out) == 15.0


def test_from_numpy_stays_on_the_cpu_inside_a_device_context():
    def f(a):
        return torch.from_numpy(a) + 1

    a = np.ones(3, dtype=np.float32)
    graphs = []

    def recording(gm, example_inputs):
        graphs.append(gm)
        return gm

    with torch.device("meta"):
        assert f(a).device.type == "cpu"
        with pytest.raises(NotImplementedError, match="meta"):   # (meta data cannot come back)
            xcompile.compile(f, backend=recording)(a)
    code = graphs[0].code
    assert "to(device(type='meta'))" in code and "as_tensor(to, device = device(type='cpu'))" in code
