"""Run compiled forward/backward graphs as one autograd op, and put effects back.

Per call (``CompiledProgram.__call__``):
 1. primals = user inputs + the real parameter/buffer objects (read now, never copied);
 2. if autograd needs this call: ``CompiledFunction.apply`` runs the compiled forward and
    saves exactly what the partition chose; the backward graph is compiled at the first
    ``.backward()`` and runs as one node of eager autograd. Otherwise the inference graph;
 3. inputs the graph restrided in place (``x.t_()``) get the same ``as_strided_``; new values
    of mutated inputs are copied into the real inputs (tracked by autograd when they require
    grad, so ``x.mul_(w)`` inside the graph differentiates as in eager);
 4. outputs that alias inputs or one another are rebuilt as views (``as_strided`` of the
    real base), so ``out`` shares storage with ``x`` exactly when it did in eager.
"""
from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Callable

import torch

from .. import _C
from ..log import log
from ..shape_state import shape_facts
from .aliasing import eager_for_aliased, shares_storage
from .saved_use import saved_needed
from .schema import AotUnsupported, OutputKind, Schema

if TYPE_CHECKING:
    from .joint import JointGraph
    from .partition import Partition

_requires_grad = operator.attrgetter("requires_grad")
_version = operator.attrgetter("_version")

DOUBLE_BACKWARD_ERROR = (
    "torch.compile with aot_autograd does not currently support double backward (xcompile: the "
    "compiled backward is differentiable only once; run this part eagerly with xcompile.disable "
    "for higher-order gradients)")


class TrainingArtifact:
    """Compiled forward + (lazily) compiled backward of one joint graph."""

    # what it was made from, kept for inspection (set by aot_compile)
    partition: Partition | None = None
    joint: JointGraph | None = None

    def __init__(self, schema: Schema, fw: Callable, bw_gm: torch.fx.GraphModule,
                 bw_compiler: Callable, grad_slots: list[int | None], num_saved: int):
        self.fw = fw
        self.bw_gm = bw_gm
        self.bw_compiler = bw_compiler
        self.bw: Callable | None = None
        self.num_fw_outs = schema.num_fw_outs
        self.num_saved = num_saved
        self.diff_outs = tuple(schema.diff_fw_outs)
        self.non_diff_outs = tuple(i for i, o in enumerate(schema.fw_outs) if not o.requires_grad)
        self.deview = tuple(o.index for o in schema.outputs if o.kind is OutputKind.PLAIN and o.deview)
        # views of intermediates made under no_grad: returned as leaves that require grad
        self.leaf_outs = tuple(o.index for o in schema.outputs if o.kind is OutputKind.PLAIN and o.no_grad)
        self.grad_slots = tuple(grad_slots)
        # inputs no differentiable output reaches (their gradient is None): passed to the autograd
        # op detached, so its node has no edge to them, as eager's graph has none (a backward
        # through the edge would run their grad_fn: a tensor it saved may have been written since)
        self.unreached = frozenset(k for k, s in enumerate(grad_slots) if s is None)
        self.tangent_meta = tuple((schema.fw_outs[i].size, schema.fw_outs[i].dtype, schema.fw_outs[i].device)
                                  for i in self.diff_outs)
        self.tangent_deps = _tangent_deps(bw_gm, num_saved)
        # dynamic shapes: saved sizes (ints) travel beside the saved tensors, and a missing
        # gradient's zeros take the size its output had in this call
        saved_vals = [n.meta.get("val") for n in bw_gm.graph.nodes if n.op == "placeholder"][:num_saved]
        self.saved_ints = tuple(i for i, v in enumerate(saved_vals) if isinstance(v, torch.SymInt))
        self.symbolic = bool(self.saved_ints) or any(
            isinstance(d, torch.SymInt) for size, _, _ in self.tangent_meta for d in size)

    def backward_fn(self, example: list) -> Callable:
        if self.bw is None:
            self.bw = self.bw_compiler(self.bw_gm, example)
        return self.bw


def _unlinked(art: TrainingArtifact, primals: tuple, flags: tuple) -> tuple:
    """``primals`` with the inputs that require grad but reach no gradient detached (see
    ``TrainingArtifact.unreached``); as they are when no input that reaches one requires grad
    (the op's outputs then keep requiring grad as the schema says)."""
    if not art.unreached or not any(f and k not in art.unreached for k, f in enumerate(flags)):
        return primals
    return tuple(p.detach() if flags[k] and k in art.unreached else p for k, p in enumerate(primals))


def _tangent_deps(bw_gm: torch.fx.GraphModule, num_saved: int) -> tuple[frozenset, ...]:
    """For each output of the backward graph, the tangents (by position) it is computed from."""
    placeholders = [n for n in bw_gm.graph.nodes if n.op == "placeholder"]
    deps: dict[torch.fx.Node, frozenset] = {n: frozenset((k - num_saved,)) if k >= num_saved else frozenset()
                                            for k, n in enumerate(placeholders)}
    out_node = None
    for n in bw_gm.graph.nodes:
        if n.op == "output":
            out_node = n
        elif n.op != "placeholder":
            deps[n] = frozenset().union(*(deps.get(a, frozenset()) for a in n.all_input_nodes))
    if out_node is None:
        return ()
    outs = out_node.args[0]
    outs = outs if isinstance(outs, (tuple, list)) else (outs,)
    return tuple(deps.get(o, frozenset()) if isinstance(o, torch.fx.Node) else frozenset() for o in outs)


def _deview(t: torch.Tensor) -> torch.Tensor:
    """Same storage and layout, but not an autograd view (its base is hidden in the graph)."""
    if not t._is_view():
        return t
    out = t.new_empty(0)
    out.set_(t.untyped_storage(), t.storage_offset(), t.size(), t.stride())
    # (the conjugate and negative bits are the view's, not its storage's: ``fft.ifft`` of a real
    # tensor returns a conjugate view of the full transform)
    if t.is_conj():
        torch._C._set_conj(out, True)
    if t.is_neg():
        torch._C._set_neg(out, True)
    return out


def _view_of(base: torch.Tensor, size: tuple, stride: tuple, offset: int, conj: bool,
             neg: bool) -> torch.Tensor:
    """The output view of ``base`` as traced, with the conjugate and negative bits it had
    (as_strided keeps the base's: ``x.conj()`` of an input is rebuilt from x, then conjugated)."""
    out = base.as_strided(size, stride, base.storage_offset() + offset)
    if out.is_conj() != conj:
        out = out.conj()
    if out.is_neg() != neg:
        out = out._neg_view()
    return out


def _same_addressing(t: torch.Tensor, stride: tuple) -> bool:
    """Whether ``t`` with ``stride`` would address the same elements as it does: strides of
    size-1 dims never count (guards let a (5, 1) tensor of strides (1, 5) match (1, 1))."""
    return t.numel() == 0 or all(n == 1 or a == b for n, a, b in zip(t.shape, t.stride(), stride))


class CompiledFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, art: TrainingArtifact, *primals):
        outs = art.fw(*primals)
        n = art.num_fw_outs
        fw_outs = list(outs[:n])
        for i, t in enumerate(fw_outs):
            # a view of a hidden intermediate (an output the graph rebuilt with view ops, or one
            # the schema saw as a view): autograd must not treat it as a view made inside this
            # Function, or an in-place write to it later raises
            if t._is_view():
                fw_outs[i] = _deview(t)
        ctx.art = art
        ctx.set_materialize_grads(False)        # an unused output's gradient stays None (backward)
        saved = outs[n:]
        if art.symbolic:
            if art.saved_ints:
                ctx.saved_ints = {i: saved[i] for i in art.saved_ints}
                saved = tuple(t for i, t in enumerate(saved) if i not in ctx.saved_ints)
            ctx.diff_sizes = tuple(fw_outs[i].shape for i in art.diff_outs)
        ctx.save_for_backward(*saved)
        ctx.versions = tuple(map(_version, saved))     # see _saved_after_writes
        if art.non_diff_outs:
            # a compiler may return one tensor object for two outputs (``t.detach()`` and
            # ``t.view(-1)`` of a 1-element t), or a non-differentiable output as a view of a
            # differentiable one (which then requires grad through its base): mark fresh aliases
            for i in art.non_diff_outs:
                fw_outs[i] = fw_outs[i].detach()
            ctx.mark_non_differentiable(*(fw_outs[i] for i in art.non_diff_outs))
        return tuple(fw_outs)

    @staticmethod
    @_C.untraced        # never traced (its graph, its first-call compile), whatever callback is set
    def backward(ctx, *grads):
        art: TrainingArtifact = ctx.art
        if not any(g is not None for g in grads):
            # no gradient reaches this graph (autograd reached it through an edge only: an input
            # of a later graph that no output depends on): contribute none, and leave the saved
            # tensors unread, as eager never reaches the nodes behind them (an intermediate the
            # graph saved may have been written since, legitimately)
            return (None,) * (1 + len(art.grad_slots))
        tangents = []
        missing = []                            # outputs the loss does not depend on
        for k, i in enumerate(art.diff_outs):
            g = grads[i]
            if g is None:
                size, dtype, device = art.tangent_meta[k]
                g = torch.zeros(ctx.diff_sizes[k] if art.symbolic else size, dtype=dtype, device=device)
                missing.append(k)
            tangents.append(g if g.is_contiguous() else g.contiguous())
        try:
            saved = ctx.saved_tensors
        except RuntimeError as e:
            if "modified by an inplace operation" not in str(e):
                raise
            saved = _saved_after_writes(ctx, art, frozenset(range(len(tangents))) - frozenset(missing), e)
        if art.saved_ints:
            it = iter(saved)
            saved = tuple(ctx.saved_ints[i] if i in ctx.saved_ints else next(it) for i in range(art.num_saved))
        args = [*saved, *tangents]
        del saved, tangents
        bw = art.backward_fn(args)
        if torch.is_grad_enabled():            # create_graph=True: allow once, refuse a second time
            out = _OnceDifferentiable.run(bw, args, _leaves_behind(ctx, args))
        elif (boxed := getattr(bw, "boxed", None)) is not None:
            # the generated backward empties ``args`` and drops each saved tensor after its last
            # use; autograd's references go first (kept under retain_graph=True), as torch's
            # compiled backward does: the step's peak is not every activation plus every gradient
            ctx.maybe_clear_saved_tensors()
            out = boxed(args)
        else:
            out = bw(*args)
        if missing:
            # eager leaves an input's .grad None when the loss does not reach it: an input whose
            # gradient is computed only from tangents of unused outputs gets None, not zeros
            unused = frozenset(missing)
            deps = art.tangent_deps
            return (None, *[None if s is None or (s < len(deps) and deps[s] and deps[s] <= unused)
                            else out[s] for s in art.grad_slots])
        return (None, *[None if s is None else out[s] for s in art.grad_slots])


def _saved_after_writes(ctx, art: TrainingArtifact, live: frozenset, error: RuntimeError) -> tuple:
    """Some saved tensor was written in place after the forward (autograd refused to unpack):
    eager raises only if the loss reaches an op that saved it, so raise ``error`` only when a
    written tensor contributes to a live output's gradient (aot/saved_use.py)."""
    current = [r.data for r in ctx._raw_saved_tensors]
    where = [i for i in range(art.num_saved) if i not in art.saved_ints]     # (saved ints travel apart)
    for i, (t, v) in zip(where, zip(current, ctx.versions)):
        if t._version != v and saved_needed(art.bw_gm, art.num_saved, i, live):
            raise error
    return tuple(current)


# Function.apply minus its Python prologue (default-arg binding for setup_context, which we do
# not define, and functorch dead-wrapper unwrapping, which only matters under functorch
# transforms: then we go through the full ``apply``).
_apply_c = super(torch.autograd.Function, CompiledFunction).apply
_functorch_active = torch._C._are_functorch_transforms_active


def _apply(art: TrainingArtifact, primals: tuple):
    if _functorch_active():
        return CompiledFunction.apply(art, *primals)
    return _apply_c(art, *primals)


def _leaves_behind(ctx, args: list) -> tuple:
    """Under create_graph=True, the leaves this op's forward took that require grad, read off
    its node's edges (AccumulateGrad.variable: nothing is kept in the forward), so that the
    first-order gradients hang off a node reachable from every such input: a second
    ``autograd.grad(g, x, allow_unused=True)`` raises the double-backward error instead of
    returning None (eager's second derivative), which it did when the backward read only
    intermediates the forward saved (``x.exp()``: no edge to x). An input that is not a leaf
    cannot be reached that way: unless a saved tensor connects to something, refuse at once."""
    leaves = []
    inner = False
    for node, _ in ctx.next_functions:
        if node is None:
            continue
        var = getattr(node, "variable", None)
        if isinstance(var, torch.Tensor):
            leaves.append(var)
        else:
            inner = True
    if inner and not any(isinstance(a, torch.Tensor) and a.requires_grad for a in args):
        raise RuntimeError(DOUBLE_BACKWARD_ERROR + " (create_graph=True through a compiled graph whose "
                           "input is not a leaf: its gradients could not be differentiated again)")
    return tuple(leaves)


class _OnceDifferentiable(torch.autograd.Function):
    """The compiled backward run under create_graph=True (as torch's CompiledFunctionBackward):
    its gradients hang off a node whose inputs are the backward's own (saved primals such as x
    stay connected to x), so a second ``autograd.grad(g, x)`` reaches it and raises torch's
    plain error instead of autograd's "appears to not have been used in the graph"."""

    @staticmethod
    def forward(ctx, bw, *args):
        return tuple(bw(*args))

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError(DOUBLE_BACKWARD_ERROR)

    @classmethod
    def run(cls, bw, args: list, leaves: tuple):
        """``bw(*args)`` with the node's inputs ``args`` and ``leaves`` (see _leaves_behind)."""
        extra = leaves
        if not extra and not any(isinstance(a, torch.Tensor) and a.requires_grad for a in args):
            extra = (torch.empty(0, device="cpu", requires_grad=True),)   # so the outputs get the node
        if not extra:
            return cls.apply(bw, *args)
        n = len(args)
        return cls.apply(lambda *a: bw(*a[:n]), *args, *extra)


class EagerTraining(Exception):
    """Raised by ``make_training`` when no joint graph can be traced that keeps eager's
    behaviour; calls with those requires_grad flags then run the torch-level graph eagerly."""


_EAGER = object()       # CompiledProgram._training value for flags that run eagerly


class CompiledProgram:
    """What the backend returns: ``fn(*inputs) -> tuple`` of the user graph's outputs."""

    def __init__(self, schema: Schema, state: list[torch.Tensor],
                 make_training: Callable[[tuple], TrainingArtifact],
                 make_inference: Callable[[], Callable], eager: Callable):
        self.schema = schema
        self.state = tuple(state)
        self._make_training = make_training
        self._make_inference = make_inference
        self._training: dict[tuple, TrainingArtifact | object] = {}   # or _EAGER
        self._inference: Callable | None = None
        self._mutated = tuple(schema.mutated_inputs)
        self._restrided = tuple((m.index, m.size, m.stride, m.offset_delta) for m in schema.meta_changes)
        self._eager = eager
        self._eager_aliased = eager_for_aliased(eager, "aot")
        n = schema.num_fw_outs
        self._mutation_slice = slice(n - len(self._mutated), n)
        kinds = [o.kind for o in schema.outputs]
        self._simple = (not self._mutated and not self._restrided and all(k is OutputKind.PLAIN for k in kinds)
                        and [o.index for o in schema.outputs] == list(range(len(kinds)))
                        and len(kinds) == n)
        self._out_plan = tuple((o.kind, o.index, o.size, o.stride, o.offset, o.base_stride, o.detach,
                                o.no_grad, o.conj, o.neg) for o in schema.outputs)

    def freeze_shapes(self, env) -> None:
        """Symbolic sizes (dynamic shapes): the frame's guards are installed once this returns,
        so a variant built later (other requires_grad flags, a no_grad call) whose trace would
        need a new guard on the sizes runs the graph eagerly instead."""
        facts = shape_facts(env)
        make_training, make_inference = self._make_training, self._make_inference

        def training(flags: tuple) -> TrainingArtifact:
            art = make_training(flags)
            if shape_facts(env) != facts:
                raise EagerTraining("its trace needs a new guard on the symbolic sizes")
            return art

        def inference() -> Callable:
            fn = make_inference()
            if shape_facts(env) == facts:
                return fn
            log("fallbacks", "aot: running the graph eagerly without grad: its trace needs a new guard "
                "on the symbolic sizes")
            return self._eager
        self._make_training, self._make_inference = training, inference

    # -- variants, built on first need
    def training(self, flags: tuple) -> TrainingArtifact | object:
        """The artifact for these requires_grad flags, or ``_EAGER`` (logged once)."""
        art = self._training.get(flags)
        if art is None:
            try:
                art = self._make_training(flags)
            except EagerTraining as e:
                log("fallbacks", "aot: running the graph eagerly for calls that need autograd: %s", e)
                art = _EAGER
            self._training[flags] = art
        return art

    def inference(self) -> Callable:
        if self._inference is None:
            self._inference = self._make_inference()
        return self._inference

    def __call__(self, *inputs):
        primals = inputs + self.state
        if self._mutated and shares_storage(primals, self._mutated):
            return self._eager_aliased(*inputs)
        if torch.is_grad_enabled():
            try:
                flags = tuple(map(_requires_grad, primals))
            except AttributeError:                  # a non-tensor input (a constant the graph specialized)
                flags = tuple(isinstance(p, torch.Tensor) and p.requires_grad for p in primals)
            if True in flags:
                if self._restrided:                 # autograd through as_strided_ of an input: eager
                    return self._eager(*inputs)
                art = self._training.get(flags) or self.training(flags)
                if art is _EAGER:
                    return self._eager(*inputs)
                outs = _apply(art, _unlinked(art, primals, flags))
                if art.leaf_outs:
                    for i in art.leaf_outs:
                        outs[i].requires_grad_()
                return self._finish(primals, outs)
        inference = self._inference or self.inference()
        return self._finish(primals, inference(*primals))

    def _finish(self, primals, fw_outs):
        if self._simple:
            return tuple(fw_outs)
        for k, size, stride, delta in self._restrided:
            target = primals[k]
            target.as_strided_(size, stride, target.storage_offset() + delta)
        for k, new in zip(self._mutated, fw_outs[self._mutation_slice]):
            target = primals[k]
            if target.requires_grad and not new.requires_grad:
                with torch.no_grad():
                    target.copy_(new)
            else:
                target.copy_(new)
        result: list = []
        for kind, idx, size, stride, offset, base_stride, detach, no_grad, conj, neg in self._out_plan:
            if kind is OutputKind.PLAIN:
                result.append(fw_outs[idx])
            elif kind is OutputKind.INPUT_VIEW or kind is OutputKind.BASE_VIEW:
                base = primals[idx] if kind is OutputKind.INPUT_VIEW else fw_outs[idx]
                if base.stride() != base_stride and not _same_addressing(base, base_stride):
                    raise AotUnsupported(
                        f"aot: an output is a view of a tensor traced with strides {base_stride}, "
                        f"called with strides {base.stride()}; recompile for the new layout")
                if detach:
                    base = base.detach()
                if no_grad:
                    with torch.no_grad():
                        result.append(_view_of(base, size, stride, offset, conj, neg))
                else:
                    result.append(_view_of(base, size, stride, offset, conj, neg))
            elif kind is OutputKind.IS_INPUT:
                result.append(primals[idx])
            else:
                result.append(result[idx])
        return tuple(result)
