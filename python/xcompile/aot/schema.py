"""What a program does to its inputs and how its outputs alias, found before tracing.

One run of the lifted program on fake functional tensors (cheap: no data) answers:
- which inputs it writes into (data mutations) and which it restrides in place (``x.t_()``:
  metadata mutations, replayed on the real input with ``as_strided_``),
- which outputs are an input, a view of an input, or views of one another,
- which outputs require grad.

From that we fix the list of tensors the functional forward returns ("fw outs"):

    [plain outputs ...] + [bases of aliased output groups ...] + [new values of mutated inputs ...]

and how each user output is rebuilt from fw outs and inputs at run time (``OutputInfo``).
"""
from __future__ import annotations

import contextlib
import dataclasses
import enum
from dataclasses import dataclass
from typing import cast

import torch
from torch._dispatch.python import enable_python_dispatcher
from torch._prims_common import is_non_overlapping_and_dense_or_false
from torch.multiprocessing.reductions import StorageWeakRef

from .functional import (
    from_functional,
    functionalization,
    has_data_mutation,
    has_metadata_mutation,
    mutation_counter,
    non_overlapping,
    restride,
    same_layout,
    to_functional,
)


class AotUnsupported(RuntimeError):
    """A program the AOT pipeline cannot compile; the message says what and why."""


class OutputKind(enum.Enum):
    PLAIN = "plain"            # fw_outs[index]
    DUP = "dup"                # the same object as user output [index]
    IS_INPUT = "is_input"      # primals[index] itself
    INPUT_VIEW = "input_view"  # a view of primals[index], rebuilt with as_strided
    BASE_VIEW = "base_view"    # a view of fw_outs[index] (a group base), rebuilt with as_strided


@dataclass(frozen=True)
class OutputInfo:
    kind: OutputKind
    index: int
    size: tuple[int, ...] = ()
    stride: tuple[int, ...] = ()
    offset: int = 0            # storage offset relative to the base's storage offset
    deview: bool = False       # PLAIN output that is a view of a hidden intermediate
    base_stride: tuple[int, ...] = ()   # the base's strides when traced (views are rebuilt for these)
    detach: bool = False       # INPUT_VIEW reached through detach(): shares the input's memory, no grad
    no_grad: bool = False      # a view made under no_grad (requires grad, no grad_fn): an INPUT_VIEW or
                               # BASE_VIEW is rebuilt under no_grad, a PLAIN one is a fresh leaf
    conj: bool = False         # a view with the conjugate bit (``x.conj()``, ``fft.ifft`` of a real x):
    neg: bool = False          # or the negative bit (``x.conj().imag``); as_strided of the base keeps
                               # the base's bits, so a rebuilt view sets its own

    def describe(self) -> str:
        return f"{self.kind.value}[{self.index}]"


@dataclass(frozen=True)
class FwOut:
    recipe: tuple              # ("out", i) | ("base_of", i) | ("input", k): how to read it off a run
    requires_grad: bool
    size: tuple[int, ...]
    dtype: torch.dtype
    device: torch.device
    layout: tuple[int, ...] | None = None   # eager's strides where the functional trace's differ


@dataclass(frozen=True)
class MetaChange:
    """An input restrided in place by the program: its size and strides after, and its storage
    offset after minus before."""
    index: int
    size: tuple[int, ...]
    stride: tuple[int, ...]
    offset_delta: int


@dataclass
class Schema:
    num_primals: int
    input_requires_grad: list[bool]
    mutated_inputs: list[int]          # primal indices written by the program, in order
    outputs: list[OutputInfo]          # one per user output
    fw_outs: list[FwOut]               # what the functional forward returns
    cloned_inputs: list[int]           # mutated inputs that require grad: traced on a clone
    meta_changes: list[MetaChange] = dataclasses.field(default_factory=list)

    def prepare(self, fprimals: list) -> list:
        """The inputs as the program sees them: a mutated input that requires grad is
        cloned first, so autograd lets the program write into it (as it would into the
        non-leaf tensor it is in eager) and the gradient still reaches the input."""
        if not self.cloned_inputs:
            return fprimals
        used = list(fprimals)
        for k in self.cloned_inputs:
            used[k] = used[k].clone()
            if not same_layout(used[k].shape, used[k].stride(), fprimals[k].stride()) and \
                    non_overlapping(fprimals[k].shape, fprimals[k].stride()):
                restride(used[k], fprimals[k].stride())   # a clone of x[:, 1:] is contiguous
        return used

    @property
    def num_fw_outs(self) -> int:
        return len(self.fw_outs)

    @property
    def num_mutations(self) -> int:
        return len(self.mutated_inputs)

    @property
    def diff_fw_outs(self) -> list[int]:
        """Indices of fw outs that get a tangent in the joint graph."""
        return [i for i, o in enumerate(self.fw_outs) if o.requires_grad]

    def collect(self, outs: tuple, fprimals: list) -> list:
        """Pick the fw outs off one functional run (same program, any tensors)."""
        picked = []
        for fo in self.fw_outs:
            what, i = fo.recipe
            if what == "out" and fo.layout is not None:
                t = outs[i]
                picked.append(torch.empty_strided(t.shape, fo.layout, dtype=t.dtype, device=t.device).copy_(t))
            elif what == "out":
                picked.append(outs[i])
            elif what == "base_of":
                picked.append(outs[i]._base)
            else:
                picked.append(fprimals[i])
        return picked

    def summary(self) -> str:
        outs = ", ".join(o.describe() for o in self.outputs)
        return (f"Schema(primals={self.num_primals}, mutated={self.mutated_inputs}, "
                f"outputs=[{outs}], fw_outs={len(self.fw_outs)})")


def _view_info(out: torch.Tensor, base: torch.Tensor, kind: OutputKind, index: int,
               detach: bool = False) -> OutputInfo:
    # (static fake tensors, no ShapeEnv: storage offsets are ints)
    return OutputInfo(kind, index, tuple(out.shape), tuple(out.stride()),
                      cast(int, out.storage_offset() - base.storage_offset()), base_stride=tuple(base.stride()),
                      detach=detach, conj=out.is_conj(), neg=out.is_neg())


def analyze(program, fake_primals: list, fake_mode) -> Schema:
    """Run ``program`` once on fake functional tensors and describe its effects."""
    requires_grad = [bool(getattr(p, "requires_grad", False)) for p in fake_primals]
    # user inputs that require grad may be non-leaves the program writes into: give it a clone
    maybe_cloned = [k for k in range(program.num_user_inputs) if requires_grad[k]]
    with _keeping_metadata(fake_primals):
        return _analyze(program, fake_primals, fake_mode, requires_grad, maybe_cloned)


@contextlib.contextmanager
def _keeping_metadata(fakes: list):
    """A restride of an input (``x.t_()``) reaches the fake under its functional wrapper (and
    the plain run of _eager_layouts restrides the fake itself): put every fake back after."""
    before = [(t, t.size(), t.stride(), t.storage_offset()) for t in fakes if isinstance(t, torch.Tensor)]
    try:
        yield
    finally:
        with torch.no_grad():
            for t, size, stride, offset in before:
                if t.size() != size or t.stride() != stride or t.storage_offset() != offset:
                    t.as_strided_(size, stride, offset)


def _analyze(program, fake_primals: list, fake_mode, requires_grad: list[bool],
             maybe_cloned: list[int]) -> Schema:
    with fake_mode, enable_python_dispatcher(), functionalization(), torch.enable_grad():
        fprimals = [to_functional(p) for p in fake_primals]
        probe = Schema(len(fprimals), requires_grad, [], [], [], maybe_cloned)
        used = probe.prepare(fprimals)
        grad_fns = [getattr(u, "grad_fn", None) for u in used]
        offsets = [u.storage_offset() if isinstance(u, torch.Tensor) else 0 for u in used]
        writes = [mutation_counter(u) if isinstance(u, torch.Tensor) else 0 for u in used]
        outs = program(*used)
        schema = _describe(outs, used, requires_grad, grad_fns, offsets, writes)
        schema.cloned_inputs = [k for k in maybe_cloned if k in schema.mutated_inputs]
    if writes_in_place(program.gm):
        _eager_layouts(program, fake_primals, fake_mode, maybe_cloned, outs, schema)
    return schema


def writes_in_place(gm: torch.fx.GraphModule) -> bool:
    for n in gm.graph.nodes:
        name = n.target if isinstance(n.target, str) else getattr(n.target, "__name__", "")
        if n.op in ("call_method", "call_function") and (
                name == "setitem" or (name.endswith("_") and not name.endswith("__"))):
            return True
    return False


def _significant_strides(t: torch.Tensor) -> tuple:
    return tuple(st for n, st in zip(t.shape, t.stride()) if n > 1)


def _eager_layouts(program, fake_primals: list, fake_mode, cloned: list[int], fouts: tuple,
                   schema: Schema) -> None:
    """Functionalization rebuilds a base written through a view as ``view_inverse(new view)``,
    with the layout of the out-of-place op's result, not of the base (``b = x.clone().t();
    b.masked_fill_(m, v); return b`` is row-major after it, column-major in eager). One plain
    fake run gives eager's layouts; plain outputs that differ are copied to them in the graph."""
    try:
        with fake_mode, torch.enable_grad():
            plain = [_clone_keeping_layout(p) if k in cloned else p for k, p in enumerate(fake_primals)]
            eouts = program(*plain)
    except Exception:  # noqa: BLE001 - eager layouts unknown: keep the functional ones
        return
    _eager_input_views(schema, eouts, plain)
    for j, fo in enumerate(schema.fw_outs):
        what, i = fo.recipe
        if what != "out" or i >= len(eouts) or not isinstance(eouts[i], torch.Tensor):
            continue
        e, f = eouts[i], fouts[i]
        if e.shape == f.shape and _significant_strides(e) != _significant_strides(f) and \
                is_non_overlapping_and_dense_or_false(e):
            schema.fw_outs[j] = dataclasses.replace(fo, layout=tuple(e.stride()))


def _clone_keeping_layout(p: torch.Tensor) -> torch.Tensor:
    """A clone with ``p``'s strides, as prepare() gives the functional run: ``clone()`` makes a
    row-strided ``x[:, ::2]`` contiguous, and the views of it the program returns would then be
    rebuilt for strides the caller's tensor does not have."""
    if not non_overlapping(p.shape, p.stride()):
        return p.clone()
    return torch.empty_strided(p.shape, p.stride(), dtype=p.dtype, device=p.device).copy_(p)


def _eager_input_views(schema: Schema, eouts, plain: list) -> None:
    """Outputs that are views of inputs, rebuilt as the plain fake run made them: after a write
    into an input, its functional wrapper (and the views taken of it) may report the layout of
    the functional value instead of the input's (a row of a matrix, written through ``x[0] *=
    2``, came back at storage offset 0 when traced a second time)."""
    for i, info in enumerate(schema.outputs):
        if info.kind is not OutputKind.INPUT_VIEW or i >= len(eouts):
            continue
        e, base = eouts[i], plain[info.index]
        if not isinstance(e, torch.Tensor) or not isinstance(base, torch.Tensor) or \
                tuple(e.shape) != info.size or \
                StorageWeakRef(e.untyped_storage()) != StorageWeakRef(base.untyped_storage()):
            continue
        schema.outputs[i] = dataclasses.replace(
            info, stride=tuple(e.stride()), offset=cast(int, e.storage_offset() - base.storage_offset()),
            base_stride=tuple(base.stride()))


def _meta_change(k: int, p: torch.Tensor, offset_before: int) -> MetaChange:
    """How input ``k`` was restrided; refused when it now reaches past its storage (resize_)."""
    inner = from_functional(p)
    size, stride, offset = tuple(inner.shape), tuple(inner.stride()), inner.storage_offset()
    extent = offset + sum((n - 1) * st for n, st in zip(size, stride)) + 1 if all(size) else 0
    if extent * inner.element_size() > inner.untyped_storage().nbytes():
        raise AotUnsupported(f"aot: input {k} is resized in place beyond its storage (resize_); "
                             "only restriding an input in place (t_(), squeeze_(), as_strided_) "
                             "is supported")
    return MetaChange(k, size, stride, offset - offset_before)


def _no_grad_view(o: torch.Tensor) -> bool:
    """A view of a graph intermediate made under no_grad: it requires grad, yet it has no
    grad_fn and no gradient flows through it (eager treats it as a leaf)."""
    return bool(o.requires_grad and o.grad_fn is None and o._is_view())


def _describe(outs: tuple, fprimals: list, input_requires_grad: list[bool],
              grad_fns_before: list | None = None, offsets_before: list | None = None,
              writes_before: list | None = None) -> Schema:
    for i, o in enumerate(outs):
        if not isinstance(o, torch.Tensor):
            raise AotUnsupported(f"aot: output {i} is a {type(o).__name__}; graphs must return tensors")
    mutated = []
    meta_changes = []
    for k, p in enumerate(fprimals):
        if not isinstance(p, torch.Tensor):
            continue
        if has_metadata_mutation(p):
            meta_changes.append(_meta_change(k, p, offsets_before[k] if offsets_before else 0))
        if has_data_mutation(p) and (writes_before is None or mutation_counter(p) > writes_before[k]):
            mutated.append(k)         # (a clone restrided by prepare() was written by it, not by the program)
    input_slot = {id(p): k for k, p in enumerate(fprimals)}
    input_storage: dict[StorageWeakRef, int] = {}
    for k, p in enumerate(fprimals):
        if isinstance(p, torch.Tensor):
            input_storage.setdefault(StorageWeakRef(p.untyped_storage()), k)

    infos: list[OutputInfo | None] = [None] * len(outs)
    groups: dict[int, list[int]] = {}       # id(root) -> user output indices
    roots: dict[int, torch.Tensor] = {}
    root_of: dict[int, int] = {}            # user output index -> id(root)
    first_seen: dict[int, int] = {}
    for i, o in enumerate(outs):
        if id(o) in first_seen:
            infos[i] = OutputInfo(OutputKind.DUP, first_seen[id(o)])
            continue
        first_seen[id(o)] = i
        if id(o) in input_slot:
            infos[i] = OutputInfo(OutputKind.IS_INPUT, input_slot[id(o)])
            continue
        base = o._base if o._is_view() else None
        if base is not None and base.dtype != o.dtype:
            base = None                      # dtype-reinterpreting views are returned as plain tensors
        if base is not None and id(base) in input_slot:
            info = _view_info(o, base, OutputKind.INPUT_VIEW, input_slot[id(base)])
            if base.requires_grad and o.requires_grad and o.grad_fn is None:
                # a view made under no_grad: it requires grad, yet no gradient flows through it
                info = dataclasses.replace(info, no_grad=True)
            infos[i] = info
            continue
        slot = input_storage.get(StorageWeakRef(o.untyped_storage()))
        if slot is not None and not o.requires_grad and o.dtype == fprimals[slot].dtype:
            # ``x.detach()`` (and views of it) is no autograd view of x, yet shares its memory
            # (a view of another dtype, ``x.imag`` of a complex x, is returned plain as above)
            infos[i] = _view_info(o, fprimals[slot], OutputKind.INPUT_VIEW, slot, detach=True)
            continue
        root = base if base is not None else o
        groups.setdefault(id(root), []).append(i)
        roots[id(root)] = root
        root_of[i] = id(root)

    fw_outs: list[FwOut] = []

    def add_fw_out(recipe: tuple, t: torch.Tensor, requires_grad: bool | None = None) -> int:
        rg = bool(t.requires_grad) if requires_grad is None else requires_grad
        fw_outs.append(FwOut(recipe, rg, tuple(t.shape), t.dtype, t.device))
        return len(fw_outs) - 1

    # plain outputs first, in user order (a group whose root is itself an output is based on it)
    base_slot: dict[int, int] = {}
    for i, o in enumerate(outs):
        if infos[i] is not None:
            continue
        root = roots[root_of[i]]
        members = groups[root_of[i]]
        if root is o or len(members) == 1:
            hidden_view = root is not o
            ng = _no_grad_view(o)
            plain_info = OutputInfo(OutputKind.PLAIN, add_fw_out(("out", i), o, False if ng else None),
                                    deview=hidden_view, no_grad=ng)
            infos[i] = plain_info
            if root is o:
                base_slot[id(root)] = plain_info.index
    # then the hidden bases of groups of outputs that alias one another
    for key, members in groups.items():
        if len(members) < 2:
            continue
        root = roots[key]
        if key not in base_slot:
            base_slot[key] = add_fw_out(("base_of", members[0]), root)
        for i in members:
            if infos[i] is None:
                infos[i] = dataclasses.replace(_view_info(outs[i], root, OutputKind.BASE_VIEW, base_slot[key]),
                                               no_grad=_no_grad_view(outs[i]))
    # then the new values of mutated inputs; a write autograd did not see is not differentiable:
    # one under no_grad (``with torch.no_grad(): w.clamp_(...)``) or through a detached alias
    # (``w.detach().renorm_(...)``, as F.embedding(max_norm=...) does). Either leaves w's
    # grad_fn as it was (a leaf, or the clone prepare() made); a differentiable write replaces it.
    for k in mutated:
        p = fprimals[k]
        unseen = (grad_fns_before is not None and p.requires_grad
                  and p.grad_fn is grad_fns_before[k])
        hidden = torch._functionalize_are_all_mutations_under_no_grad_or_inference_mode(p) or unseen
        add_fw_out(("input", k), p, requires_grad=bool(p.requires_grad) and not hidden)
    return Schema(
        num_primals=len(fprimals),
        input_requires_grad=input_requires_grad,
        mutated_inputs=mutated,
        outputs=[info for info in infos if info is not None],
        fw_outs=fw_outs,
        cloned_inputs=[],
        meta_changes=meta_changes,
    )
