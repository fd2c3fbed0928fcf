"""Tensor work: torch functions, F.*, methods, properties, operators, indexing."""
import operator

import pytest
import torch
import torch.nn.functional as F

from xcompile.frontend.exc import Unsupported

from .helpers import check, ops, placeholders, trace


def r(*shape, dtype=torch.float32):
    return torch.randn(*shape).to(dtype)


def test_torch_functions_and_methods():
    def fn(x, y):
        a = torch.sin(x) + torch.cos(y)
        b = torch.cat([a, x], dim=0).sum(dim=1, keepdim=True)
        c = torch.where(x > 0, x, y).clamp(min=-0.5, max=0.5)
        return a, b, c.mean(), torch.stack((x, y)).transpose(0, 1).contiguous()
    c = check(fn, r(3, 4), r(3, 4))
    assert placeholders(c) == ["l_x", "l_y"]


def test_functional():
    def fn(x, w, b):
        h = F.linear(x, w, b)
        h = F.gelu(h) + F.relu(h) - F.silu(h)
        return F.softmax(h, dim=-1), F.layer_norm(h, (5,)), F.dropout(h, p=0.5, training=False)
    check(fn, r(2, 4), r(5, 4), r(5))


def test_operators_reflected_and_comparison():
    def fn(x, y):
        return (2 - x, 3 / (y.abs() + 1), x ** 2, 2 ** x, x @ y.T, -x, +x, ~(x > 0), x // 2, x % 3,
                x == y, x != 1, x < y, x >= 0.5, (x > 0) & (y > 0), (x > 0) | (y > 0), (x > 0) ^ (y < 0))
    check(fn, r(3, 3), r(3, 3))


def test_inplace_ops_on_inputs_and_locals():
    def fn(x, y):
        y += 1
        z = x * 2
        z.mul_(3)
        z += y
        x.add_(z)
        return z
    check(fn, r(4), r(4))


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_ops_that_return_their_argument_return_the_same_object(backend):
    # y = x.add_(1); y is x: eager hands back the argument itself (once: a new value, False)
    import xcompile

    def fn(x, buf):
        y = x.add_(1)
        z = x.mul_(2)
        o = torch.add(x, 1, out=buf)
        return (y is x, z is y, x.float() is x, x.to(torch.float32) is x, x.contiguous() is x,
                o is buf, x.double() is x, x.t().contiguous() is x, y * 1, o)

    xcompile.reset()
    x, buf = torch.randn(3, 3), torch.empty(3, 3)
    x2, buf2 = x.clone(), buf.clone()
    got = xcompile.compile(fn, backend=backend, fullgraph=True)(x, buf)
    want = fn(x2, buf2)
    assert got[:8] == want[:8] == (True, True, True, True, True, True, False, False)
    for a, b in zip(got[8:] + (x, buf), want[8:] + (x2, buf2)):
        torch.testing.assert_close(a, b)


def test_properties_and_metadata():
    def fn(x):
        n, m = x.shape
        out = x.view(x.size(0), -1) * x.dim() + x.numel() + x.ndim
        return out.reshape(m, n), x.T, x.mT, x.dtype, x.device, x.requires_grad, x.size(), x.is_contiguous()
    check(fn, r(3, 5))


def test_indexing_and_slicing():
    def fn(x, idx):
        return (x[0], x[:, 1:3], x[None, ..., 0], x[::2, -1], x[idx], x[1:, idx], x[..., None].shape,
                x[-1, ...])
    check(fn, r(4, 5), torch.tensor([0, 2]))


def test_setitem_is_an_inplace_graph_op():
    def fn(x, v):
        y = x.clone()
        y[0] = v
        y[1:3, 0] = 7.0
        x[:, -1] = 0
        return y
    c = check(fn, r(4, 3), r(3))
    assert operator.setitem in ops(c)


def test_tensor_methods_returning_tuples():
    def fn(x):
        a, b = x.split(2, dim=1)
        vals, idx = torch.max(x, dim=1)
        m = x.max(dim=0)
        parts = torch.chunk(x, 2)
        return a + b, vals, idx, m.values, m.indices, parts[0], len(parts)
    check(fn, r(4, 4))


def test_factories_and_dtypes():
    def fn(x):
        z = torch.zeros(x.shape[0], 2, dtype=x.dtype)
        o = torch.ones_like(x)
        a = torch.arange(x.shape[1]).float()
        return torch.cat([x, z], dim=1), o + a, x.to(torch.float64), x.float().half().float(), x.int()
    check(fn, r(3, 4))


def test_int_and_bool_tensors():
    def fn(i, m):
        return i * 2 + 1, m.logical_not(), i.sum(), (i > 2).any(), i[m]
    with pytest.raises(Unsupported, match="data-dependent"):
        # boolean mask indexing has a data-dependent output shape
        trace(fn, torch.randint(0, 5, (6,)), torch.rand(6) > 0.5)

    def fn2(i, m):
        return i * 2 + 1, m.logical_not(), i.sum(), (i > 2).any(), torch.where(m, i, 0)
    check(fn2, torch.randint(0, 5, (6,)), torch.rand(6) > 0.5)


def test_same_tensor_twice_is_one_input():
    def fn(x, y):
        return x + y
    t = r(3)
    c = trace(fn, t, t)
    assert len(c.example_inputs) == 1 and c.example_inputs[0] is t


def test_unused_tensor_argument_is_not_an_input():
    def fn(x, y, z):
        return z * 2, x
    c = trace(fn, r(2), r(2), r(2))
    assert placeholders(c) == ["l_z", "l_x"]
    assert "L['y']" not in str(c.guards)


def test_noncontiguous_inputs():
    def fn(x):
        return x * 2, x.t() + 1
    check(fn, r(4, 6).t())
    check(fn, r(4, 6)[:, ::2])


def test_requires_grad_and_backward_through_graph():
    def fn(x, w):
        return (x @ w).tanh().sum(dim=0)
    x, w = r(3, 4), r(4, 2).requires_grad_()
    c = check(fn, x, w)
    (out,) = c.gm(x, w)
    out.sum().backward()
    w2 = w.detach().clone().requires_grad_()
    fn(x, w2).sum().backward()
    torch.testing.assert_close(w.grad, w2.grad)


def test_tensor_method_via_class():
    def fn(x):
        return torch.Tensor.add(x, 1), torch.Tensor.relu(x)
    check(fn, r(3))


def test_iteration_over_tensor_rows():
    def fn(x):
        acc = 0
        for row in x:
            acc = acc + row
        return acc
    check(fn, r(3, 4))
