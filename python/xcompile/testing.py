"""Backends for tests, in the shape of torch._dynamo.testing's."""
from __future__ import annotations

import contextlib
import logging

import torch


class CompileCounter:
    """Counts graphs and ops; runs each graph eagerly."""

    def __init__(self):
        self.frame_count = 0
        self.op_count = 0
        self.graphs: list[torch.fx.GraphModule] = []

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list):
        self.frame_count += 1
        self.graphs.append(gm)
        self.op_count += sum(1 for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module"))
        return gm.forward

    def clear(self):
        self.frame_count = 0
        self.op_count = 0
        self.graphs.clear()


class CompileCounterWithBackend(CompileCounter):
    """Counts graphs, then hands each to another backend."""

    def __init__(self, backend):
        super().__init__()
        from .backends.registry import lookup_backend

        self.backend = lookup_backend(backend)

    def __call__(self, gm, example_inputs):
        super().__call__(gm, example_inputs)
        return self.backend(gm, example_inputs)


class EagerAndRecordGraphs:
    """Records each graph and runs it eagerly."""

    def __init__(self):
        self.graphs: list[torch.fx.GraphModule] = []

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        return gm.forward


class _ListHandler(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record):
        self.messages.append(record.getMessage())


@contextlib.contextmanager
def captured_logs(*artifacts: str):
    """Turns the named log artifacts on and yields the list of messages logged inside the block."""
    from . import log, set_logs

    handler = _ListHandler()
    was_on = {a: log.enabled(a) for a in artifacts}
    set_logs(**{a: True for a in artifacts})
    loggers = [logging.getLogger(f"xcompile.{a}") for a in artifacts]
    for lg in loggers:
        lg.addHandler(handler)
    try:
        yield handler.messages
    finally:
        for lg in loggers:
            lg.removeHandler(handler)
        set_logs(**was_on)


def graph_break_logs(messages: list[str]) -> list[str]:
    """The graph-break messages among captured log messages."""
    return [m for m in messages if m.startswith("Graph break")]
