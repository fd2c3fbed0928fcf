"""Graph breaks as users see them: a record per break (reason, explanation, hint, user stack),
logged once in full per place (``XCOMPILE_LOGS=graph_breaks``) and told to the observers
(``log.add_observer``: xcompile.explain, CompileProfiler).
"""
from __future__ import annotations

import traceback
from dataclasses import dataclass

from .. import log
from .exc import Unsupported


# -- what a break looks like to users ---------------------------------------------------------------------
@dataclass
class BreakRecord:
    """One graph break: reason, explanation, hint and the user's stack (outermost first)."""

    reason: str
    explanation: str | None
    hint: str | None
    user_stack: list[traceback.FrameSummary]
    resumed: bool = True            # False: the frame runs eagerly from its start

    @classmethod
    def of(cls, e: Unsupported) -> BreakRecord:
        complete(e)
        return cls(e.reason, e.explanation, e.hint, list(e.user_stack))

    @property
    def where(self) -> str:
        if not self.user_stack:
            return "<unknown>"
        fs = self.user_stack[-1]
        return f"{fs.filename}:{fs.lineno}"

    def key(self) -> tuple:
        return (self.where, self.reason)

    def details(self) -> str:
        lines = [f"Graph Break Reason: {self.reason}"]
        if self.explanation:
            lines.append(f"  Explanation: {self.explanation}")
        if self.hint:
            lines.append(f"  Hint: {self.hint}")
        return "\n".join(lines)

    def stack_text(self) -> str:
        return "".join(traceback.format_list(self.user_stack)).rstrip("\n")

    def log_text(self, duplicate: bool) -> str:
        if duplicate:
            return (f"Graph break (user stack suppressed due to duplicate graph break) in user code at "
                    f"{self.where}\n{self.details()}\n")
        return (f"Graph break in user code at {self.where}\n{self.details()}\n"
                f"User code traceback:\n{self.stack_text()}\n")


# Explanations for breaks whose Unsupported carries none: (reason prefix, explanation).
_EXPLANATIONS = [
    ("call to builtin print", ("print() writes output, a side effect a graph cannot hold; it runs in the "
                               "normal interpreter between the graphs.")),
    ("call to logging", ("Logging writes output, a side effect a graph cannot hold; it runs in the normal "
                         "interpreter between the graphs.")),
    ("Tensor.item()", "The Python number depends on the tensor's data, which is not known while tracing."),
    ("Tensor.tolist()", "The Python list depends on the tensor's data, which is not known while tracing."),
    ("unsupported bytecode", "The interpreter has no rule for this instruction yet."),
    ("call to builtin", ("The callable is implemented in C or has side effects the interpreter cannot "
                         "trace; it runs in the normal interpreter.")),
    ("calling builtin", ("The callable is implemented in C (an extension other than PyTorch's operators); "
                         "the interpreter cannot see what it does.")),
]
_DEFAULT_EXPLANATION = ("The interpreter cannot put this in a graph: the graph ends before it, it runs in "
                        "the normal interpreter, and the rest of the function is compiled on its own.")


_DEFAULT_HINT = ("Move it out of the compiled function, or mark the function that contains it with "
                 "xcompile.disable / allow_in_graph / nonstrict_trace.")


def explain_reason(reason: str) -> str:
    for prefix, text in _EXPLANATIONS:
        if reason.startswith(prefix):
            return text
    return _DEFAULT_EXPLANATION


def complete(e: Unsupported) -> Unsupported:
    """Every break (and every fullgraph error) names a reason, an explanation and a hint."""
    if not e.explanation:
        e.explanation = explain_reason(e.reason)
    if not e.hint:
        e.hint = _DEFAULT_HINT
    return e


_seen_breaks: set[tuple] = set()


def report_break(record: BreakRecord) -> None:
    key = record.key()
    duplicate = key in _seen_breaks
    _seen_breaks.add(key)
    log.log("graph_breaks", "%s", record.log_text(duplicate))
    for o in log.observers():
        o.on_break(record)


def reset_break_log() -> None:
    _seen_breaks.clear()


__all__ = ["BreakRecord", "complete", "explain_reason", "report_break", "reset_break_log"]
