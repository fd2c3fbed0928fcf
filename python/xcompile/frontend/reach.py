"""The values a trace can reach: from the frames being traced (locals, stacks, ``with`` contexts,
cells) through container items, dict values and every Value field (attributes, closures, cell
contents, storages). One walk for the questions that need it: which containers existed before a
torch.func transform (func_regions.py), which object made in the frame owns a dict/list storage
(codegen.py)."""
from __future__ import annotations

import dataclasses
from typing import Any, Iterable

from .values import Value


def frame_roots(frame: Any) -> list[Any]:
    """The values ``frame`` and the frames that called it hold."""
    roots: list[Any] = []
    while frame is not None:
        roots.extend(frame.stack)
        roots.extend(frame.ctx_stack)
        roots.extend(frame.locals.values() if isinstance(frame.locals, dict) else frame.locals)
        cells = frame.cells
        roots.extend(cells.values() if isinstance(cells, dict) else cells or ())
        frame = frame.parent
    return roots


def reachable(roots: Iterable[Any]) -> dict[int, Value]:
    """Every Value reachable from ``roots``, by id."""
    seen: dict[int, Value] = {}
    todo = list(roots)
    while todo:
        v = todo.pop()
        if isinstance(v, (list, tuple)):
            todo.extend(v)
        elif isinstance(v, dict):
            todo.extend(v.values())
        elif isinstance(v, Value) and id(v) not in seen:
            seen[id(v)] = v
            for f in dataclasses.fields(v):  # type: ignore[arg-type]
                item = getattr(v, f.name, None)
                if isinstance(item, (Value, list, tuple, dict)):
                    todo.append(item)
    return seen
