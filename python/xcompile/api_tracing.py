"""The fine-grained tracing APIs, with the names and meanings PyTorch users know.

    graph_break(msg="")          force a graph break here
    allow_in_graph(fn)           calls of ``fn`` become one graph node (its body is not traced)
    disallow_in_graph(fn)        calls of ``fn`` break the graph and run eagerly
    forbid_in_graph(fn)          reaching ``fn`` while tracing is an error
    nonstrict_trace(fn)          decorator or inline wrapper: ``fn`` is traced non-strictly (one
                                 node; tensors it reads besides its inputs are constants)
    error_on_graph_break(flag)   decorator and context manager: with ``flag=True`` a graph break
                                 (without fullgraph) raises instead of splitting the graph

``disable(fn=None, recursive=True)`` lives in ``api.py``. What each mark means while tracing is
in ``frontend/tracing_rules.py``; outside a compiled region every function here is a no-op
wrapper (the marked function runs as written).
"""
from __future__ import annotations

import functools

from . import config
from .frontend import codegen, marks, tracing_rules
from .frontend.tracing_rules import ForbiddenInGraph


def graph_break(msg: str = "") -> None:
    """Force a graph break: the code before it and the code after it are compiled apart."""


def _check_callable(fn, who: str):
    if not callable(fn):
        raise TypeError(f"xcompile.{who} expects a callable, got {type(fn).__name__}")
    if isinstance(fn, (list, tuple)):
        raise TypeError(f"xcompile.{who} expects one callable")


def allow_in_graph(fn):
    """Put calls of ``fn`` in the graph as one node instead of tracing its body.

    ``fn`` must take and return tensors, Python constants and containers of these, be
    functional, and not depend on captured tensors (see the FAQ)."""
    _check_callable(fn, "allow_in_graph")
    marks.mark(fn, "allow")
    return fn


def assume_constant_result(fn):
    """Calls of ``fn`` run once per trace, at trace time, and their result is a constant of the
    graph (for answers fixed for the process's lifetime: an install probe, a capability).
    Sets the same mark as ``torch._dynamo.assume_constant_result``, which xcompile honours too."""
    _check_callable(fn, "assume_constant_result")
    fn._dynamo_marked_constant = True
    return fn


def disallow_in_graph(fn):
    """Break the graph at every call of ``fn`` (the call runs eagerly)."""
    _check_callable(fn, "disallow_in_graph")
    marks.mark(fn, "disallow")
    return fn


def forbid_in_graph(fn):
    """Raise ``ForbiddenInGraph`` when tracing reaches ``fn`` (use ``disallow_in_graph`` for a
    graph break instead)."""
    _check_callable(fn, "forbid_in_graph")
    marks.mark(fn, "forbid")
    return fn


def nonstrict_trace(fn):
    """A wrapper of ``fn`` that compiled code traces non-strictly: one graph node running
    ``fn``; inputs and outputs must be tensors, constants and containers of these; tensors
    ``fn`` reads besides its inputs are treated as constants and are not guarded."""
    _check_callable(fn, "nonstrict_trace")

    @functools.wraps(fn)
    def nonstrict_wrapper(*args, **kwargs):
        return fn(*args, **kwargs)

    marks.mark(nonstrict_wrapper, "nonstrict")
    return nonstrict_wrapper


class ErrorOnGraphBreak:
    """What ``error_on_graph_break(flag)`` returns: a context manager and a decorator.

    Outside compiled code it sets ``config.error_on_graph_break`` for its scope (the value new
    compilations start with); inside traced code entering it switches the setting for the code
    traced within. ``fullgraph=True`` takes precedence: it cannot be relaxed."""

    def __init__(self, flag: bool):
        self.flag = bool(flag)
        self._saved: list[bool] = []

    def __enter__(self):
        self._saved.append(config.error_on_graph_break)
        config.error_on_graph_break = self.flag
        return self

    def __exit__(self, *exc):
        config.error_on_graph_break = self._saved.pop()
        return False

    def __call__(self, fn):
        if not callable(fn):
            raise TypeError(f"error_on_graph_break(...) decorates a callable, got {type(fn).__name__}")
        if isinstance(fn, type):
            raise TypeError("error_on_graph_break(...) decorates functions and methods, not classes")
        ctx = self

        @functools.wraps(fn)
        def error_on_graph_break_wrapper(*args, **kwargs):
            with ctx:
                return fn(*args, **kwargs)

        return error_on_graph_break_wrapper

    def __repr__(self):
        return f"error_on_graph_break({self.flag})"


def error_on_graph_break(error_on_graph_break: bool) -> ErrorOnGraphBreak:
    """Decorator and context manager: whether a graph break is an error in the code it covers
    (when ``fullgraph=False``). Nests; the innermost setting wins."""
    return ErrorOnGraphBreak(error_on_graph_break)


marks.mark(graph_break, "graph_break")
marks.mark(allow_in_graph, "mark_allow")
marks.mark(nonstrict_trace, "mark_nonstrict")
marks.mark(error_on_graph_break, "eogb_factory")
tracing_rules.register_eogb_class(ErrorOnGraphBreak)
codegen.register_context_remaker(
    tracing_rules.ErrorOnGraphBreakValue,
    lambda b, ctx: b.assign(f"{b.const(ErrorOnGraphBreak)}({ctx.flag})", "ctx"))

__all__ = [
    "ErrorOnGraphBreak",
    "ForbiddenInGraph",
    "allow_in_graph",
    "assume_constant_result",
    "disallow_in_graph",
    "error_on_graph_break",
    "forbid_in_graph",
    "graph_break",
    "nonstrict_trace",
]
