"""Focused regressions from the frontend hunt (tests/e2e/test_program_zoo.py, findings FH* in
/work/briefs/s2/findings.md): each program compiled vs eager, with its graph count."""
from __future__ import annotations

import pytest
import torch
import torch.nn as nn

import xcompile
from xcompile.testing import CompileCounter


@pytest.fixture(autouse=True)
def _reset():
    xcompile.reset()
    yield
    xcompile.reset()


def _run(fn, *args):
    cnt = CompileCounter()
    out = xcompile.compile(fn, backend=cnt)(*args)
    return out, cnt.frame_count


# -- FH2: imports that fail inside try/except ImportError ------------------------------------------------
def test_failed_import_is_caught_by_the_traced_except():
    def f(x):
        try:
            import xcompile_no_such_module_xyz  # noqa: F401
            y = x + 1
        except ImportError:
            y = x * 2
        return y
    x = torch.randn(3)
    out, graphs = _run(f, x)
    torch.testing.assert_close(out, x * 2)
    assert graphs == 1


def test_from_import_of_a_missing_name_is_an_import_error():
    def f(x):
        try:
            from math import xcompile_no_such_name  # noqa: F401
            y = x + 1
        except ImportError as e:
            y = x * 3 if "xcompile_no_such_name" in str(e) else x
        return y
    x = torch.randn(3)
    out, graphs = _run(f, x)
    torch.testing.assert_close(out, x * 3)
    assert graphs == 1


def test_uncaught_failed_import_raises_like_eager():
    def f(x):
        import xcompile_no_such_module_xyz  # noqa: F401
        return x
    with pytest.raises(ModuleNotFoundError):
        xcompile.compile(f, backend="eager")(torch.randn(3))


# -- FH6: every torch is_compiling() flag is True in compiled code (as under torch.compile) -------------------
@pytest.mark.filterwarnings("ignore:.*is deprecated")
def test_all_is_compiling_flags_are_true_when_compiled():
    import torch._dynamo
    import torch._utils

    def f(x):
        flags = (torch._dynamo.is_compiling(), torch._utils.is_compiling(), torch.compiler.is_compiling())
        return (x + 1 if all(flags) else x - 1), flags
    x = torch.randn(3)
    (out, flags), graphs = _run(f, x)
    assert flags == (True, True, True)
    torch.testing.assert_close(out, x + 1)
    assert graphs == 1
    assert f(x)[1] == (False, False, False)


# -- FH3: slicing nn.ModuleList / nn.Sequential (timm/HF: `for blk in self.blocks[1:]`) -------------------
class _Sliced(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(nn.Linear(4, 4) for _ in range(4))
        self.seq = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 4))

    def forward(self, x):
        for b in self.blocks[1:]:
            x = b(x)
        for b in self.blocks[::-2]:
            x = b(x)
        sub = self.blocks[:2]
        x = sub[-1](x) + len(sub)
        x = self.seq[1:](self.seq[:-1](x))
        return x, len(self.blocks[-3:]), type(self.blocks[1:]).__name__


def test_module_list_and_sequential_slices_compile_to_one_graph():
    m = _Sliced()
    cnt = CompileCounter()
    g = xcompile.compile(m, backend=cnt)
    for _ in range(2):
        x = torch.randn(2, 4, requires_grad=True)
        xe = x.detach().clone().requires_grad_()
        a, e = g(x), m(xe)
        torch.testing.assert_close(a[0], e[0])
        assert a[1:] == e[1:] == (3, "ModuleList")
        a[0].sum().backward()
        e[0].sum().backward()
        torch.testing.assert_close(x.grad, xe.grad)
    assert cnt.frame_count == 1


def test_module_list_slice_sees_a_replaced_child():
    m = _Sliced()
    g = xcompile.compile(m, backend="eager")
    x = torch.randn(2, 4)
    g(x)
    m.blocks[2] = nn.Linear(4, 4)
    torch.testing.assert_close(g(x)[0], m(x)[0])


# -- FH4: forward (pre-)hooks on submodules are inlined (was: a graph break around each hooked call) ----------
class _Hooked(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b, self.c = nn.Linear(4, 4), nn.Linear(4, 4), nn.Linear(4, 4)
        self.a.register_forward_pre_hook(lambda m, inp: (inp[0] * 2,))
        self.a.register_forward_pre_hook(lambda m, inp: inp[0] + 1)          # not a tuple: wrapped
        self.b.register_forward_hook(lambda m, inp, out: out + inp[0])
        self.b.register_forward_hook(lambda m, inp, out: None)               # None keeps the output
        self.feats = []           # test: self.c becomes a _ScaledLinear with kwargs hooks + feature capture

    def forward(self, x):
        return self.c(self.b(self.a(x)), scale=1.0)


class _ScaledLinear(nn.Linear):
    def forward(self, x, scale=1.0):
        return super().forward(x) * scale


def test_forward_hooks_are_inlined():
    m = _Hooked()
    m.c = _ScaledLinear(4, 4)
    m.c.register_forward_pre_hook(lambda mod, a, k: (a, {**k, "scale": 3.0}), with_kwargs=True)
    m.c.register_forward_hook(lambda mod, a, k, out: out * k["scale"], with_kwargs=True)
    m.c.register_forward_hook(lambda mod, i, o: m.feats.append(o.detach()))
    cnt = CompileCounter()
    g = xcompile.compile(m, backend=cnt)
    for _ in range(2):
        x = torch.randn(2, 4)
        out = g(x)
        got = list(m.feats)
        m.feats.clear()
        expected = m(x)
        torch.testing.assert_close(out, expected)
        assert len(got) == len(m.feats) == 1
        torch.testing.assert_close(got[0], m.feats[0])
        m.feats.clear()
    assert cnt.frame_count == 1


def test_removing_a_forward_hook_recompiles():
    m = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    h = m[0].register_forward_hook(lambda mod, i, o: o * 10)
    cnt = CompileCounter()
    g = xcompile.compile(m, backend=cnt)
    x = torch.randn(2, 4)
    torch.testing.assert_close(g(x), m(x))
    h.remove()
    torch.testing.assert_close(g(x), m(x))
    assert cnt.frame_count == 2


# -- FH5: a break inside a container method's arguments (d.update(f(x))) --------------------------------------
def _breaks(x):
    print("graph break")
    return {"a": x * 2}


def _update(x, d):
    d.update(_breaks(x))
    return d["a"] + 1


def _append(x, lst):
    lst.append(_breaks(x)["a"])
    return lst[-1] + 1


def _add_(x, t):
    t.add_(_breaks(x)["a"])
    return t * 2


@pytest.mark.parametrize("fn, state", [(_update, lambda: {"b": 1}), (_append, lambda: [0]),
                                       (_add_, lambda: torch.zeros(3))])
def test_break_in_method_arguments_does_not_recompile(fn, state, capsys):
    cnt = CompileCounter()
    g = xcompile.compile(fn, backend=cnt)
    for i in range(4):
        x = torch.randn(3)
        s_c, s_e = state(), state()
        out = g(x, s_c)
        expected = fn(x, s_e)
        torch.testing.assert_close(out, expected)
        if isinstance(s_e, torch.Tensor):
            torch.testing.assert_close(s_c, s_e)
        else:
            assert type(s_c) is type(s_e) and len(s_c) == len(s_e)
        if i == 0:
            first = cnt.frame_count
    assert cnt.frame_count == first == 2          # prefix + resume, compiled once (was: a resume per call)
