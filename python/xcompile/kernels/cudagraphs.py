"""CUDA-graph replay of compiled graphs: ``mode="reduce-overhead"`` (and ``"max-autotune"``),
``options={"triton.cudagraphs": True}``, backend ``"cudagraphs"``.

``wrap(fn, gm, n_inputs, ...)`` returns a ``_C_graphs.GraphReplay`` standing for the compiled graph
``fn`` (``gm`` is its ATen graph, for the checks). Per call, everything runs in C++
(csrc/graph_replay.cpp): static-input pointer checks, copies of the other inputs into the
recording's buffers, copying out outputs of earlier replays the caller still holds, the replay
and the output tensors. Python runs only until the graph is recorded (``_Recorder``):

1. ``config.cudagraph_warmup`` calls run ``fn`` plainly (lazy initialisation, autotuning);
2. the next call records: inputs that are parameters, buffers of the compiled module or
   ``mark_static_address`` tensors (ours or ``torch._dynamo``'s, which transformers' static
   cache uses) are used in place (their data pointer is checked on every
   call; a moved one records again, up to ``config.cudagraph_max_records`` times); every other
   input gets a buffer of its size and strides, which each call copies the argument into.

A graph runs plainly from its first call on, logged under ``XCOMPILE_LOGS=cudagraphs`` with the
reason, when: its sizes are symbolic; it has a random op (the RNG state is not recorded) or an
op that waits for the host (``.item()``, ``nonzero``); it writes into an input that is not
static and is new memory on each call (one that stays put, as a cache the caller keeps, is used
in place like a static input); an input is not a tensor, or is on another device than the
graph records on (CPU tensors: torch skips them too; ``config.cudagraph_stand_in`` records
them with the CPU stand-in); an output is not a tensor; or the recording fails. An output that
is an input or a view of one is the caller's tensor (or that view of it), as in eager. The
recording reads in-place inputs through tensors that own nothing (``GraphReplay.unowned``):
it replays only while the caller's tensor is at the recorded address.

The graphs of one compiled function share a ``GraphPool`` (one CUDA memory pool). A graph's
replay may write into memory that graphs recorded after it use for their outputs, so before
it replays, the outputs of those graphs that the caller still holds are copied out too.
"""
from __future__ import annotations

import contextlib
import contextvars
import weakref
from typing import Any, Callable, Iterable

import torch
import torch.fx

from .. import config, log
from .._torch_compat import graph_replay_extension
from ..shape_state import STATIC_ADDRESS
from .graph_devices import GraphPool, device_for

# ops that wait for the host: a capture fails on them (or records a stale value)
_HOST_SYNCS = {"aten::_local_scalar_dense", "aten::nonzero", "aten::item", "aten::masked_select",
               "aten::unique_consecutive", "aten::_unique2", "aten::repeat_interleave",
               "aten::equal", "aten::is_nonzero", "aten::allclose", "aten::_assert_async"}

_POOL: contextvars.ContextVar[GraphPool | None] = contextvars.ContextVar("xcompile_graph_pool", default=None)
_ALL_POOLS: "weakref.WeakSet[GraphPool]" = weakref.WeakSet()


def enabled() -> bool:
    return bool(config.cudagraphs)


def new_pool() -> GraphPool:
    pool = GraphPool()
    _ALL_POOLS.add(pool)
    return pool


@contextlib.contextmanager
def pool_scope(pool: GraphPool):
    """The graphs compiled inside share ``pool`` (ConvertFrame: one per compiled function)."""
    token = _POOL.set(pool)
    try:
        yield
    finally:
        _POOL.reset(token)


def current_pool() -> GraphPool:
    pool = _POOL.get()
    return pool if pool is not None else new_pool()


def reset() -> None:
    """xcompile.reset(): every pool forgets its graphs (their memory goes once nothing holds it)."""
    for pool in list(_ALL_POOLS):
        pool.clear()


def recorded_graphs() -> list:
    """Every replaying graph in every live pool (tests and benchmarks read their ``stats``)."""
    return [g for pool in list(_ALL_POOLS) for g in pool]


class TensorSet:
    """Tensors held weakly, compared by identity (a WeakSet compares tensors with ``==``)."""

    def __init__(self, tensors: Iterable[torch.Tensor] = ()):
        self._by_id: weakref.WeakValueDictionary[int, torch.Tensor] = weakref.WeakValueDictionary()
        for t in tensors:
            self._by_id[id(t)] = t

    def __contains__(self, t) -> bool:
        return self._by_id.get(id(t)) is t

    def __len__(self) -> int:
        return len(self._by_id)


def static_tensors(gm: torch.nn.Module) -> TensorSet:
    """Parameters, buffers and tensor attributes of the captured graph's module: used in place."""
    found = [t for t in gm.state_dict(keep_vars=True).values() if isinstance(t, torch.Tensor)]
    found += [v for mod in gm.modules() for v in vars(mod).values() if isinstance(v, torch.Tensor)]
    return TensorSet(found)


def graph_reason(gm: torch.fx.GraphModule) -> str | None:
    """Why this ATen graph cannot be recorded (None: it can, as far as the graph tells)."""
    for n in gm.graph.nodes:
        if n.op == "placeholder":
            v = n.meta.get("val")
            if isinstance(v, torch.SymInt) or (isinstance(v, torch.Tensor) and any(
                    isinstance(s, torch.SymInt) for s in (*v.shape, *v.stride()))):
                return "dynamic shapes (the sizes are symbolic)"
        elif n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload):
            if _draws_random(n):
                return f"random op {n.target} (the RNG state is not part of the recording)"
            if n.target._schema.name in _HOST_SYNCS:
                return f"op {n.target} waits for the host"
    return None


def _draws_random(n: torch.fx.Node) -> bool:
    """An op tagged random that draws here: attention and dropout ops draw only with a dropout
    probability above zero in training (``dropout_p`` / ``p`` / ``train``)."""
    op = n.target
    if not isinstance(op, torch._ops.OpOverload) or torch.Tag.nondeterministic_seeded not in op.tags:
        return False
    args = {a.name: (n.args[k] if k < len(n.args) else n.kwargs.get(a.name, a.default_value))
            for k, a in enumerate(op._schema.arguments)}
    if args.get("train") is False:
        return False
    for name in ("dropout_p", "p"):
        if name in args and isinstance(args[name], (int, float)) and args[name] == 0:
            return False
    return True


def written_placeholders(gm: torch.fx.GraphModule) -> frozenset[int]:
    """Placeholders the graph writes into (``copy_`` or another mutable op on them)."""
    index = {n: k for k, n in enumerate(n for n in gm.graph.nodes if n.op == "placeholder")}
    out = set()
    for n in gm.graph.nodes:
        if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload) \
                and n.target._schema.is_mutable and n.args and n.args[0] in index:
            out.add(index[n.args[0]])
    return frozenset(out)


def wrap(fn: Callable, gm: torch.fx.GraphModule, n_inputs: int, *, static: TensorSet | None = None,
         pool: GraphPool | None = None, name: str = "graph") -> Callable:
    """``fn`` (the compiled ``gm``, called with ``n_inputs`` positional tensors) as a GraphReplay;
    ``fn`` itself when ``gm`` cannot be recorded (logged)."""
    reason = graph_reason(gm)
    if reason is not None:
        log.log("cudagraphs", "%s runs without replay: %s", name, reason)
        return fn
    pool = pool if pool is not None else current_pool()
    rec = _Recorder(fn, pool, written_placeholders(gm), static if static is not None else TensorSet(), name)
    if config.cudagraph_live_outputs not in ("copy", "error"):
        raise ValueError(f"config.cudagraph_live_outputs must be 'copy' or 'error', got "
                         f"{config.cudagraph_live_outputs!r}")
    try:
        graphs = graph_replay_extension()
    except ImportError as e:
        log.log("cudagraphs", "%s runs without replay: %s", name, e)
        return fn
    return graphs.GraphReplay(fn, rec, n_inputs, pool, config.cudagraph_live_outputs == "copy")


def replaying(gm: torch.nn.Module, *compilers: Callable) -> tuple[Callable, ...]:
    """AOT compilers (forward, backward, inference: ``(graph, example_inputs) -> fn``) whose
    results replay, sharing the current pool and the static tensors of ``gm``."""
    pool, static = current_pool(), static_tensors(gm)
    names = ("forward", "backward", "inference")

    def make(compile_fn: Callable, name: str) -> Callable:
        def compile_and_wrap(g: torch.fx.GraphModule, example_inputs: list):
            return wrap(compile_fn(g, example_inputs), g, len(example_inputs), static=static, pool=pool, name=name)
        return compile_and_wrap
    return tuple(make(c, n) for c, n in zip(compilers, names))


class _NoReplay(Exception):
    pass


class _Recorder:
    """GraphReplay's ``record(graph, args) -> (recorded, result)``: warm-up, checks, recording."""

    def __init__(self, fn: Callable, pool: GraphPool, written: frozenset[int],
                 static: TensorSet, name: str):
        self.fn = fn
        self.pool = pool
        self.written = written
        self.static = static
        self.name = name
        self.calls = 0
        self.records = 0
        self.reason: str | None = None
        self.keep: Any = None
        self.replay: Callable | None = None
        self.warm_ptrs: dict[int, int] = {}     # written non-static inputs: their warm-up pointer

    def is_static(self, t: torch.Tensor) -> bool:
        return isinstance(t, torch.nn.Parameter) or bool(getattr(t, STATIC_ADDRESS, False)) \
            or getattr(t, "_dynamo_static_input_type", None) is not None or t in self.static

    def __call__(self, graph, args: tuple):
        try:
            device = self._check(args)
            if self.calls < max(1, config.cudagraph_warmup):    # the warm-up finds written inputs
                self.calls += 1
                return self._warm_up(graph, args)
            if self.records >= config.cudagraph_max_records:
                raise _NoReplay(f"recorded {self.records} times: a static input keeps moving "
                                "(a parameter or mark_static_address tensor given new memory)")
            try:
                self._record(graph, args, device)
            except _NoReplay:
                raise
            except Exception as e:     # anything else that fails there runs the graph plainly
                raise _NoReplay(f"recording failed: {type(e).__name__}: {str(e).splitlines()[0][:200]}") from e
            return True, None
        except _NoReplay as e:
            return self._fallback(graph, args, str(e))

    def _fallback(self, graph, args: tuple, reason: str):
        self.reason = reason
        graph._fallback()
        if graph in self.pool:
            self.pool.remove(graph)
        log.log("cudagraphs", "%s runs without replay: %s", self.name, reason)
        return False, self.fn(*args)

    def _check(self, args: tuple):
        devices = set()
        for k, a in enumerate(args):
            if not isinstance(a, torch.Tensor):
                raise _NoReplay(f"input {k} is a {type(a).__name__}, not a tensor")
            if a.layout != torch.strided or type(a) not in (torch.Tensor, torch.nn.Parameter):
                raise _NoReplay(f"input {k} is a {type(a).__name__} with layout {a.layout}")
            devices.add(a.device)
        if not devices:
            raise _NoReplay("no tensor inputs")
        if len(devices) > 1:
            raise _NoReplay(f"inputs on several devices ({', '.join(sorted(map(str, devices)))})")
        device, = devices
        gd = device_for(device.type)
        if gd is None:
            raise _NoReplay(f"{device.type.upper()} tensors (CUDA graphs record CUDA work)")
        return device, gd

    def _warm_up(self, graph, args: tuple):
        versions = [a._version for a in args]
        out = self.fn(*args)
        written = {k for k in self.written if k < len(args)}      # (the others are bound in the artifact)
        written |= {k for k, (a, v) in enumerate(zip(args, versions)) if a._version != v}
        self.warm_ptrs = {k: args[k].data_ptr() for k in written if not self.is_static(args[k])}
        return False, out

    def _record(self, graph, args: tuple, device_pair) -> None:
        device, gd = device_pair
        static = [self.is_static(a) for a in args]
        for k, ptr in self.warm_ptrs.items():
            # a written input that stayed put since the warm-up (a cache the caller keeps) is used
            # in place like a static one: its pointer is checked on every call, and a move records
            # again; one that is new memory each call cannot be written through a recording
            if args[k].data_ptr() != ptr and not self.records:    # (recording again: it moved once)
                raise _NoReplay(f"the graph writes into input {k}, which is new memory on each call "
                                "(not a parameter, buffer or mark_static_address tensor)")
            static[k] = True
        inputs = []
        index_of: dict[int, int] = {}         # storage of what the recording reads -> input index
        with torch.no_grad():
            for k, (a, s) in enumerate(zip(args, static)):
                if s:                         # read in place, through a tensor that owns nothing
                    buf = graph_replay_extension().GraphReplay.unowned(a) if a.numel() else a
                else:
                    if torch._debug_has_internal_overlap(a) == 1:
                        raise _NoReplay(f"input {k} has elements sharing memory (expanded); it cannot "
                                        "be copied into a buffer of its strides")
                    buf = torch.empty_strided(a.size(), a.stride(), dtype=a.dtype, device=a.device)
                    buf.copy_(a)
                inputs.append(buf)
                index_of.setdefault(buf.untyped_storage()._cdata, k)
        fn = self.fn
        try:
            replay, outs, keep = gd.record(lambda: fn(*inputs), inputs, self.pool)
        except Exception as e:
            raise _NoReplay(f"recording failed: {type(e).__name__}: {str(e).splitlines()[0][:200]}") from e
        if not isinstance(outs, (list, tuple)):
            raise _NoReplay(f"the graph returns a {type(outs).__name__}, not a list or tuple")
        groups: list[int] = []
        group_of: dict[int, int] = {}
        for k, o in enumerate(outs):
            if o is None:
                groups.append(-1)
                continue
            if not isinstance(o, torch.Tensor):
                raise _NoReplay(f"output {k} is a {type(o).__name__}, not a tensor")
            if o.device != device:
                raise _NoReplay(f"output {k} is on {o.device}, the graph records on {device}")
            key = o.untyped_storage()._cdata
            if key in index_of:               # the caller's input (or a view of it), as eager returns
                groups.append(-2 - index_of[key])
                continue
            groups.append(group_of.setdefault(key, len(group_of)))
        graph._set_recording(replay, inputs, static, list(outs), groups, isinstance(outs, list))
        self.keep = keep
        self.replay = replay                  # the bare replay (benchmarks/cudagraphs.py times it)
        self.records += 1
        if graph in self.pool:
            self.pool.remove(graph)
        self.pool.append(graph)
        log.log("cudagraphs", "%s recorded on %s (%s): %d inputs, %d copied per call, %d outputs",
                self.name, device, gd.name, len(args), len(args) - sum(static), len(outs))


__all__ = ["current_pool", "enabled", "graph_reason", "new_pool", "pool_scope", "recorded_graphs", "replaying",
           "reset", "static_tensors",
           "TensorSet",
           "wrap", "written_placeholders"]
