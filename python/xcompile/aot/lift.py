"""Lift a torch-level FX graph into a function of flat tensors.

The frontend hands us a GraphModule whose parameters and buffers are ``get_attr``
nodes naming the REAL ``nn.Parameter`` / buffer objects. AOT tracing needs them as
inputs ("primals"), so we make

    program(*user_inputs, *state) -> tuple of outputs

where ``state`` are those objects, deduplicated by identity (tied weights appear
once). ``call_module`` nodes (what ``torch.fx.symbolic_trace`` leaves for leaf
modules) are supported too: the submodule's parameters and buffers become state and
the call runs through ``torch.func.functional_call``.

The lifted program is only ever run at trace time (on fake tensors); the compiled
artifact never interprets the user graph.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from .functional import non_overlapping, restride, same_layout, same_shape


def _fetch_attr(root: torch.nn.Module, target: str) -> Any:
    obj: Any = root
    for atom in target.split("."):
        obj = getattr(obj, atom)
    return obj


@dataclass
class LiftedProgram:
    gm: torch.fx.GraphModule
    num_user_inputs: int
    state: list[torch.Tensor]                 # the real parameter / buffer objects
    state_names: list[str]                    # where each was found (for messages and dumps)
    _attr_slot: dict[str, int] = field(default_factory=dict)              # get_attr target -> state slot
    _module_slots: dict[str, dict[str, int]] = field(default_factory=dict)  # module target -> {name: slot}

    def __call__(self, *primals):
        user = primals[: self.num_user_inputs]
        state = primals[self.num_user_inputs:]
        with _EagerDropoutAliasing():
            out = _LiftedInterpreter(self, state).run(*user)
        if isinstance(out, torch.Tensor):
            out = (out,)
        if not isinstance(out, (tuple, list)):
            raise TypeError(f"aot: the graph must return a tuple of tensors, got {type(out).__name__}")
        return tuple(out)


class _EagerDropoutAliasing(TorchFunctionMode):
    """Eager dropout with p == 0 or training=False returns its input itself (an alias); the
    Python-dispatcher decomposition we trace under returns a clone. Keep eager's aliasing."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is F.dropout or func is torch.dropout:
            names = ("input", "p", "training" if func is F.dropout else "train")
            bound = dict(zip(names, args), **kwargs)
            if not bound.get(names[2], True) or bound.get("p", 0.5) == 0:
                return bound["input"]
        return func(*args, **kwargs)


class _LiftedInterpreter(torch.fx.Interpreter):
    def __init__(self, program: LiftedProgram, state):
        super().__init__(program.gm, garbage_collect_values=True)
        self.program = program
        self.state_values = state

    def run_node(self, n: torch.fx.Node):
        if n.op not in ("call_function", "call_method", "call_module"):
            return super().run_node(n)
        watched = [(t, t.shape, t.stride()) for t in self._functional_inputs(n) if t.layout == torch.strided]
        out = super().run_node(n)
        if watched and not _restrides(n):
            for t, shape, stride in watched:
                if same_shape(t.shape, shape) and not same_layout(shape, t.stride(), stride) and \
                        non_overlapping(shape, stride):
                    restride(t, stride)       # a write took the out-of-place result's strides
        return out

    def _functional_inputs(self, n: torch.fx.Node) -> list:
        """The functional wrappers node ``n`` reads (any of which it may write)."""
        found = []
        for inp in n.all_input_nodes:
            v = self.env.get(inp)
            for t in (v if isinstance(v, (list, tuple)) else (v,)):
                if isinstance(t, torch.Tensor) and torch._is_functional_tensor(t):
                    found.append(t)
        return found

    def get_attr(self, target, args, kwargs):
        slot = self.program._attr_slot.get(target)
        if slot is not None:
            return self.state_values[slot]
        return super().get_attr(target, args, kwargs)

    def call_module(self, target, args, kwargs):
        slots = self.program._module_slots.get(target)
        module = self.fetch_attr(target)
        if not slots:
            return module(*args, **kwargs)
        params = {name: self.state_values[slot] for name, slot in slots.items()}
        return torch.func.functional_call(module, params, args, kwargs, tie_weights=False, strict=True)


def _restrides(n: torch.fx.Node) -> bool:
    """Whether ``n`` changes its input's layout in eager too (``x.t_()``, ``set_``)."""
    name = n.target if isinstance(n.target, str) else getattr(n.target, "__name__", "")
    if name in ("set_", "resize_", "resize_as_"):
        return True
    packet = getattr(torch.ops.aten, name, None) if name.endswith("_") else None
    if not isinstance(packet, torch._ops.OpOverloadPacket):
        return False
    return any(torch.Tag.inplace_view in getattr(packet, o).tags for o in packet.overloads())


def lift(gm: torch.fx.GraphModule) -> LiftedProgram:
    """Find every tensor the graph reads from ``gm`` and make it an input."""
    state: list[torch.Tensor] = []
    names: list[str] = []
    slot_of_id: dict[int, int] = {}

    def slot_for(t: torch.Tensor, name: str) -> int:
        slot = slot_of_id.get(id(t))
        if slot is None:
            slot = slot_of_id[id(t)] = len(state)
            state.append(t)
            names.append(name)
        return slot

    num_user = 0
    program = LiftedProgram(gm, 0, state, names)
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            num_user += 1
        elif node.op == "get_attr":
            value = _fetch_attr(gm, node.target)
            if isinstance(value, torch.Tensor):
                program._attr_slot[node.target] = slot_for(value, node.target)
        elif node.op == "call_module" and node.target not in program._module_slots:
            module = _fetch_attr(gm, node.target)
            tensors = list(module.named_parameters(remove_duplicate=False))
            tensors += list(module.named_buffers(remove_duplicate=False))
            program._module_slots[node.target] = {
                name: slot_for(t, f"{node.target}.{name}") for name, t in tensors
            }
    program.num_user_inputs = num_user
    return program
