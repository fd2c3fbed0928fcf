"""``xcompile.utils``: the helpers torch users reach for in ``torch._dynamo.utils``."""
from __future__ import annotations

from .debug.timing import compile_times
from .stats import counters

__all__ = ["compile_times", "counters"]
