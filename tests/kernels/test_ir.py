"""The loop IR on its own: index simplification, reshape indexing, the printed dump, the verifier."""
from __future__ import annotations

import pytest
import sympy
import torch

from xcompile.kernels.graph import reshape_index
from xcompile.kernels.index import FloorDiv, ModIndex, index_var, simplify_index
from xcompile.kernels.ir import Buffer, KernelGraph, Layout, LoopNode, TensorRef, format_graph, verify_graph

x0, x1 = index_var("x", 0), index_var("x", 1)


def test_reshape_round_trip_is_linear():
    idx = reshape_index((4, 6), (24,), [x0])          # a merge: // and %
    assert idx == [FloorDiv(x0, 6), ModIndex(x0, 6)]
    flat = Layout.contiguous(torch.float32, (4, 6)).flat_index(idx)
    assert simplify_index(sympy.expand(flat), {x0: 24}) == x0
    assert reshape_index((24,), (4, 6), [x0, x1]) == [6 * x0 + x1]   # a split stays linear
    assert simplify_index(ModIndex(x1, 7), {x1: 7}) == x1


def _graph(body, outputs=("buf0",)):
    bufs = {"arg0": Buffer("arg0", Layout.contiguous(torch.float32, (3, 4)), "input"),
            "buf0": Buffer("buf0", Layout.contiguous(torch.float32, (3, 4)), "computed")}
    node = LoopNode("buf0", (3, 4), body, list(outputs), torch.float32, origins=("add",))
    return KernelGraph(bufs, [node], ["arg0"], [TensorRef("buf0")], [])


def test_dump_and_verify():
    g = _graph(lambda ops, idx: ops.add(ops.load("arg0", idx), ops.constant(1.0, torch.float32)))
    verify_graph(g)
    text = format_graph(g)
    assert "load(arg0, [x0, x1])" in text and "add(" in text and "store(buf0" in text


@pytest.mark.parametrize("body,message", [
    (lambda ops, idx: ops.load("nope", idx), "unknown buffer"),
    (lambda ops, idx: ops.load("arg0", idx[:1]), "1 indices"),
])
def test_verifier_rejects(body, message):
    with pytest.raises(AssertionError, match=message):
        verify_graph(_graph(body))
