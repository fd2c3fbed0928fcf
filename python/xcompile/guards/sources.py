"""Provenance of values that come from outside the traced frame.

A source is a frozen chain (local / global / closure cell, then attribute and item
steps) that names a value and knows how to fetch it again.  Guards are built from
sources (``guards/build.py``); graph inputs are fetched through them (the C++ guard
tree fills an input slot at the node a source lowers to).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Source:
    def name(self) -> str:  # printable, in torch's guard notation: L['x'].weight[0]
        raise NotImplementedError

    def fetch(self, frame_locals: dict, frame_globals: dict, builtins: dict, closure) -> Any:
        """Slow, Python-level fetch (tests and debugging only; the hot path is C++)."""
        raise NotImplementedError

    def __str__(self) -> str:
        return self.name()


@dataclass(frozen=True)
class LocalSource(Source):
    """An argument of the frame. ``index`` is its position in ``co_varnames``."""

    local_name: str
    index: int

    def name(self) -> str:
        return f"L[{self.local_name!r}]"

    def fetch(self, frame_locals, frame_globals, builtins, closure):
        return frame_locals[self.local_name]


@dataclass(frozen=True)
class GlobalSource(Source):
    """``frame_globals[name]``, falling back to builtins like LOAD_GLOBAL does."""

    global_name: str

    def name(self) -> str:
        return f"G[{self.global_name!r}]"

    def fetch(self, frame_locals, frame_globals, builtins, closure):
        if self.global_name in frame_globals:
            return frame_globals[self.global_name]
        return builtins[self.global_name]


@dataclass(frozen=True)
class ClosureSource(Source):
    """Contents of the function's closure cell ``index`` (position in ``co_freevars``)."""

    var_name: str
    index: int

    def name(self) -> str:
        return f"C[{self.var_name!r}]"

    def fetch(self, frame_locals, frame_globals, builtins, closure):
        return closure[self.index].cell_contents


@dataclass(frozen=True)
class ClosureCellSource(Source):
    """The closure cell ``index`` itself (not its contents): the target of a ``nonlocal`` rebinding."""

    var_name: str
    index: int

    def name(self) -> str:
        return f"C[{self.var_name!r}].cell"

    def fetch(self, frame_locals, frame_globals, builtins, closure):
        return closure[self.index]


@dataclass(frozen=True)
class AttrSource(Source):
    base: Source
    attr: str

    def name(self) -> str:
        return f"{self.base.name()}.{self.attr}"

    def fetch(self, *frame):
        return getattr(self.base.fetch(*frame), self.attr)


@dataclass(frozen=True)
class GenericAttrSource(AttrSource):
    """``object.__getattribute__(base, attr)``: read past a class's own ``__getattribute__`` (a
    traced ``super().__getattribute__(name)``); guards read it without running Python code."""

    def name(self) -> str:
        return f"object.__getattribute__({self.base.name()}, {self.attr!r})"

    def fetch(self, *frame):
        return object.__getattribute__(self.base.fetch(*frame), self.attr)


class ObjectKey:
    """A dict key that hashes by identity (a tensor, a module) inside an ``ItemSource``: compared
    by identity, as the dict compares it (``Tensor.__eq__`` is elementwise; a source compared
    with another must never reach it)."""

    __slots__ = ("obj",)

    def __init__(self, obj: Any):
        self.obj = obj

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ObjectKey) and other.obj is self.obj

    def __hash__(self) -> int:
        return id(self.obj)

    def __repr__(self) -> str:
        return f"<{type(self.obj).__name__} at {id(self.obj):#x}>"


@dataclass(frozen=True)
class ItemSource(Source):
    """``base[key]`` for a list/tuple index or a dict key (a hashable constant, or an
    ``ObjectKey``)."""

    base: Source
    key: Any

    def name(self) -> str:
        return f"{self.base.name()}[{self.key!r}]"

    @property
    def key_object(self) -> Any:
        """The key itself, as the container is indexed with it."""
        return self.key.obj if isinstance(self.key, ObjectKey) else self.key

    def fetch(self, *frame):
        base = self.base.fetch(*frame)
        key = self.key_object
        return dict.__getitem__(base, key) if isinstance(base, dict) else base[key]


@dataclass(frozen=True)
class CallSource(Source):
    """``fn(*args, **kwargs)`` called again at every check: a torch getter of global state whose
    answer the trace folded into a constant (``torch.get_num_threads()``,
    ``torch.backends.mkldnn.enabled``...).  ``kwargs`` is a tuple of (name, value) pairs."""

    fn: Any
    args: tuple
    kwargs: tuple = ()

    def name(self) -> str:
        if self.fn is getattr and len(self.args) == 2 and hasattr(self.args[0], "__name__"):
            return f"{self.args[0].__name__}.{self.args[1]}"
        qual = getattr(self.fn, "__qualname__", None) or getattr(self.fn, "__name__", repr(self.fn))
        mod = getattr(self.fn, "__module__", None)
        parts = [repr(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs]
        return f"{mod + '.' if mod else ''}{qual}({', '.join(parts)})"

    def fetch(self, frame_locals, frame_globals, builtins, closure):
        return self.fn(*self.args, **dict(self.kwargs))
