"""``xcompile.counters``: event counts under torch._dynamo.utils.counters' keys.

    counters["graph_break"][message]     one per graph break, keyed by its message (the reason, then
                                         "  Explanation: ..." and "  Hint: ..." lines, as torch keys
                                         them); fullgraph errors are raised, not counted
    counters["stats"]["unique_graphs"]   graphs handed to a backend
    counters["stats"]["calls_captured"]  call nodes (call_function / call_method / call_module) in them
    counters["frames"]["total"] / ["ok"] frames the callback was asked to compile / that compiled
                                         without an exception (skipped frames are not counted)

Like torch's, the counts survive ``reset()``; ``counters.clear()`` empties them.
"""
from __future__ import annotations

import collections

from . import log

counters: collections.defaultdict[str, collections.Counter] = collections.defaultdict(collections.Counter)

_CALLS = ("call_function", "call_method", "call_module")


def break_message(record) -> str:
    """The key of one break, in torch's layout (its summary, then the explanation and hint lines)."""
    lines = [record.reason]
    if record.explanation:
        lines.append(f"  Explanation: {record.explanation}")
    if record.hint:
        lines.append(f"  Hint: {record.hint}")
    return "\n".join(lines)


class _Counting:
    """The log observer that keeps the counts (registered once, at import)."""

    def on_break(self, record) -> None:
        counters["graph_break"][break_message(record)] += 1

    def on_graph(self, code, gm, guards) -> None:
        counters["stats"]["unique_graphs"] += 1
        counters["stats"]["calls_captured"] += sum(1 for n in gm.graph.nodes if n.op in _CALLS)


log.add_observer(_Counting())

__all__ = ["break_message", "counters"]
