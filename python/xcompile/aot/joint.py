"""Trace functional ATen graphs of a lifted program: forward only, or forward+backward.

Both tracers run the program on fake tensors under ``make_fx`` with C++
functionalization and the Python dispatcher on (the latter routes
``native_batch_norm`` to its correctly-schema'd ``_native_batch_norm_legit``, so
running-stat updates show up as mutations and come out functional).

Conventions of the graphs produced here (what backends receive):
- placeholders are flat tensors; outputs a flat tuple; no in-place ops;
- ``trace_forward``:  primals -> fw_outs                         (inference)
- ``trace_joint``:    (*primals, *tangents) -> (*fw_outs, *grads)   (training)
  with one tangent per fw out that requires grad (contiguous, same shape and dtype),
  and one grad per primal that requires grad and is reached (``grad_slots``).
``fw_outs`` are listed by ``Schema.fw_outs``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

import torch
import torch.fx
import torch.fx.traceback as fx_traceback
from torch._dispatch.python import enable_python_dispatcher
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
from torch.fx.experimental.proxy_tensor import make_fx
from torch.fx.experimental.symbolic_shapes import ShapeEnv

from .functional import from_functional, functionalization, to_functional
from .schema import Schema

aten = torch.ops.aten

Decompositions = Mapping[torch._ops.OpOverload, Callable]


@dataclass
class JointGraph:
    gm: torch.fx.GraphModule
    num_primals: int
    num_tangents: int
    num_fw_outs: int
    grad_slots: list[int | None]      # per primal: index among the grad outputs, or None (no grad)

    @property
    def num_grads(self) -> int:
        return sum(s is not None for s in self.grad_slots)


def fake_inputs(primals: list, shape_env: bool = False) -> tuple[FakeTensorMode, list]:
    """Fake copies of ``primals`` (reusing their mode if they are fake already). ``shape_env``:
    the new mode gets a ShapeEnv (static sizes still), for ops whose fake kernels make fresh
    sizes (``while_loop``)."""
    for p in primals:
        if isinstance(p, FakeTensor):
            # (the frontend's fakes with symbolic sizes: parameters and buffers stay static)
            mode = p.fake_mode
            return mode, [t if isinstance(t, FakeTensor) or not isinstance(t, torch.Tensor)
                          else mode.from_tensor(t, static_shapes=True) for t in primals]
    mode = FakeTensorMode(shape_env=ShapeEnv() if shape_env else None)
    return mode, [mode.from_tensor(t, static_shapes=True) if isinstance(t, torch.Tensor) else t for t in primals]


def makes_fresh_sizes(gm: torch.fx.GraphModule) -> bool:
    """Whether a node's fake kernel makes fresh sizes and so needs a ShapeEnv in the fake mode
    (the frontend marks its ``torch.while_loop`` node's target: frontend/control_flow.py)."""
    return any(getattr(n.target, "makes_fresh_sizes", False) for n in gm.graph.nodes)


def _flatten_io(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """make_fx emits pytree in/out specs; make it plain ``f(*flat) -> tuple``."""
    gm.graph._codegen = torch.fx.graph.CodeGen()
    out = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    flat = out.args[0]
    out.args = (tuple(flat) if isinstance(flat, (list, tuple)) else (flat,),)
    gm.graph.eliminate_dead_code(is_impure_node=_keep_node)
    _drop_unused_running_stats(gm.graph)
    gm.graph.eliminate_dead_code(is_impure_node=_keep_node)
    gm.graph.lint()
    gm.recompile()
    return gm


def _keep_node(node: torch.fx.Node) -> bool:
    """Random ops stay even when unused, so RNG consumption matches eager."""
    if node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload):
        if torch.Tag.nondeterministic_seeded in node.target.tags:
            return True
    return node.is_impure()


def _drop_unused_running_stats(graph: torch.fx.Graph) -> None:
    """native_batch_norm_backward(train=True) ignores running stats: don't keep them alive."""
    for node in graph.nodes:
        if node.target is aten.native_batch_norm_backward.default and node.args[7] is True:
            args = list(node.args)
            args[3] = args[4] = None
            node.args = tuple(args)


def trace_forward(program, schema: Schema, fake_mode: FakeTensorMode, fakes: list,
                  decompositions: Decompositions | None = None) -> torch.fx.GraphModule:
    """primals -> fw_outs, functional, traced with grad disabled."""

    def forward(primals):
        with functionalization():
            fprimals = [to_functional(p) for p in primals]
            outs = program(*fprimals)
            return [from_functional(t) for t in schema.collect(outs, fprimals)]

    with enable_python_dispatcher(), torch.no_grad():
        gm = make_fx(forward, decomposition_table=decompositions or {}, tracing_mode="fake")(list(fakes))
    return _flatten_io(gm)


def trace_joint(program, schema: Schema, fake_mode: FakeTensorMode, fakes: list,
                decompositions: Decompositions | None = None) -> JointGraph:
    """(*primals, *tangents) -> (*fw_outs, *grads), functional."""
    diff = schema.diff_fw_outs
    with fake_mode:
        tangents = [torch.empty(schema.fw_outs[i].size, dtype=schema.fw_outs[i].dtype,
                                device=schema.fw_outs[i].device) for i in diff]
    grad_slots: list[int | None] = []

    def joint(primals, tangents):
        with functionalization():
            fprimals = [to_functional(p) for p in primals]
            ftangents = [to_functional(t) for t in tangents]
            with torch.enable_grad():
                used = schema.prepare(fprimals)
                outs = program(*used)
                fw_outs = schema.collect(outs, used)
                wrt = [k for k, p in enumerate(primals) if p.requires_grad]
                grads = [None] * len(primals)
                if diff and wrt:
                    got = torch.autograd.grad([fw_outs[i] for i in diff], [fprimals[k] for k in wrt],
                                              ftangents, allow_unused=True)
                    for k, g in zip(wrt, got):
                        grads[k] = g
            grad_slots.clear()
            flat_grads = []
            for g in grads:
                grad_slots.append(None if g is None else len(flat_grads))
                if g is not None:
                    flat_grads.append(from_functional(g))
            return [from_functional(t) for t in fw_outs] + flat_grads

    # (preserve_node_meta: ATen nodes keep the tags of the torch-level node they come from,
    # ``recompute`` of a checkpointed region among them, which the partitioner honours)
    with enable_python_dispatcher(), fx_traceback.preserve_node_meta():
        gm = make_fx(joint, decomposition_table=decompositions or {}, tracing_mode="fake")(
            list(fakes), tangents)
    return JointGraph(_flatten_io(gm), len(fakes), len(tangents), schema.num_fw_outs, list(grad_slots))
