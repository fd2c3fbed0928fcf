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
from torch.multiprocessing.reductions import StorageWeakRef

from .. import config, log
from ..aot.aliasing import any_shared
from ..aot.api import aot_compile, run_as_is
from ..aot.lift import lift
from ..aot.schema import OutputKind
from ..guards.shape_expr import UnsupportedShapeExpr, compile_relation
from ..kernels.compile import compile_symbolic_graph
from ..kernels.decompose import DECOMPOSITIONS, trace_aten
from ..kernels.sizes import SymbolicUnsupported, shape_env_of
from ..shape_state import accept_facts, shape_facts


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


class _Setup:
    """The frontend's fakes for a graph with symbolic sizes, and the lifted program."""

    def __init__(self, gm: torch.fx.GraphModule, example_inputs: list):
        self.gm = gm
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        metas = [n.meta.get("example_value") for n in placeholders]
        self.env = shape_env_of(metas)
        self.fake_mode = detect_fake_mode([m for m in metas if isinstance(m, torch.Tensor)])
        self.inputs = list(example_inputs)
        self.fakes = [m if isinstance(m, (torch.Tensor, torch.SymInt, torch.SymFloat)) else a
                      for m, a in zip(metas, self.inputs)]
        self.program: Any = None
        self.why: str | None = None
        if self.env is None or self.fake_mode is None:
            self.why = "no fake inputs with symbolic sizes"
            return
        try:
            self.program = lift(gm)
        except Exception as e:  # noqa: BLE001 - the per-size path reports it
            self.why = f"cannot lift parameters: {e}"
            return
        if any_shared(self.inputs + list(self.program.state)):
            self.why = "inputs share memory"
        self.before = shape_facts(self.env)

    @property
    def training(self) -> bool:
        return torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad
                                               for t in self.inputs + list(self.program.state))

    def state_fakes(self) -> list:
        assert self.fake_mode is not None           # (checked when set up)
        return [self.fake_mode.from_tensor(t, static_shapes=True) for t in self.program.state]

    def finish(self, fn: Callable) -> Callable | None:
        """``fn`` if the ShapeEnv learned nothing unguardable meanwhile (its guards join the frame's)."""
        why = _new_facts(self.env, self.before)
        if why is not None:
            return _give_up(f"the trace needs {why}")
        if shape_facts(self.env) != self.before:
            log.log("dynamic", "the ATen trace added %d guards on the sizes", shape_facts(self.env)[0] - self.before[0])
        accept_facts(self.env)               # the frame's guards now include what this trace learned
        log.log("dynamic", "one compile serves every size of this graph")
        return fn


def _attempt(setup: _Setup, build: Callable[[], Callable | None]) -> Callable | None:
    if setup.why is not None:
        return _give_up(setup.why)
    try:
        fn = build()
    except Exception as e:
        if config.kernel_raise_errors and not _expected(e):
            raise
        frames = traceback.extract_tb(e.__traceback__)
        tb = next((f for f in reversed(frames) if "xcompile" in f.filename), frames[-1])
        return _give_up(f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''} "
                        f"({os.path.basename(tb.filename)}:{tb.lineno})")
    return None if fn is None else setup.finish(fn)


def compile_dynamic(gm: torch.fx.GraphModule, example_inputs: list) -> Callable | None:
    """``gm`` compiled by the inductor backend once for all sizes, or None (compile per size)."""
    if not config.dynamic_kernels:
        return None
    setup = _Setup(gm, example_inputs)
    if setup.why is None and setup.training:
        return _attempt(setup, lambda: _aot(setup, _kernels, _kernels_or_graph, decompositions=DECOMPOSITIONS,
                                            inference_compiler=compile_symbolic_graph))

    def build() -> Callable | None:
        fakes = setup.fakes + setup.state_fakes()
        with torch.no_grad():
            aten_gm = trace_aten(setup.program, fakes)
        why = _new_facts(setup.env, setup.before)
        if why is not None:
            return _give_up(f"the ATen trace needs {why}")
        if _writes_or_aliases(aten_gm):
            return _give_up("outputs alias inputs")
        n, state = len(setup.inputs), setup.program.state
        return compile_symbolic_graph(aten_gm, setup.inputs + list(state),
                                      bound={n + i: t for i, t in enumerate(state)})
    return _attempt(setup, build)


def aot_dynamic(gm: torch.fx.GraphModule, example_inputs: list, partition: str) -> Callable | None:
    """The ``aot_eager`` backend on symbolic sizes: forward and backward graphs traced once, run
    as FX graphs for every size; None where it cannot (compile per size)."""
    setup = _Setup(gm, example_inputs)
    return _attempt(setup, lambda: _aot(setup, run_as_is, run_as_is, partition=partition))


def _aot(setup: _Setup, fw_compiler: Callable, bw_compiler: Callable, partition: str = "min_cut",
         decompositions: dict | None = None, inference_compiler: Callable | None = None) -> Callable | None:
    compiled = aot_compile(setup.gm, setup.fakes, fw_compiler=fw_compiler, bw_compiler=bw_compiler,
                           inference_compiler=inference_compiler or fw_compiler, partition=partition,
                           decompositions=decompositions, program=setup.program, state=setup.state_fakes())
    schema = compiled.schema
    if schema.meta_changes or any(o.kind is not OutputKind.PLAIN for o in schema.outputs):
        return _give_up("outputs alias inputs, or inputs are restrided")
    compiled.freeze_shapes(setup.env)
    return compiled


def _kernels(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
    """A forward (or inference) graph of the training path as kernels taking the sizes."""
    return compile_symbolic_graph(gm, example_inputs, training=True)


def _kernels_or_graph(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
    """The backward, compiled at the first ``.backward()`` (the frame's guards are installed by
    then): kernels taking the sizes when they need nothing new of the sizes, else the FX
    graph itself, which serves every size."""
    env = shape_env_of([n.meta.get("val") for n in gm.graph.nodes if n.op == "placeholder"])
    before = shape_facts(env) if env is not None else None
    try:
        fn = compile_symbolic_graph(gm, example_inputs, training=True)
    except Exception as e:
        if config.kernel_raise_errors and not _expected(e):
            raise
        log.log("dynamic", "backward graph runs as FX (no symbolic kernels): %s: %s", type(e).__name__, e)
        return gm.forward
    if env is not None and shape_facts(env) != before:
        log.log("dynamic", "backward graph runs as FX: its kernels would need a new guard on the sizes")
        return gm.forward
    return fn


def _expected(e: Exception) -> bool:
    return isinstance(e, (SymbolicUnsupported, TypeError))


def _writes_or_aliases(aten_gm: torch.fx.GraphModule) -> bool:
    """Functionalization ends a graph that writes an input with ``copy_``; an output that is an
    input (or a view of one) needs the aliasing runtime: both are left to the per-size path."""
    storages = {StorageWeakRef(v.untyped_storage()) for n in aten_gm.graph.nodes if n.op == "placeholder"
                for v in (n.meta.get("val"),) if isinstance(v, torch.Tensor)}
    if any(n.op == "call_function" and n.target is torch.ops.aten.copy_.default for n in aten_gm.graph.nodes):
        return True
    outs: list = []
    torch.fx.node.map_arg(aten_gm.graph.output_node().args[0], outs.append)
    return any(isinstance(v := o.meta.get("val"), torch.Tensor) and StorageWeakRef(v.untyped_storage()) in storages
               for o in outs)


def _give_up(why: str) -> Any:
    """Logs why this graph is compiled per size; returns None (no symbolic compile)."""
    log.log("dynamic", "kernels per size instead of symbolic ones: %s", why)
    return None
