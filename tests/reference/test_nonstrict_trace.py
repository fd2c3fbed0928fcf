"""nonstrict_trace.md, its three examples, with xcompile in torch's place."""
from __future__ import annotations

import pytest
import torch

import xcompile
import xcompile.testing
from xcompile.exc import Unsupported


def test_graph_break_in_helper_is_an_error_with_fullgraph():
    def get_magic_num():
        # This explicit graph break call is meant to emulate any kind of Dynamo
        # graph break, e.g., the function is implemented in C, or uses some python
        # language feature Dynamo doesn't yet support.
        xcompile.graph_break()
        return torch.tensor([42])

    @xcompile.compile(fullgraph=True)
    def func(x):
        n = get_magic_num()
        return x + n

    with pytest.raises(Unsupported) as info:
        func(torch.rand(10))
    assert "Call to `xcompile.graph_break()`" in str(info.value)
    assert "in get_magic_num" in str(info.value)


def test_decorator_removes_the_break():
    @xcompile.nonstrict_trace
    def get_magic_num():
        # This explicit graph break call is meant to emulate any kind of Dynamo
        # graph break, e.g., the function is implemented in C, or uses some python
        # language feature Dynamo doesn't yet support.
        xcompile.graph_break()
        return torch.tensor([42])

    cnt = xcompile.testing.CompileCounter()

    @xcompile.compile(fullgraph=True, backend=cnt)
    def func(x):
        n = get_magic_num()
        return x + n

    x = torch.rand(10)
    torch.testing.assert_close(func(x), x + 42)        # No graph break and no error.
    assert cnt.frame_count == 1
    assert get_magic_num() == torch.tensor([42])        # outside compiled code: the function itself


def test_inline_wrapper_inside_the_compiled_region():
    def get_magic_num():
        # This explicit graph break call is meant to emulate any kind of Dynamo
        # graph break, e.g., the function is implemented in C, or uses some python
        # language feature Dynamo doesn't yet support.
        xcompile.graph_break()
        return torch.tensor([42])

    cnt = xcompile.testing.CompileCounter()

    @xcompile.compile(fullgraph=True, backend=cnt)
    def func(x):
        n = xcompile.nonstrict_trace(get_magic_num)()
        return x + n

    x = torch.rand(10)
    torch.testing.assert_close(func(x), x + 42)        # No graph break and no error.
    assert cnt.frame_count == 1


_SCALE = torch.tensor(3.0)


def test_non_input_tensors_are_constants_not_guarded():
    """The documented requirement: values the function reads besides its inputs are constants
    (not guarded); inputs and outputs are pytrees of tensors."""
    @xcompile.nonstrict_trace
    def scaled(d):
        xcompile.graph_break()
        return {"y": d["x"] * _SCALE, "n": d["x"].sum()}

    cnt = xcompile.testing.CompileCounter()

    @xcompile.compile(fullgraph=True, backend=cnt)
    def func(x):
        out = scaled({"x": x})
        return out["y"] + out["n"]

    x = torch.randn(4)
    torch.testing.assert_close(func(x), x * 3 + x.sum())
    assert cnt.frame_count == 1
    gm = cnt.graphs[0]
    assert len([n for n in gm.graph.nodes if n.op == "placeholder"]) == 1   # _SCALE is no input
