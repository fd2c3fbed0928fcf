"""``compile_aten_graph``: functional ATen graph -> a callable running fused kernels.

The pipeline, one named pass per line (``XCOMPILE_LOGS=compile_times`` times each):

    ensure_meta   fake-tensor metadata on every node
    fold          what only literals feed is computed once, here (constant_fold.py)
    lower         ATen ops -> loop IR (lowering table; extern ATen calls for the rest)
    fuse          inline pointwise chains, group loops over one iteration space
    codegen       one C++ (CPU) or Triton (GPU) kernel per group
    build         compile in a thread pool, cached on disk by source hash
    plan          order, buffer lifetimes and reuse
    wrapper       the generated Python ``call`` that allocates and launches

Any failure (no compiler, a compile error, an op we cannot handle) runs the graph eagerly
with one warning naming the reason; it never raises into the user's program.
"""
from __future__ import annotations

import time
import warnings
from typing import Any, Callable, Sequence

import torch
import torch.fx
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.passes.fake_tensor_prop import FakeTensorProp

from .. import _C, config, log
from ..debug import dump, timing
from .cache import build_cpp_many, load_cpp
from .constant_fold import fold_constants
from .cpp import cpp_prelude, generate_cpp
from .fusion import Group, fuse
from .graph import GraphLowering
from .inplace import inplace_writes
from .ir import format_graph, format_node, verify_graph
from .lowerings import LOWERINGS
from .plan import make_plan
from .sizes import graph_size_names, shape_env_of, using_shape_env
from .wrapper import Kernel, build_wrapper, generate_wrapper


def ensure_meta(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> None:
    if all("val" in n.meta for n in gm.graph.nodes if n.op not in ("output", "get_attr")):
        return
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    fake = [mode.from_tensor(t) if isinstance(t, torch.Tensor) else t for t in example_inputs]
    FakeTensorProp(gm, mode).propagate_dont_convert_inputs(*fake)


def _backend(device: torch.device) -> str:
    if device.type == "cpu":
        return config.cpu_kernel_backend
    return "triton"


def _kernel_header(group: Group, params, buffers, kind: str) -> str:
    c = "//" if kind == "cpp" else "#"
    lines = [f"{c} {group.name}: fuses {', '.join(group.origins)}"]
    n_in = n_out = 0
    for b, written in params:
        lay = buffers[b].layout
        if kind == "cpp":
            p = f"out_ptr{n_out}" if written else f"in_ptr{n_in}"
        else:
            p = b
        n_out += written
        n_in += not written
        lines.append(f"{c}   {p}: {b} {str(lay.dtype).replace('torch.', '')}{list(lay.size)}")
    return "\n".join(lines) + "\n"


def _codegen_cpp(schedule, buffers, size_names: frozenset[str], inplace: dict[str, str]) -> tuple[dict, list]:
    groups = [g for g in schedule if isinstance(g, Group)]
    gens = [generate_cpp(g, buffers, size_names, _aliased(g, inplace)) for g in groups]
    prelude = cpp_prelude()
    sources = [prelude + src for src, _, _, _ in gens]
    paths = build_cpp_many(sources)
    kernels = {}
    for g, (src, params, checks, sizes), path in zip(groups, gens, paths):
        fn = load_cpp(path, "kernel", len(params), returns_int=bool(checks), nsizes=len(sizes))
        bad = load_cpp(path, "kernel_bad_index", 0, returns_int=True) if checks else None
        kernels[g] = Kernel(g.name, "cpp", fn, params, _kernel_header(g, params, buffers, "cpp") + src,
                            checks=checks, bad_index=bad, sizes=sizes)
    return kernels, groups


def _aliased(group: Group, inplace: dict[str, str]) -> frozenset[str]:
    """The buffers of ``group`` that share memory: each value it writes in place, and its input."""
    return frozenset(b for v in group.stores if v in inplace for b in (v, inplace[v]))


def _codegen_triton(schedule, buffers, size_names: frozenset[str], inplace: dict[str, str]) -> tuple[dict, list]:
    assert not inplace           # (inplace_writes: C++ kernels only)
    from .triton import build_triton_kernel
    groups = [g for g in schedule if isinstance(g, Group)]
    kernels = {}
    for g in groups:
        fn, params, src, checks, sizes = build_triton_kernel(g, buffers, size_names)
        kernels[g] = Kernel(g.name, "triton", fn, params, _kernel_header(g, params, buffers, "triton") + src,
                            checks=checks, sizes=sizes)
    return kernels, groups


def _compile(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], bound: dict[int, torch.Tensor],
             training: bool = False):
    times = {}
    dumping = dump.current()     # the debug dump's frame folder (None: off)

    def timed(name, fn, *args):
        t0 = time.perf_counter()
        out = fn(*args)
        times[name] = time.perf_counter() - t0
        return out

    timed("ensure_meta", ensure_meta, gm, example_inputs)
    timed("fold", fold_constants, gm)
    graph = timed("lower", lambda: GraphLowering(gm, example_inputs, LOWERINGS, training=training).run())
    if config.verify:
        verify_graph(graph)
    if log.enabled("output_code"):
        log.log("output_code", "loop IR:\n%s", format_graph(graph))
    if dumping is not None:
        dumping.loop_ir("lower", format_graph(graph), gm)
    schedule = timed("fuse", fuse, graph)
    backend = _backend(graph.device)
    codegen = _codegen_cpp if backend == "cpp" else _codegen_triton
    inplace = timed("inplace", inplace_writes, graph, schedule) if backend == "cpp" else {}
    kernels, groups = timed("codegen+build", codegen, schedule, graph.buffers, graph_size_names(graph), inplace)
    group_reads = {g: [b for b, w in kernels[g].params if not w] for g in groups}
    arena = backend == "cpp" and all(isinstance(k.fn, _C.KernelLauncher) for k in kernels.values())
    plan = timed("plan", make_plan, graph, schedule, group_reads, inplace, arena)
    src, glb = timed("wrapper", generate_wrapper, graph, plan, kernels, bound, training)
    fn: Any = build_wrapper(src, glb)   # a plain function; the attributes below are set on it
    for f in graph.fallbacks:
        log.log("fallbacks", "extern kernel: %s", f)
    if log.enabled("output_code"):
        for k in kernels.values():
            log.log("output_code", "%s kernel %s:\n%s", k.kind, k.name, k.source)
        log.log("output_code", "wrapper:\n%s", src)
    if dumping is not None:
        dumping.kernel_output(schedule, plan, kernels, src, format_node)
    log.log("compile_times", "kernels: %s", ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in times.items()))
    for k, v in times.items():
        timing.record(f"kernels.{k}", v)
    # the wrapper itself is what runs per call; its generated code stays inspectable on it
    fn.wrapper_src = src
    fn.kernels = list(kernels.values())
    fn.fallbacks = list(graph.fallbacks)
    return fn


def compile_aten_graph(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], *,
                       bound: dict[int, torch.Tensor] | None = None, training: bool = False) -> Callable:
    """Compile a functional ATen graph; inputs at the positions in ``bound`` are fixed tensors
    (parameters read through the held reference at call time) and are not passed.  ``training``:
    the forward or backward graph of a training step (some layout choices differ, see the
    convolution row)."""
    bound = dict(bound or {})
    try:
        return _compile(gm, example_inputs, bound, training=training)
    except Exception as e:  # any failure means: run this graph eagerly
        if config.kernel_raise_errors:
            raise
        reason = f"{type(e).__name__}: {e}".splitlines()[0][:300]
        warnings.warn(f"xcompile kernels: running this graph eagerly ({reason})", RuntimeWarning, stacklevel=2)
        log.log("fallbacks", "whole graph eager: %s", reason)
        return eager_callable(gm, bound, len(example_inputs))


def compile_symbolic_graph(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], *,
                           bound: dict[int, torch.Tensor] | None = None, training: bool = False) -> Callable:
    """``compile_aten_graph`` for a graph whose placeholders carry symbolic sizes: kernels that
    take the sizes as arguments. It raises instead of running eagerly (the caller then
    compiles per size); ``SymbolicUnsupported`` names what the generator cannot keep symbolic."""
    env = shape_env_of([n.meta.get("val") for n in gm.graph.nodes if n.op == "placeholder"])
    with using_shape_env(env):
        return _compile(gm, example_inputs, dict(bound or {}), training=training)


def eager_callable(gm: torch.fx.GraphModule, bound: dict[int, torch.Tensor], n_inputs: int) -> Callable:
    if not bound:
        return gm.forward
    order = list(range(n_inputs))

    def run(*args):
        it = iter(args)
        full = [bound[i] if i in bound else next(it) for i in order]
        return gm(*full)
    return run
