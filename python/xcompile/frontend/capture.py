"""What the frontend hands to the rest of the compiler for one frame: ``FrameState`` in (the code
and the values it starts with), ``CapturedGraph`` out (the graph, its inputs' sources, guards,
output spec and side-effect plan). ``frontend/graph_break.capture`` makes one per frame, whole or
up to a graph break.
"""
from __future__ import annotations

import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

import torch

from ..guards.sources import Source
from ..guards.spec import GuardSet
from .break_log import BreakRecord


@dataclass
class FrameState:
    """The frame about to run: its code and the values it starts with."""

    code: types.CodeType
    f_locals: dict[str, Any]            # the arguments, by name (co_varnames order)
    f_globals: dict[str, Any]
    f_builtins: dict[str, Any]
    closure: tuple | None               # the function's __closure__ (cells), co_freevars order


# Output spec: how the frame's return value is rebuilt from the graph's outputs ``outs``, run
# by the cache entry in C++ after the graph returns (``guards/lower.lower_output_spec`` turns it
# into the C++ plan). Each node is a named tuple whose first field names its kind, so a spec
# prints and compares as the plain tuple it is: ``Seq("tuple", [Out(0), Const(0.5)]) ==
# ("tuple", [("out", 0), ("const", 0.5)])``.
class Out(NamedTuple):
    """``outs[position]``: a tensor or captured scalar the graph returns."""
    kind: Literal["out"]
    position: int


class Const(NamedTuple):
    """A constant computed at trace time."""
    kind: Literal["const"]
    value: Any


class PassThrough(NamedTuple):
    """The value at ``CapturedGraph.passthrough_sources[slot]``, handed back as it is."""
    kind: Literal["source"]
    slot: int


class Seq(NamedTuple):
    """A tuple or list (``kind``) of the parts."""
    kind: Literal["tuple", "list"]
    parts: list


class DictSpec(NamedTuple):
    """A dict, insertion order kept."""
    kind: Literal["dict"]
    keys: list
    parts: list


class NamedTupleSpec(NamedTuple):
    """``cls(*parts)`` (a structseq such as torch.return_types.max: ``cls(parts)``)."""
    kind: Literal["namedtuple"]
    cls: type
    parts: list


OutputSpec = Out | Const | PassThrough | Seq | DictSpec | NamedTupleSpec


def out(index: int) -> Out:
    return Out("out", index)


def const(value: Any) -> Const:
    return Const("const", value)


def passthrough(index: int) -> PassThrough:
    return PassThrough("source", index)


@dataclass
class CapturedGraph:
    gm: torch.fx.GraphModule            # placeholders in input_sources order; returns a tuple
    example_inputs: list                # the real values of the placeholders at trace time
    input_sources: list[Source]         # where each placeholder comes from
    output: OutputSpec                  # see above
    guards: GuardSet
    passthrough_sources: list[Source] = field(default_factory=list)  # non-graph values returned as-is
    # Mutations of state from outside the frame (frontend/side_effects.py EffectPlan), or None.
    # Its objects are passthrough_sources[:side_effects.n_objects]; apply after the graph runs.
    side_effects: Any = None
    # The grad mode the frame leaves behind when it differs from the one it was called in
    # (torch.set_grad_enabled(False) called, not used as a context): the graph itself leaves the
    # mode as it found it; the cache entry sets this one after the graph (an AOT backend does
    # not run the graph's set_grad_enabled nodes at all).
    grad_mode_after: bool | None = None


# -- what graph_break.capture returns for one frame ----------------------------------------------------------
@dataclass
class WholeFrame:
    captured: CapturedGraph


@dataclass
class EagerFrame:
    record: BreakRecord
    why: str


@dataclass
class BrokenFrame:
    """The prefix graph and the replacement code that continues after the break."""

    captured: CapturedGraph
    record: BreakRecord
    has_graph: bool
    _finish: Callable[[Any], types.FunctionType] = field(repr=False)
    source_text: str = ""

    def make_runner(self, compiled_graph) -> types.FunctionType:
        """The function the C++ cache entry calls with the frame's arguments (and closure)."""
        return self._finish(compiled_graph)
