"""Code generated at run time (a file named "<...>") is compiled like user code (issue #19 item 12).

attrs' generated methods, FX's ``<eval_with_key>`` forward and a tool's ``exec`` under its own
name were skipped as if they were frozen library code, and so were the frames they reached
through the frame hook; torch.compile compiles them. ``<frozen ...>`` (importlib) and
xcompile's own generated code stay skipped, and a compiled graph is never traced again.
"""
from __future__ import annotations

import importlib._bootstrap

import pytest
import torch

import xcompile
import xcompile.code_states as code_states
import xcompile.convert_frame as convert_frame
from xcompile.testing import CompileCounter, CompileCounterWithBackend

SRC = """
def gen(x):
    return torch.sin(x) + 1

def gen_break(x):
    y = x.cos()
    print("", end="")
    return y * 2

def gen_caller(x):
    print("", end="")
    return user_helper(x) - 1
"""


@pytest.fixture(autouse=True)
def _reset():
    xcompile.reset()
    yield
    xcompile.reset()


def user_helper(x):
    return x.tanh() * 3


def generated(filename="<generated>"):
    g = {"torch": torch, "user_helper": user_helper}
    exec(compile(SRC, filename, "exec"), g)  # noqa: S102  (a program made by the test)
    return g


@pytest.mark.parametrize("filename", ["<generated>", "<attrs generated init x.Y>", "<my tool 3>"])
def test_generated_function_is_captured(filename):
    g = generated(filename)
    cnt = CompileCounter()
    x = torch.randn(4)
    torch.testing.assert_close(xcompile.compile(g["gen"], backend=cnt)(x), g["gen"](x))
    assert cnt.frame_count == 1


def test_generated_callee_with_a_break_is_compiled():
    g = generated()

    def user(x):
        return g["gen_break"](x) + 1

    cnt = CompileCounter()
    x = torch.randn(4)
    torch.testing.assert_close(xcompile.compile(user, backend=cnt)(x), user(x))
    # gen_break's own frame: cos, then its resume (y * 2); user's resume (+ 1)
    assert cnt.frame_count == 3


def test_calls_from_generated_code_are_compiled():
    g = generated()
    cnt = CompileCounter()
    x = torch.randn(4)
    with xcompile.optimize(cnt):
        out = g["gen_caller"](x)
    torch.testing.assert_close(out, g["gen_caller"](x))
    assert cnt.frame_count >= 1                 # the resume after the print, with user_helper inlined


class Small(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        return torch.relu(self.lin(x)) * 3


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_fx_graph_module_forward_is_traced(backend):
    gm = torch.fx.symbolic_trace(Small())
    assert gm.forward.__code__.co_filename.startswith("<eval_with_key>")
    cnt = CompileCounterWithBackend(backend)
    x = torch.randn(2, 4)
    torch.testing.assert_close(xcompile.compile(gm, backend=cnt)(x), gm(x))
    assert cnt.frame_count == 1


def test_fx_graph_module_called_from_compiled_code_is_inlined():
    gm = torch.fx.symbolic_trace(Small())

    def f(x):
        return gm(x) + 1

    cnt = CompileCounter()
    x = torch.randn(2, 4)
    torch.testing.assert_close(xcompile.compile(f, backend=cnt)(x), f(x))
    assert cnt.frame_count == 1 and cnt.op_count >= 3


def test_attrs_generated_methods_are_compiled():
    attr = pytest.importorskip("attr")

    @attr.s
    class Pair:
        a = attr.ib()
        b = attr.ib()

    assert Pair.__init__.__code__.co_filename.startswith("<attrs generated")

    def f(x):
        p = Pair(x.sin(), x.cos())
        return p.a + p.b

    cnt = CompileCounter()
    x = torch.randn(4)
    torch.testing.assert_close(xcompile.compile(f, backend=cnt, fullgraph=True)(x), f(x))
    assert cnt.frame_count == 1


def test_frozen_and_own_generated_code_stay_skipped():
    assert code_states.skip_code(importlib._bootstrap._find_and_load.__code__)
    code = compile("def f(): pass", "<xcompile wrapper>", "exec")
    assert code_states.skip_code(code)
    assert not code_states.skip_code(compile("pass", "<generated>", "exec"))


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_compiled_graphs_are_never_traced_again(backend, monkeypatch):
    """A frame with graph breaks runs its graph through untraced(); the AOT backward runs
    untraced whatever callback is set: FX forwards and kernel wrappers are never compiled."""
    seen = []
    convert = convert_frame.ConvertFrame._convert

    def spy(self, code, *args):
        seen.append(code.co_filename)
        return convert(self, code, *args)

    monkeypatch.setattr(convert_frame.ConvertFrame, "_convert", spy)

    def step(x, w):
        loss = (x @ w).sin().sum()
        loss.backward()                      # a graph break: runs inside the runner
        return w.grad * 1

    x = torch.randn(2, 3)
    w = torch.randn(3, 3, requires_grad=True)
    w2 = w.detach().clone().requires_grad_()
    out = xcompile.compile(step, backend=backend)(x, w)
    torch.testing.assert_close(out, step(x, w2))
    assert seen and not [f for f in seen if f.startswith("<")], seen
