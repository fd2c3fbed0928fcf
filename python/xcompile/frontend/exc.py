"""The frontend's one "cannot capture this" exception."""
from __future__ import annotations

import traceback
from typing import Any, Callable

# How a real exception object becomes a symbolic value: values.py (which sits above this module)
# registers UserObjectValue here.
_EXCEPTION_VALUE: list[Callable[[BaseException], Any]] = []


def register_exception_value(make: Callable[[BaseException], Any]) -> None:
    _EXCEPTION_VALUE[:] = [make]


class Unsupported(Exception):
    """Raised by the interpreter for a construct it cannot put in a graph.

    ``reason`` is short ("call to builtin print"), ``hint`` says what the user can do,
    ``user_stack`` is a list of ``traceback.FrameSummary`` for the user's code (outermost
    first), filled in by the interpreter as the exception leaves each inlined frame.
    """

    def __init__(self, reason: str, hint: str | None = None, explanation: str | None = None):
        super().__init__(reason)
        self.reason = reason
        self.hint = hint
        self.explanation = explanation
        self.user_stack: list[traceback.FrameSummary] = []
        # a break that error_on_graph_break(True) does not turn into an error (leaving such a
        # region is not inside it)
        self.never_an_error = False

    def __str__(self) -> str:
        parts = [f"Graph Break Reason: {self.reason}"]
        if self.explanation:
            parts.append(f"  Explanation: {self.explanation}")
        if self.hint:
            parts.append(f"  Hint: {self.hint}")
        if self.user_stack:
            parts.append("\nfrom user code:")
            parts.extend(
                f'  File "{fs.filename}", line {fs.lineno}, in {fs.name}\n    {fs.line or ""}'.rstrip()
                for fs in self.user_stack
            )
        return "\n".join(parts)


class PythonError(Unsupported):
    """A Python exception that the traced code raises, exactly as eager would (``raise``, a
    missing dict key, a failing constant operation...).  ``try``/``except`` inside the traced
    frames catches it (``frontend/exceptions.py``); if it leaves the top frame it is an ordinary
    Unsupported and the frame runs eagerly, where it raises for real.

    ``value`` is the exception as a symbolic value (frontend.values.UserObjectValue around a real
    exception object made at trace time).
    """

    def __init__(self, value, hint: str | None = None):
        exc = getattr(value, "obj", None)
        what = f"{type(exc).__name__}: {exc}" if isinstance(exc, BaseException) else value.describe()
        super().__init__(f"the traced code raises {what}", hint or "The same code raises in eager mode.")
        self.value = value

    @classmethod
    def of(cls, exc: BaseException, hint: str | None = None) -> "PythonError":
        """From a real exception object (raised by a constant operation at trace time)."""
        return cls(_EXCEPTION_VALUE[0](exc), hint)


class TorchRuntimeError(RuntimeError):
    """An operator failed on the trace-time (fake) inputs: the same call fails in eager.

    Raised as-is to the caller, like torch.compile's TorchRuntimeError, with eager's message.
    """
