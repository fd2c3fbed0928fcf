"""One set of kernels for every size: the inductor backend on a graph with symbolic sizes.

The frontend's graph carries fake inputs with symbolic sizes (``f32[s0, 64]``) and symbolic
ints. Here the graph is traced to ATen on those very fakes (so the trace reasons with the
frontend's ShapeEnv), lowered with sympy sizes, and compiled into kernels that take the sizes
as arguments; the wrapper reads them from its inputs each call (``kernels/sizes.py``).

The frontend's guards were produced before the backend runs. A decomposition or lowering that
needs a new fact about the sizes (it would add a guard, or specialize a symbol) makes this
path give up, as does anything the symbolic generator does not cover yet (Triton kernels,
training graphs, graphs that write into their inputs): the caller then compiles the graph once
per size (``per_size.py``), which is always correct. Under ``XCOMPILE_LOGS=dynamic`` each
give-up is logged with its reason.
"""
from __future__ import annotations

import os
import traceback
from typing import Any, Callable

import torch
import torch.fx
from torch._guards import detect_fake_mode

from .. import config, log
from ..aot.lift import lift
from ..aot.schema import writes_in_place
from ..guards.shape_expr import UnsupportedShapeExpr, compile_relation
from ..kernels.compile import compile_symbolic_graph
from ..kernels.decompose import trace_aten
from ..kernels.sizes import SymbolicUnsupported
from ..shape_state import accept_facts, shape_facts


def _shape_env(fakes: list) -> Any:
    for f in fakes:
        sizes = [f] if isinstance(f, torch.SymInt) else \
            [*f.shape, *f.stride(), f.storage_offset()] if isinstance(f, torch.Tensor) else []
        for s in sizes:
            if isinstance(s, torch.SymInt):
                return s.node.shape_env
    return None


def _new_facts(env, before: tuple) -> str | None:
    """Why what the ATen trace or the lowering taught the ShapeEnv cannot be guarded (None: it
    can: new relations the guard programs express, no size fixed to a value)."""
    now = shape_facts(env)
    if now == before:
        return None
    if now[1:] != before[1:]:
        return "a size specialized to a value, or a runtime assert"
    for g in env.guards[before[0]:]:
        try:
            compile_relation(env.simplify(g.expr), lambda s: 0)
        except UnsupportedShapeExpr:
            return f"a guard the guard programs cannot express: {g.expr}"
    return None


def compile_dynamic(gm: torch.fx.GraphModule, example_inputs: list) -> Callable | None:
    """The inference graph ``gm`` compiled once for all sizes, or None (compile per size)."""
    if not config.dynamic_kernels:
        return None
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    metas = [n.meta.get("example_value") for n in placeholders]
    env = _shape_env(metas)
    fake_mode = detect_fake_mode([m for m in metas if isinstance(m, torch.Tensor)])
    if env is None or fake_mode is None:
        return _give_up("no fake inputs with symbolic sizes")
    if writes_in_place(gm):
        return _give_up("the graph writes into its inputs")
    try:
        program = lift(gm)
    except Exception as e:  # noqa: BLE001 - the per-size path reports it
        return _give_up(f"cannot lift parameters: {e}")
    inputs = list(example_inputs)
    if torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad
                                       for t in inputs + list(program.state)):
        return _give_up("a training graph")
    fakes = [m if isinstance(m, (torch.Tensor, torch.SymInt)) else a for m, a in zip(metas, inputs)]
    fakes += [fake_mode.from_tensor(t, static_shapes=True) for t in program.state]
    before = shape_facts(env)
    try:
        with torch.no_grad():
            aten_gm = trace_aten(program, fakes)
        why = _new_facts(env, before)
        if why is not None:
            return _give_up(f"the ATen trace needs {why}")
        if _writes_or_aliases(aten_gm):
            return _give_up("outputs alias inputs")
        n = len(inputs)
        fn = compile_symbolic_graph(aten_gm, inputs + list(program.state),
                                    bound={n + i: t for i, t in enumerate(program.state)})
    except Exception as e:
        if config.kernel_raise_errors and not _expected(e):
            raise
        frames = traceback.extract_tb(e.__traceback__)
        tb = next((f for f in reversed(frames) if "xcompile" in f.filename), frames[-1])
        return _give_up(f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''} "
                        f"({os.path.basename(tb.filename)}:{tb.lineno})")
    why = _new_facts(env, before)
    if why is not None:
        return _give_up(f"the lowering needs {why}")
    if shape_facts(env) != before:
        log.log("dynamic", "the ATen trace added %d guards on the sizes", shape_facts(env)[0] - before[0])
    accept_facts(env)                     # the frame's guards now include what this trace learned
    log.log("dynamic", "one set of kernels serves every size of this graph")
    return fn


def _expected(e: Exception) -> bool:
    return isinstance(e, (SymbolicUnsupported, TypeError))


def _writes_or_aliases(aten_gm: torch.fx.GraphModule) -> bool:
    """Functionalization ends a graph that writes an input with ``copy_``; an output that is an
    input (or a view of one) needs the aliasing runtime: both are left to the per-size path."""
    placeholders = [n for n in aten_gm.graph.nodes if n.op == "placeholder"]
    storages = set()
    for p in placeholders:
        v = p.meta.get("val")
        if isinstance(v, torch.Tensor):
            storages.add(id(v.untyped_storage()))
    for n in aten_gm.graph.nodes:
        if n.op == "call_function" and n.target is torch.ops.aten.copy_.default:
            return True
    out = aten_gm.graph.output_node()
    for a in torch.fx.node.map_aggregate(out.args[0], lambda x: x) or ():
        v = a.meta.get("val") if isinstance(a, torch.fx.Node) else None
        if isinstance(v, torch.Tensor) and id(v.untyped_storage()) in storages:
            return True
    return False


def _give_up(why: str) -> None:
    log.log("dynamic", "kernels per size instead of symbolic ones: %s", why)
    return None
