"""``CompileProfiler``: an observation-only backend that counts graphs and records why frames
broke and recompiled (the FAQ's recompilation profiler).

    with CompileProfiler() as prof:
        fast = xcompile.compile(model, backend=prof)
        fast(x)
        print(prof.report())

Inside the ``with`` block the cache size limit is 1, so every guard failure shows up as a
recompile reason instead of silently adding an entry.
"""
from __future__ import annotations

from collections import Counter

import torch

from .. import config, log


class CompileProfiler:
    def __init__(self):
        self.frame_count = 0
        self.op_count = 0
        self.graph_breaks: list = []                 # frontend.break_log.BreakRecord
        self.recompiles: list[tuple[str, str]] = []  # (function, failed guard)
        self._patch = None

    # -- the backend ------------------------------------------------------------------------------------
    def __call__(self, gm: torch.fx.GraphModule, example_inputs):
        self.frame_count += 1
        self.op_count += sum(1 for n in gm.graph.nodes
                             if n.op in ("call_function", "call_method", "call_module")
                             and n.target is not torch._C._set_grad_enabled)
        return gm.forward

    # -- observer of graph breaks and recompiles ----------------------------------------------------------
    def on_break(self, record) -> None:
        self.graph_breaks.append(record)

    def on_graph(self, code, gm, guards) -> None:
        pass

    def on_recompile(self, code, reason: str) -> None:
        self.recompiles.append((f"{code.co_name} ({code.co_filename}:{code.co_firstlineno})", reason))

    def __enter__(self):
        self._patch = config.patch(cache_size_limit=1)
        self._patch.__enter__()
        log.add_observer(self)
        return self

    def __exit__(self, *exc):
        log.remove_observer(self)
        self._patch.__exit__(*exc)
        return False

    def report(self) -> str:
        lines = [(f"Compiled {self.frame_count} graph(s) with {self.op_count} op(s); "
                  f"{len(self.graph_breaks)} graph break(s); {len(self.recompiles)} recompile(s).")]
        if self.graph_breaks:
            lines.append("Graph breaks:")
            counts = Counter((r.where, r.reason) for r in self.graph_breaks)
            lines.extend(f"  {n}x {reason} at {where}" for (where, reason), n in counts.items())
        if self.recompiles:
            lines.append("Recompiles (the guard that failed):")
            lines.extend(f"  {fn}: {reason}" for fn, reason in self.recompiles)
        else:
            lines.append("No recompilation detected.")
        return "\n".join(lines)


__all__ = ["CompileProfiler"]
