"""``xcompile.explain(fn)(*args, **kwargs)``: run ``fn`` once compiled and report every graph,
graph break and guard it produced.

    out = xcompile.explain(toy_example)(a, b)
    out.graph_count, out.graph_break_count, out.op_count
    out.graphs, out.ops_per_graph, out.out_guards, out.break_reasons   # reason + user stack each
    print(out)          # "xcompile produced 3 graphs, with 2 graph breaks and 6 ops." + reasons

``explain(fn, *args, **kwargs)`` runs it right away (the older form); the result also unpacks
like the FAQ's ``explanation, out_guards, graphs, ops_per_graph = explain(fn, *args)``.
All compiled state is reset before and after (as PyTorch's explain does), so every
frame is traced afresh and reported.
"""
from __future__ import annotations

import traceback
from dataclasses import dataclass, field
from typing import Any

import torch

from .. import log


def _is_op(n: torch.fx.Node) -> bool:
    return n.op in ("call_function", "call_method", "call_module") and n.target is not torch._C._set_grad_enabled


@dataclass
class BreakReason:
    reason: str
    user_stack: list[traceback.FrameSummary]
    explanation: str | None = None
    hint: str | None = None
    resumed: bool = True            # False: the frame ran eagerly from its start

    def __str__(self) -> str:
        where = "".join(traceback.format_list(self.user_stack)).rstrip("\n")
        return f"{self.reason}\n{where}" if where else self.reason


@dataclass
class ExplainOutput:
    graphs: list[torch.fx.GraphModule] = field(default_factory=list)
    break_reasons: list[BreakReason] = field(default_factory=list)
    ops_per_graph: list[list[Any]] = field(default_factory=list)
    out_guards: list[Any] = field(default_factory=list)     # one guards.spec.GuardSet per graph

    @property
    def graph_count(self) -> int:
        return len(self.graphs)

    @property
    def graph_break_count(self) -> int:
        return len(self.break_reasons)

    @property
    def op_count(self) -> int:
        return sum(len(ops) for ops in self.ops_per_graph)

    def summary(self) -> str:
        g, b = self.graph_count, self.graph_break_count
        return (f"xcompile produced {g} graph{'s' if g != 1 else ''}, with {b} graph "
                f"break{'s' if b != 1 else ''} and {self.op_count} ops.")

    def __str__(self) -> str:
        lines = [self.summary()]
        if self.break_reasons:
            lines.append(" Break reasons:")
            for i, r in enumerate(self.break_reasons, 1):
                lines.append("")
                lines.append(f"{i}. {r.reason}")
                stack = "".join(traceback.format_list(r.user_stack)).rstrip("\n")
                lines.extend("   " + ln for ln in stack.splitlines())
        if self.ops_per_graph:
            lines.append("")
            lines.append(" Ops per graph:")
            for i, ops in enumerate(self.ops_per_graph, 1):
                lines.append(f"  Graph {i}: " + ", ".join(_op_name(o) for o in ops))
        return "\n".join(lines)

    def __iter__(self):
        """The FAQ's form: ``explanation, out_guards, graphs, ops_per_graph = explain(fn, *args)``."""
        return iter((str(self), self.out_guards, self.graphs, self.ops_per_graph))


def _op_name(target: Any) -> str:
    if isinstance(target, str):
        return target
    return getattr(target, "__name__", None) or str(target)


class _Recorder:
    """Observer of graph_break (breaks) and convert_frame (graphs); also the backend."""

    def __init__(self):
        self.out = ExplainOutput()

    def on_break(self, record) -> None:
        self.out.break_reasons.append(BreakReason(record.reason, list(record.user_stack), record.explanation,
                                                  record.hint, record.resumed))

    def on_graph(self, code, gm, guards) -> None:
        self.out.out_guards.append(guards)

    def backend(self, gm: torch.fx.GraphModule, example_inputs):
        self.out.graphs.append(gm)
        self.out.ops_per_graph.append([n.target for n in gm.graph.nodes if _is_op(n)])
        return gm.forward


def explain(fn, *args, **kwargs):
    """``explain(fn)(*args, **kwargs) -> ExplainOutput`` (``explain(fn, *args)`` runs at once)."""
    if not callable(fn):
        raise TypeError(f"xcompile.explain expects a callable, got {type(fn).__name__}")

    def run(*call_args, **call_kwargs) -> ExplainOutput:
        from .. import api
        rec = _Recorder()
        api.reset()
        log.add_observer(rec)
        try:
            api.compile(fn, backend=rec.backend)(*call_args, **call_kwargs)
        finally:
            log.remove_observer(rec)
            api.reset()
        return rec.out

    if args or kwargs:
        return run(*args, **kwargs)
    return run


__all__ = ["BreakReason", "ExplainOutput", "explain"]
