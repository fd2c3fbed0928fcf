"""Compiled DistributedDataParallel: each captured graph split at DDP's bucket boundaries.

DDP all-reduces gradients per *bucket*, from autograd hooks on each parameter's gradient
accumulator: a bucket is sent as soon as all its gradients are ready, so communication overlaps
the rest of the backward. An AOT-compiled graph runs its whole backward as one autograd node,
which makes every gradient ready at the same moment, at the end: no overlap. So when the frame
being compiled runs under DDP (``config.optimize_ddp``), the captured graph is cut into
subgraphs whose parameters are DDP's buckets, each compiled on its own by the backend; the
backward of the last subgraph finishes, its bucket's hooks fire and its all-reduce starts while
the earlier subgraphs' backward runs (torch's DDPOptimizer, torch/_dynamo/backends/distributed.py,
does the same).

Under DDP means: ``DistributedDataParallel._get_active_ddp_module()`` is set (DDP sets it around
its call of the wrapped module, ``_inside_ddp_forward``); DDP's own forward runs eagerly (it is
library code), so its hooks, ``_DDPSink``, ``no_sync()`` and unused-parameter search act on the
compiled module's outputs as they do in eager.

Which buckets: DDP's real ones (its reducer's, ``_get_zeros_like_grad_buckets()``: parameters
per bucket, in the order they are all-reduced) once they are final. DDP with
``find_unused_parameters=True`` builds them once, at construction, in registration order; other
DDPs (``static_graph`` too) rebuild them after their first backward from the order the gradients
became ready. Within one compiled subgraph that order is the autograd engine's (the subgraph's
gradients become ready together, handed to their accumulators in an order of the engine's
queue), so buckets planned beforehand would be cut elsewhere by DDP: until DDP has rebuilt them,
the graph runs as captured (op by op, so DDP sees eager's order and builds eager's buckets), then
it is split along them (``SplitRunner``). Where they never become final (no backward with
gradient sync in ``PENDING_CALLS`` calls) the split follows the buckets DDP would build: DDP's
own rule (``torch.distributed._compute_bucket_assignment_by_size``) with its size limits
(``bucket_cap_mb``; the first bucket's limit is ``_DEFAULT_FIRST_BUCKET_BYTES`` when the cap is
DDP's default) over the parameters in reverse order of first use.
A cut is made between two nodes only; where a node uses parameters of two buckets, or no value
crosses the cut (nothing to hand over), the buckets share a subgraph.

Each subgraph is compiled at its first call, with the real tensors it receives (as the whole
graph would be with the frame's): no fake propagation, no extra run of the graph. Each cut is
reported as a graph break (``XCOMPILE_LOGS=graph_breaks``, ``xcompile.explain``) naming the
subgraph's parameters, their size and DDP's cap.
"""
from __future__ import annotations

import contextlib
import copy
import traceback
import weakref
from typing import Callable

import torch
import torch.fx
from torch.fx.passes.split_module import split_module
from torch.nn.parallel import DistributedDataParallel

from .. import config, log
from ..frontend.break_log import BreakRecord, report_break

# The compile of one subgraph: (gm, example_inputs) -> callable.
Compile = Callable[[torch.fx.GraphModule, list], Callable]


def is_ddp(obj) -> bool:
    return isinstance(obj, DistributedDataParallel)


def active_ddp():
    """The DDP module whose forward is running (and calls the frame being compiled), or None."""
    if not torch.distributed.is_available():
        return None
    get = getattr(DistributedDataParallel, "_get_active_ddp_module", None)
    return get() if get is not None else getattr(DistributedDataParallel, "_active_ddp_module", None)


# -- buckets ----------------------------------------------------------------------------------------------
def _ignored(p: torch.Tensor) -> bool:
    return bool(getattr(p, "_ddp_ignored", False))


def _attr(gm: torch.fx.GraphModule, target: str):
    obj: object = gm
    for part in target.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def _param_of(gm, node, inputs: dict) -> torch.nn.Parameter | None:
    if node.op == "get_attr":
        p = _attr(gm, node.target)
    elif node.op == "placeholder":
        p = inputs.get(node)
    else:
        return None
    if isinstance(p, torch.nn.Parameter) and p.requires_grad and not _ignored(p):
        return p
    return None


def _size_limits(ddp) -> tuple[list[int], bool]:
    """(DDP's bucket size limits in bytes, whether DDP rebuilds its buckets in gradient order)."""
    static = bool(getattr(ddp, "static_graph", False))
    find_unused = bool(getattr(ddp, "find_unused_parameters", False))
    rebuilds = static or not find_unused
    cfg = getattr(ddp, "_bucket_config", None)
    if cfg is not None:
        initial, for_rebuild = cfg.compute_bucket_size_limits(static_graph=static,
                                                              find_unused_parameters=find_unused)
        if rebuilds:
            return list(for_rebuild) or [cfg.first_bucket_bytes_cap, cfg.bucket_bytes_cap], True
        return list(initial), False
    cap = int(ddp.bucket_bytes_cap)
    first = torch.distributed._DEFAULT_FIRST_BUCKET_BYTES if getattr(ddp, "bucket_bytes_cap_default", False) \
        else cap
    return [min(first, cap), cap], rebuilds


def _assign(params: list[torch.Tensor], limits: list[int]) -> list[list[int]]:
    """DDP's bucketing of ``params`` (in this order) by size: lists of indices into ``params``."""
    if not params:
        return []
    idx = list(range(len(params)))
    buckets, _ = torch.distributed._compute_bucket_assignment_by_size(params, limits, [False] * len(params), idx)
    return [list(b) for b in buckets]


def _final_buckets(ddp) -> tuple[dict, int] | None:
    """DDP's buckets as its reducer holds them ({parameter id: bucket number}, count), or None
    while DDP will still rebuild them after its first backward."""
    static = bool(getattr(ddp, "static_graph", False))
    rebuilds = static or not getattr(ddp, "find_unused_parameters", False)
    if rebuilds and not getattr(ddp, "_has_rebuilt_buckets", False):
        return None
    try:
        buckets = ddp.reducer._get_zeros_like_grad_buckets()
        return {id(p): b.index() for b in buckets for p in b.parameters()}, len(buckets)
    except (AttributeError, RuntimeError):
        return None


def param_buckets(gm: torch.fx.GraphModule, example_inputs: list, ddp) -> tuple[dict, int]:
    """{parameter id: bucket number}, numbered in the order DDP's buckets become ready
    (0: the last parameters the forward uses), and the number of buckets that hold the graph's
    parameters. DDP's own buckets where they are final; else the ones DDP will build."""
    inputs = dict(zip([n for n in gm.graph.nodes if n.op == "placeholder"], example_inputs))
    used: list[torch.Tensor] = []            # in reverse order of first use
    seen: set[int] = set()
    for node in reversed(gm.graph.nodes):
        for arg in node.all_input_nodes:
            p = _param_of(gm, arg, inputs)
            if p is not None and id(p) not in seen:
                seen.add(id(p))
                used.append(p)
    final = _final_buckets(ddp)
    if final is not None:
        out = {i: b for i, b in final[0].items() if i in seen}
        return out, len(set(out.values()))
    limits, rebuilds = _size_limits(ddp)
    if rebuilds:             # DDP fills them in the order the gradients become ready
        buckets = _assign(used, limits)
        return {id(used[i]): b for b, bucket in enumerate(buckets) for i in bucket}, len(buckets)
    # buckets built once, in registration order (DDP reverses the list: the last ones first)
    registered = [p for p in ddp.module.parameters() if p.requires_grad and not _ignored(p)]
    buckets = list(reversed(_assign(registered, limits)))
    out = {id(registered[i]): b for b, bucket in enumerate(buckets) for i in bucket if id(registered[i]) in seen}
    return out, len(set(out.values()))


# -- the split ----------------------------------------------------------------------------------------------
class Split:
    """Where the graph is cut: ``partition[node]`` (0 = the first subgraph in the forward) and, per
    subgraph, its parameters' bytes and count (for the reasons given)."""

    def __init__(self, partition: dict, n: int, sizes: list[int], counts: list[int], n_buckets: int):
        self.partition = partition
        self.n = n
        self.sizes = sizes
        self.counts = counts
        self.n_buckets = n_buckets


# Nodes that change global state for the ops after them (a `with torch.no_grad()` / autocast block
# in the graph): the backends consume them while tracing one graph, so a cut between them and
# the ops they govern would lose the mode. Such graphs are not split.
_MODE_NODES = (torch._C._set_grad_enabled, torch.amp._enter_autocast, torch.amp._exit_autocast)


def _unsplittable(gm: torch.fx.GraphModule) -> str | None:
    for n in gm.graph.nodes:
        if n.op == "call_function" and n.target in _MODE_NODES:
            return f"it switches {getattr(n.target, '__name__', n.target)} inside"
        if n.op == "get_attr" and isinstance(_attr(gm, n.target), torch.fx.GraphModule):
            return "it holds a subgraph (a higher-order op)"
    return None


def plan_split(gm: torch.fx.GraphModule, example_inputs: list, ddp) -> Split:
    """Where to cut ``gm`` for ``ddp``'s buckets (one subgraph: ``Split.n == 1``)."""
    bucket_of, n_buckets = param_buckets(gm, example_inputs, ddp)
    why = _unsplittable(gm)
    if why is not None:
        log.log("graph_code", "DDP: graph not split (%s)", why)
        return Split({}, 1, [], [], n_buckets)
    inputs = dict(zip([n for n in gm.graph.nodes if n.op == "placeholder"], example_inputs))
    nodes = [n for n in gm.graph.nodes if n.op not in ("placeholder", "get_attr", "output")]
    # Walk backwards: ``cur`` is the bucket of the subgraph being filled (the latest one first).
    part: dict = {}
    cur = 0
    sizes: dict[int, int] = {}
    counts: dict[int, int] = {}
    members: set = set()                     # nodes of the subgraph being filled
    counted: set[int] = set()
    for node in reversed(nodes):
        bs = [bucket_of[id(p)] for p in (_param_of(gm, a, inputs) for a in node.all_input_nodes)
              if p is not None and id(p) in bucket_of]
        if bs and min(bs) > cur and _has_external_output(members):
            cur = min(bs)                    # a later-ready bucket begins: cut before this node's users
            members = set()
        members.add(node)
        part[node] = cur
        for a in node.all_input_nodes:
            p = _param_of(gm, a, inputs)
            if p is not None and id(p) not in counted and id(p) in bucket_of:
                counted.add(id(p))
                sizes[cur] = sizes.get(cur, 0) + p.numel() * p.element_size()
                counts[cur] = counts.get(cur, 0) + 1
    # a leading run of nodes without parameters joins the subgraph after it
    order = sorted(set(part.values()), reverse=True)       # forward order of the subgraphs
    if len(order) > 1 and not counts.get(order[0]):
        for node, b in part.items():
            if b == order[0]:
                part[node] = order[1]
        order = order[1:]
    number = {b: i for i, b in enumerate(order)}
    partition = {node: number[b] for node, b in part.items()}
    return Split(partition, len(order), [sizes.get(b, 0) for b in order], [counts.get(b, 0) for b in order],
                 n_buckets)


def _has_external_output(members: set) -> bool:
    return any(u not in members for n in members for u in n.users)


def _split_module(gm: torch.fx.GraphModule, split: Split) -> torch.fx.GraphModule:
    """The graph as a graph of ``submod_<i>`` calls. A get_attr node used in several subgraphs is
    repeated in each, so a parameter enters the subgraph that uses it (its gradient is ready at the
    end of that subgraph's backward, not handed through another)."""
    graph = torch.fx.Graph()                 # a copy: the frontend's graph stays as it was traced
    val_map: dict = {}
    out = graph.graph_copy(gm.graph, val_map)
    graph.output(out)
    gm = torch.fx.GraphModule(gm, graph)
    part = {val_map[n]: i for n, i in split.partition.items()}
    for node in list(graph.nodes):
        if node.op != "get_attr":
            continue
        users = sorted({part[u] for u in node.users if u in part})
        if not users:
            part[node] = 0
            continue
        part[node] = users[0]
        for p in users[1:]:
            with graph.inserting_after(node):
                dup = graph.get_attr(node.target)
            dup.meta = dict(node.meta)
            for u in list(node.users):
                if part.get(u) == p:
                    u.replace_input_with(node, dup)
            part[dup] = p
    gm.recompile()
    return split_module(gm, gm, lambda n: part[n], keep_original_order=True)


class _LazySubgraph:
    """A subgraph compiled at its first call, with the tensors it is called with.

    Backends return a tuple; split_module's subgraph with one output returns the value itself:
    such a graph is compiled returning a 1-tuple and its runner hands back the value."""

    def __init__(self, gm: torch.fx.GraphModule, compile_fn: Compile, name: str):
        out = gm.graph.output_node()
        self.single = not isinstance(out.args[0], (tuple, list))
        if self.single:
            out.args = ((out.args[0],),)
            gm.recompile()
        self.gm: torch.fx.GraphModule | None = gm
        self.compile_fn = compile_fn
        self.compiled: Callable | None = None
        self.__qualname__ = name

    def __call__(self, *args):
        fn = self.compiled
        if fn is None:
            assert self.gm is not None
            fn = self.compiled = self.compile_fn(self.gm, list(args))
            self.gm = None
        out = fn(*args)
        return out[0] if self.single else out


def _reason(split: Split, i: int, ddp) -> str:
    mb = 1024 * 1024
    return (f"DDPOptimizer: graph split at a DDP bucket boundary (subgraph {i + 1} of {split.n}: "
            f"{split.counts[i]} parameter(s), {split.sizes[i] / mb:.3f} MB; bucket_cap_mb="
            f"{int(getattr(ddp, 'bucket_bytes_cap', 0)) / mb:.3g}, {split.n_buckets} bucket(s))")


def _report(split: Split, ddp, code, gm: torch.fx.GraphModule) -> None:
    first_of: dict[int, torch.fx.Node] = {}
    for node, i in split.partition.items():
        first_of.setdefault(i, node)
    for i in range(1, split.n):
        stack = _node_stack(first_of.get(i), code)
        report_break(BreakRecord(_reason(split, i, ddp),
                                 "DDP all-reduces gradients per bucket as they become ready; each bucket's "
                                 "parameters get a subgraph of their own, so its all-reduce starts while the "
                                 "backward of the earlier subgraphs runs.",
                                 "xcompile.config.optimize_ddp = False keeps one graph (the all-reduce then "
                                 "starts after the whole backward).", stack))


def _node_stack(node, code) -> list[traceback.FrameSummary]:
    text = node.meta.get("stack_trace") if node is not None else None
    if text:
        frames = []
        lines = text.strip().splitlines()
        for ln in lines:
            ln = ln.strip()
            if ln.startswith('File "'):
                try:
                    fname, rest = ln[6:].split('", line ', 1)
                    lineno, _, name = rest.partition(", in ")
                    frames.append(traceback.FrameSummary(fname, int(lineno), name.strip()))
                except ValueError:
                    continue
        if frames:
            return frames
    if code is None:
        return []
    return [traceback.FrameSummary(code.co_filename, code.co_firstlineno, code.co_name)]


def _build(gm: torch.fx.GraphModule, example_inputs: list, compile_fn: Compile, ddp, code):
    """(the split graph's runner or None for one bucket, the split)."""
    split = plan_split(gm, example_inputs, ddp)
    log.log("graph_code", "DDP buckets for %s: %d bucket(s), %d subgraph(s), parameter bytes per subgraph %s",
            getattr(code, "co_name", "graph"), split.n_buckets, split.n, split.sizes)
    if split.n <= 1:
        return None, split
    split_gm = _split_module(gm, split)
    for name, sub in list(split_gm.named_children()):
        if name.startswith("submod_"):
            delattr(split_gm, name)          # a plain attribute now, called as self.submod_<i>(...)
            object.__setattr__(split_gm, name, _LazySubgraph(sub, compile_fn, f"ddp_{name}"))  # type: ignore[arg-type]
    _report(split, ddp, code, gm)
    log.log("graph_code", "DDP SPLIT GRAPH %s\n%s", getattr(code, "co_name", "graph"),
            split_gm.print_readable(print_output=False) if log.enabled("graph_code") else "")
    return split_gm.forward, split


# Calls a pending split waits for DDP to rebuild its buckets (it never does if no backward
# runs with gradient sync: inference, or only no_sync() steps) before it splits by its plan.
PENDING_CALLS = 8


class SplitRunner:
    """The graph of a frame under a DDP that has not built its final buckets yet.

    DDP builds them after its first backward, from the order in which the gradients became
    ready. Within one compiled subgraph that order is the autograd engine's (all of the
    subgraph's gradients become ready together), so buckets planned before DDP saw it could be
    cut elsewhere by DDP. Until DDP has rebuilt its buckets, the graph runs as captured (its ops
    one by one, so DDP sees eager's order and builds eager's buckets); then it is split along
    DDP's real buckets and each subgraph compiled at its first call. If DDP has not rebuilt after
    ``PENDING_CALLS`` calls, the graph is split along the buckets DDP would build."""

    def __init__(self, gm, example_inputs, compile_fn: Compile, ddp, code):
        self.gm = gm
        # (for the plan: which inputs are parameters; no other input is kept alive)
        self.params = [p if isinstance(p, torch.nn.Parameter) else None for p in example_inputs]
        self.compile_fn = compile_fn
        self.ddp = weakref.ref(ddp)
        self.code = code
        self.run: Callable = gm.forward
        self.calls = 0

    def __call__(self, *args):
        if self.gm is not None:
            self._check()
        return self.run(*args)

    def _check(self) -> None:
        ddp = self.ddp()
        self.calls += 1
        if ddp is not None and not getattr(ddp, "_has_rebuilt_buckets", False) and self.calls <= PENDING_CALLS:
            return
        gm, self.gm = self.gm, None
        run = None
        if ddp is not None:
            run, _ = _build(gm, self.params, self.compile_fn, ddp, self.code)
        if run is None:                      # one bucket: the graph compiled whole
            whole = torch.fx.GraphModule(gm, copy.deepcopy(gm.graph))
            run = _LazySubgraph(whole, self.compile_fn, "ddp_whole")
        self.run, self.params = run, []


def compile_split(gm: torch.fx.GraphModule, example_inputs: list, compile_fn: Compile, ddp,
                  code=None) -> Callable | None:
    """The graph split at ``ddp``'s bucket boundaries, each subgraph compiled by ``compile_fn``
    at its first call; None where there is one bucket (the caller compiles the graph whole).
    Before DDP has built its final buckets: a ``SplitRunner``."""
    inputs = dict(zip([n for n in gm.graph.nodes if n.op == "placeholder"], example_inputs))
    if not any(_param_of(gm, n, inputs) is not None for n in gm.graph.nodes):
        return None                          # no parameter DDP reduces: nothing to cut for
    if _final_buckets(ddp) is None:
        log.log("graph_code", "DDP buckets for %s: not final yet (DDP rebuilds them after its first backward); "
                "the graph runs as captured until then", getattr(code, "co_name", "graph"))
        return SplitRunner(gm, example_inputs, compile_fn, ddp, code)
    run, _ = _build(gm, example_inputs, compile_fn, ddp, code)
    return run


def maybe_split(compile_fn: Compile, code=None, scope: Callable[[], tuple] = tuple,
                on_error: Callable | None = None) -> Compile:
    """``compile_fn`` itself, or, when the frame runs under DDP and ``config.optimize_ddp`` is on,
    a compiler that splits the graph at DDP's bucket boundaries and compiles each subgraph with it.

    ``scope()`` gives the context managers the backend runs in (grad mode, the backend's knobs),
    entered again for each subgraph's compile at its first call; ``on_error(exc, gm)`` decides
    what a failing subgraph compile does (returns a runner, or raises)."""
    if not config.optimize_ddp:
        return compile_fn
    ddp = active_ddp()
    if ddp is None:
        return compile_fn

    def compile_subgraph(gm: torch.fx.GraphModule, example_inputs: list):
        try:
            with contextlib.ExitStack() as stack:
                for cm in scope():
                    stack.enter_context(cm)
                compiled = compile_fn(gm, example_inputs)
        except Exception as e:
            if on_error is None:
                raise
            compiled = on_error(e, gm)
        if not callable(compiled):
            raise TypeError(f"the backend returned {type(compiled).__name__} for a DDP subgraph, "
                            "which is not callable")
        return compiled

    def ddp_split(gm: torch.fx.GraphModule, example_inputs: list):
        return compile_split(gm, example_inputs, compile_subgraph, ddp, code) or compile_fn(gm, example_inputs)
    return ddp_split


__all__ = ["SplitRunner", "active_ddp", "compile_split", "is_ddp", "maybe_split", "plan_split"]
