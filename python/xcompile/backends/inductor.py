"""Backend "inductor": fused C++/OpenMP (CPU) or Triton (GPU) kernels from ``xcompile.kernels``.

``inductor(gm, example_inputs) -> callable`` (the torch backend signature).  Two paths:

- inference (nothing requires grad, or grad is off): lift parameters/buffers to inputs,
  trace a functional, decomposed ATen graph with ``make_fx`` and compile it with
  ``compile_aten_graph``; the parameters are bound into the generated wrapper (the real
  objects, so in-place optimizer updates are seen on the next call).
- training: ``aot.api.aot_compile`` builds forward and backward ATen graphs and hands each
  to ``compile_aten_graph``.  Inference graphs that write into an input and return it (or a
  view of it) go there too: its runtime returns the real input object or a view of it, as
  eager does, where the functional graph alone would return a fresh tensor.

Anything that fails runs the graph eagerly with one warning; it never raises into user code.
Graphs with captured scalars (``config.capture_scalar_outputs``) run as they are, logged under
``fallbacks`` (see backends/eager.py ``scalar_graph``).
"""
from __future__ import annotations

import warnings

import torch
import torch.fx
from torch.multiprocessing.reductions import StorageWeakRef

from .. import config, log, warm_cache
from ..aot.aliasing import WrittenInputsChecked, any_shared
from ..aot.api import aot_compile
from ..aot.joint import fake_inputs, makes_fresh_sizes
from ..aot.lift import lift
from ..aot.schema import OutputKind, analyze
from ..aot.schema import writes_in_place as _writes_in_place
from ..debug.minifier import repro_compiler
from ..kernels import cudagraphs
from ..kernels.compile import compile_aten_graph, compile_symbolic_graph
from ..kernels.decompose import DECOMPOSITIONS, trace_aten
from ..kernels.sizes import SymbolicUnsupported
from ..shape_state import shape_facts
from .dynamic_kernels import compile_dynamic
from .eager import scalar_graph, unstrided_graph
from .per_size import PerSize, number_outputs, symbolic_inputs


def _no_replay(why: str) -> None:
    if cudagraphs.enabled():
        log.log("cudagraphs", "graph runs without replay: %s", why)


def _needs_grad(tensors) -> bool:
    return torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad for t in tensors)


def _eager(gm: torch.fx.GraphModule, why: str):
    warnings.warn(f"xcompile inductor: running this graph eagerly ({why})", RuntimeWarning, stacklevel=3)
    log.log("fallbacks", "whole graph eager: %s", why)
    return gm.forward


def inductor(gm: torch.fx.GraphModule, example_inputs: list):
    runner = scalar_graph(gm, "inductor")             # captured scalars (Tensor.item()): run as is
    if runner is not None:
        _no_replay("the graph reads tensor values on the host (captured scalars)")
        return runner
    runner = unstrided_graph(gm, "inductor")          # sparse tensors: run as is
    if runner is not None:
        _no_replay("the graph holds sparse (unstrided) tensors")
        return runner
    if any(isinstance(t, torch.Tensor) and (t.is_neg() or t.is_conj()) for t in example_inputs):
        # (``c.conj().imag`` is a lazily negated view: ATen ops resolve the bit, a kernel would read
        # the raw memory; the frame's guards check the bits, so only such calls get here)
        return _eager(gm, "an input has the negative or conjugate bit (a lazily negated or conjugated view)")
    dynamic = symbolic_inputs(gm)
    if dynamic:        # symbolic sizes: kernels taking the sizes, else one static compile per size
        _no_replay("dynamic shapes (the sizes are symbolic)")
        return compile_dynamic(gm, example_inputs) or _with_float_inputs(gm, example_inputs, dynamic) or \
            PerSize(inductor, gm, example_inputs, dynamic, "inductor")
    runner = number_outputs(inductor, gm, example_inputs, "inductor")
    if runner is not None:             # sizes returned as numbers: compiled without them
        return runner
    try:
        program = lift(gm)
    except Exception as e:  # noqa: BLE001
        return _eager(gm, f"cannot lift parameters: {type(e).__name__}: {e}")
    inputs = list(example_inputs)
    if _needs_grad(inputs + list(program.state)):
        return _training(gm, inputs)
    primals = inputs + list(program.state)
    if any_shared(primals) and _writes_in_place(gm):
        # functionalization would see the examples' aliasing: aot traces independent stand-ins
        return _training(gm, inputs)
    n = len(inputs)
    bound = {n + i: t for i, t in enumerate(program.state)}
    # warm start: a wrapper an earlier process compiled for this very graph and metadata (not
    # with CUDA graphs: recording checks the ATen graph, which a warm hit does not trace)
    warm_key = warm_cache.graph_key("inductor", gm, inputs, program.state, program._attr_slot)
    warm = None if cudagraphs.enabled() else warm_cache.lookup(warm_key, bound)
    if warm is not None:
        return warm
    try:
        with torch.no_grad():
            aten_gm = trace_aten(program, _traced_inputs(gm, primals))
    except Exception as e:
        if config.kernel_raise_errors:
            raise
        return _eager(gm, f"cannot trace to ATen: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
    written = _written_inputs(aten_gm)
    if written is None or (written and _returns_tensors(gm) and _output_aliases_input(program, primals)) \
            or _returns_detached_input(aten_gm, primals):
        # ``x.add_(1); return x`` returns x itself in eager, ``x.t_()`` restrides x itself: aot's
        # runtime writes new values back, replays restrides and rebuilds such outputs from the
        # real inputs (it picks inference under no_grad)
        return _training(gm, inputs)
    compile_graph = compile_aten_graph
    if config.repro_after is not None:        # the minifier (debug/minifier.py) checks this compile
        compile_graph = repro_compiler(compile_aten_graph)
    compiled = compile_graph(aten_gm, primals, bound=bound)
    if not written and not cudagraphs.enabled():
        warm_cache.store(warm_key, compiled, [aten_gm], bound)
    if cudagraphs.enabled():
        compiled = cudagraphs.wrap(compiled, aten_gm, n, static=cudagraphs.static_tensors(gm), name="graph")
    if written and len(primals) > 1:
        return WrittenInputsChecked(compiled, gm.forward, tuple(program.state), written)
    return compiled


def _with_float_inputs(gm: torch.fx.GraphModule, example_inputs: list, positions: list[int]):
    """Static sizes and symbolic floats (an optimizer step under an LR scheduler): one compile
    whose kernels take the floats as arguments, or None (a copy per value: ``PerSize``). Only
    the plain inference path: the ATen trace runs on the frontend's SymFloats, and whatever it
    or the lowering would learn about their values (a guard) gives up, as does a use of a float
    the generator does not take (``kernels.sizes.FloatArg``)."""
    metas = [n.meta.get("example_value") for n in gm.graph.nodes if n.op == "placeholder"]
    if not config.dynamic_kernels or cudagraphs.enabled() or makes_fresh_sizes(gm) or \
            not all(isinstance(metas[i], torch.SymFloat) for i in positions):
        return None
    env = metas[positions[0]].node.shape_env
    before = shape_facts(env)
    try:
        program = lift(gm)
        inputs = list(example_inputs)
        primals = inputs + list(program.state)
        if _needs_grad(primals) or (any_shared(primals) and _writes_in_place(gm)):
            return _float_give_up("training, or inputs that share memory")
        traced = [metas[i] if i in positions else p for i, p in enumerate(primals)]
        with torch.no_grad():
            aten_gm = trace_aten(program, traced)
        written = _written_inputs(aten_gm)
        if written is None or (written and _returns_tensors(gm) and _output_aliases_input(program, primals)) \
                or _returns_detached_input(aten_gm, primals):
            return _float_give_up("outputs alias inputs, or inputs are restrided")
        n = len(inputs)
        compiled = compile_symbolic_graph(aten_gm, primals, bound={n + i: t for i, t in enumerate(program.state)})
    except Exception as e:
        if config.kernel_raise_errors and not isinstance(e, (SymbolicUnsupported, TypeError)):
            raise
        return _float_give_up(f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}")
    if shape_facts(env) != before:
        return _float_give_up("the trace needs a fact about a float's value (a guard)")
    log.log("dynamic", "one compile serves every value of the float inputs")
    if written and len(primals) > 1:
        return WrittenInputsChecked(compiled, gm.forward, tuple(program.state), written)
    return compiled


def _float_give_up(why: str) -> None:
    log.log("dynamic", "kernels per float value instead of kernels taking the floats: %s", why)
    return None


def _traced_inputs(gm: torch.fx.GraphModule, primals: list) -> list:
    """What ``trace_aten`` traces on: the real inputs, or fakes in a mode with a ShapeEnv when
    an op's fake kernel makes fresh sizes (``while_loop``)."""
    if makes_fresh_sizes(gm):
        return fake_inputs(primals, shape_env=True)[1]
    return primals


def _written_inputs(aten_gm: torch.fx.GraphModule) -> tuple[int, ...] | None:
    """The primals a functional graph writes into: functionalization ends such a graph with
    ``copy_(input, new)``. None when something else is left in place on an input (a restride:
    ``as_strided_``)."""
    placeholders = {n: k for k, n in enumerate(n for n in aten_gm.graph.nodes if n.op == "placeholder")}
    written = []
    for n in aten_gm.graph.nodes:
        if n.op != "call_function" or not n.args or n.args[0] not in placeholders:
            continue
        if n.target is torch.ops.aten.copy_.default:
            written.append(placeholders[n.args[0]])
        elif isinstance(n.target, torch._ops.OpOverload) and n.target._schema.is_mutable:
            return None
    return tuple(sorted(set(written)))


def _returns_detached_input(aten_gm: torch.fx.GraphModule, primals: list) -> bool:
    """Whether an output is a view of an input that requires grad (this graph runs under
    no_grad), other than the input itself: the kernels return it as ``as_strided`` of the
    input, which requires grad; eager's ``x.detach()`` does not. aot's runtime rebuilds each
    such output as eager made it (from ``x.detach()`` for that one)."""
    placeholders = [n for n in aten_gm.graph.nodes if n.op == "placeholder"]
    inputs = {StorageWeakRef(v.untyped_storage()) for n, p in zip(placeholders, primals)
              for v in (n.meta.get("val"),)
              if isinstance(v, torch.Tensor) and isinstance(p, torch.Tensor) and p.requires_grad}
    if not inputs:
        return False
    out = aten_gm.graph.output_node()
    for n in _leaves(out.args[0]):
        v = n.meta.get("val") if isinstance(n, torch.fx.Node) else None
        if n.op != "placeholder" and isinstance(v, torch.Tensor) and \
                StorageWeakRef(v.untyped_storage()) in inputs:
            return True
    return False


def _leaves(args) -> list:
    out: list = []
    torch.fx.node.map_arg(args, out.append)
    return out


def _returns_tensors(gm: torch.fx.GraphModule) -> bool:
    """Whether the graph returns a tensor (only a returned tensor can alias an input; an
    optimizer step returns none, and the fake run that would ask is a second of a big step's
    compile)."""
    out = gm.graph.output_node()
    return any(isinstance(n, torch.fx.Node) and isinstance(n.meta.get("example_value", n.meta.get("val")), torch.Tensor)
               or (isinstance(n, torch.fx.Node) and "example_value" not in n.meta and "val" not in n.meta)
               for n in _leaves(out.args[0]))


def _output_aliases_input(program, primals: list) -> bool:
    """Whether an output is an input or a view of one (a fake run; only for mutating graphs,
    where the functional graph would return a fresh tensor instead)."""
    try:
        fake_mode, fakes = fake_inputs(primals)
        schema = analyze(program, fakes, fake_mode)
    except Exception:  # noqa: BLE001 - aot_compile reports it (or runs the graph eagerly)
        return True
    return bool(schema.meta_changes) or any(
        o.kind in (OutputKind.IS_INPUT, OutputKind.INPUT_VIEW) for o in schema.outputs)


def _training_graph(gm: torch.fx.GraphModule, example_inputs: list):
    return warm_cache.compile_cached(compile_aten_graph, gm, example_inputs, training=True)


def _inference_graph(gm: torch.fx.GraphModule, example_inputs: list):
    return warm_cache.compile_cached(compile_aten_graph, gm, example_inputs)


def _training(gm: torch.fx.GraphModule, inputs: list):
    """``aot_compile``: training graphs, and inference graphs whose outputs alias inputs they
    mutate (its runtime handles write-back and view regeneration for both)."""
    fw, bw, inference = _training_graph, _training_graph, _inference_graph
    if cudagraphs.enabled():         # each graph replayed; the lazily compiled backward too
        fw, bw, inference = cudagraphs.replaying(gm, fw, bw, inference)
    try:
        return aot_compile(gm, inputs, fw_compiler=fw, bw_compiler=bw, inference_compiler=inference,
                           partition="min_cut", decompositions=DECOMPOSITIONS)
    except Exception as e:
        if config.kernel_raise_errors:
            raise
        return _eager(gm, f"AOT compile failed: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
