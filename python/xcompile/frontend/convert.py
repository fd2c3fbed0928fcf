"""trace_frame: one frame's bytecode -> one FX graph + guards (or Unsupported).

    tracer = Tracer(frame)                  shared state: graph builder, guard builder, wrapped objects
    result = tracer.top_frame().run()       the symbolic interpreter (inlines every Python call)
    out    = OutputBuilder(tracer)          plans the side effects first (their slots and outputs)
    spec   = out.spec(result)               which graph outputs / constants / inputs make the return value
    gm     = graph_builder.finish(outputs)  GraphModule holding the module state it reads (get_attr)
"""
from __future__ import annotations

import inspect

from . import exceptions, ops_binary, ops_build, ops_calls, ops_control, ops_load_store  # noqa: F401  (fill HANDLERS)
from .capture import CapturedGraph, FrameState
from .exc import Unsupported
from .output import OutputBuilder
from .tracer import Tracer

_NOT_PLAIN = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR | inspect.CO_ITERABLE_COROUTINE


def trace_frame(frame: FrameState, *, fullgraph: bool = False) -> CapturedGraph:
    if frame.code.co_flags & _NOT_PLAIN:
        raise Unsupported(f"compiling generator or coroutine {frame.code.co_name}",
                          "Compile the code that consumes the generator instead.")
    tracer = Tracer(frame, fullgraph=fullgraph)
    result = tracer.top_frame().run()
    out = OutputBuilder(tracer)
    spec = out.spec(result)
    gm = tracer.gb.finish(out.outputs)
    return CapturedGraph(
        gm=gm,
        example_inputs=list(tracer.gb.example_inputs),
        input_sources=list(tracer.gb.input_sources),
        output=spec,
        guards=tracer.guards.build(),
        passthrough_sources=out.passthrough,
        side_effects=out.effects,
    )
