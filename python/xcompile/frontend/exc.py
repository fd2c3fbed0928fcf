"""The frontend's one "cannot capture this" exception."""
from __future__ import annotations

import traceback


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
