"""What the dynamic-shapes policy remembers between compiles (ground floor: the API records
marks here, the frontend reads them, ``reset()`` clears the sizes seen).

- Marks on a tensor (``mark_dynamic``, ``maybe_mark_dynamic``, ``mark_static``): attributes of
  the tensor object, as torch keeps ``_dynamo_dynamic_indices``.
- Sizes seen: per function and input source, the sizes of its last compile, a dimension
  ``None`` once it took two values ("automatic dynamic": the next compile makes it symbolic).
  A function is named by its code's file, name and first line, not by the code object: the
  resume functions of a graph break are made anew each time their frame is compiled, and
  must remember what their predecessors saw.
"""
from __future__ import annotations

import types
from typing import Any

DYNAMIC_DIMS = "_xcompile_dynamic_dims"        # set[int]: mark_dynamic
DIM_RANGES = "_xcompile_dim_ranges"            # dict[int, (min | None, max | None)]: mark_dynamic
MAYBE_DYNAMIC_DIMS = "_xcompile_maybe_dynamic_dims"   # set[int]: maybe_mark_dynamic
STATIC_DIMS = "_xcompile_static_dims"          # set[int]: mark_static
STATIC_ADDRESS = "_xcompile_static_address"    # bool: mark_static_address


def marks(t: Any, attr: str) -> set[int]:
    return getattr(t, attr, None) or set()


def dim_range(t: Any, dim: int) -> tuple[int | None, int | None]:
    return (getattr(t, DIM_RANGES, None) or {}).get(dim, (None, None))


# (file, name, first line) -> {source name -> sizes of the last compile, None where changed}
_SEEN: dict[tuple[str, str, int], dict[str, tuple]] = {}


def _key(code: types.CodeType) -> tuple[str, str, int]:
    return (code.co_filename, code.co_name, code.co_firstlineno)


def seen(code: types.CodeType, name: str) -> tuple | None:
    by_name = _SEEN.get(_key(code))
    return None if by_name is None else by_name.get(name)


def record(code: types.CodeType, name: str, sizes: tuple) -> None:
    _SEEN.setdefault(_key(code), {})[name] = sizes


def clear() -> None:
    _SEEN.clear()


# -- guards a backend adds ------------------------------------------------------------------------
# The frontend turns what its ShapeEnv learned into guards when the trace ends. A backend that
# compiles the graph with symbolic sizes (backends/dynamic_kernels.py) may teach the ShapeEnv
# more (a decomposition branched on ``s0 > 2``): it then stamps the ShapeEnv with
# ``accept_facts``, and the frame's guards are produced again before they are installed.
# Facts a backend learned without stamping them (it then compiled per size) are not guarded.
ACCEPTED = "_xcompile_accepted_facts"


def shape_facts(env: Any) -> tuple:
    """What a ShapeEnv knows that guards would have to check."""
    return (len(env.guards), len(env.replacements),
            sum(len(v) for v in env.deferred_runtime_asserts.values()))


def accept_facts(env: Any) -> None:
    setattr(env, ACCEPTED, shape_facts(env))


def accepted_facts(env: Any) -> tuple | None:
    return getattr(env, ACCEPTED, None)
