"""Ops traced inside a ``try`` block that may raise only at run time (issue #31 s2.4).

A graph op whose failure the fake run cannot see (an index out of bounds in a tensor index, a
write whose source overlaps its target: ``y[idx] = x`` with ``y`` and ``x`` one tensor) raises
when the graph runs, outside the traced ``try``: eager's ``except`` would have caught it, the
compiled call raised it out (or, functionalized by AOT, it did not raise at all and wrote the
input). So when a step of a frame that an ``except`` block covers adds such an op, the step is
a graph break: a break inside a ``try`` cannot resume, so the frame runs
eagerly, with Python's own ``try``. Ops that cannot fail at run time (pointwise math,
reductions, views: their errors are shape and dtype errors the fake run raises while tracing)
keep the frame compiled. A ``finally`` alone catches nothing (the error reaches the caller
either way), so it keeps the frame compiled: transformers wraps every model's forward in a
``try``/``finally`` that restores its config, and breaking there put no model in one graph.
"""
from __future__ import annotations

import operator
import types
import weakref

import torch
import torch.fx

from ..bytecode.analysis import active_handlers, handler_kind
from ..bytecode.instr import disassemble

_CATCHING: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_NONE: frozenset[int] = frozenset()

# Ops reading or writing at tensor indices (their bounds are data) or writing memory that may
# overlap a source (checked on the real tensors only).
_INDEXING = frozenset({
    "index", "index_put", "index_put_", "index_select", "index_add", "index_copy", "index_fill",
    "index_reduce", "gather", "scatter", "scatter_add", "scatter_reduce", "take", "take_along_dim",
    "put", "put_", "masked_scatter", "embedding", "embedding_bag", "one_hot", "bincount",
    "multinomial", "repeat_interleave", "searchsorted", "bucketize", "copy_", "cholesky", "inverse",
    "inv", "solve", "cholesky_ex", "lu_factor", "histc", "setitem", "__setitem__",
})
_INPLACE_OPERATORS = frozenset({operator.iadd, operator.isub, operator.imul, operator.itruediv,
                                operator.ifloordiv, operator.imod, operator.ipow, operator.iand,
                                operator.ior, operator.ixor, operator.ilshift, operator.irshift,
                                operator.imatmul, operator.setitem})


def catching_offsets(code: types.CodeType) -> frozenset[int]:
    """Byte offsets of the instructions of ``code`` an ``except`` block covers."""
    got = _CATCHING.get(code)
    if got is None:
        got = _NONE
        if code.co_exceptiontable:
            instrs = disassemble(code)
            got = frozenset(ins.offset for i, ins in enumerate(instrs)
                            if any(handler_kind(instrs, e) == "except" and _may_catch_run_time_errors(instrs, e)
                                   for e in active_handlers(instrs, i)))
        _CATCHING[code] = got
    return got


# The classes a tensor op's run-time failure is (RuntimeError, IndexError, ValueError) and their
# bases: an except clause naming any other class (``except NotImplementedError:`` around
# transformers' static-cache index_copy_) cannot see it, so it keeps the frame compiled.
_CATCHES_RUN_TIME = frozenset({"Exception", "BaseException", "RuntimeError", "IndexError", "LookupError",
                               "ValueError"})
_NAME_LOADS = frozenset({"LOAD_GLOBAL", "LOAD_NAME"})


def _may_catch_run_time_errors(instrs: list, entry) -> bool:
    """Whether an except block's clauses may catch a tensor op's run-time error: a clause
    naming a class in _CATCHES_RUN_TIME, or one whose class is not a plain name (a tuple, an
    attribute, a local: assumed to catch)."""
    k = next(i for i, x in enumerate(instrs) if x is entry.target)
    for j in range(k + 1, min(k + 40, len(instrs))):
        if instrs[j].opname in ("CHECK_EXC_MATCH", "CHECK_EG_MATCH"):
            cls = instrs[j - 1]
            if cls.opname not in _NAME_LOADS or cls.argval in _CATCHES_RUN_TIME:
                return True
    return False


def _has_tensor_index(node: torch.fx.Node) -> bool:
    found: list[bool] = []

    def look(a):
        if isinstance(a, torch.fx.Node) and isinstance(a.meta.get("example_value"), torch.Tensor):
            found.append(True)
        return a
    torch.fx.node.map_arg(node.args[1:], look)
    return bool(found)


def may_raise_at_run_time(node: torch.fx.Node) -> bool:
    """Can this graph op raise when the graph runs although its fake run did not?"""
    if node.op not in ("call_function", "call_method"):
        return False
    target = node.target
    if target is operator.getitem:          # x[idx] with a tensor index: bounds are data
        return isinstance(node.args[0], torch.fx.Node) and \
            isinstance(node.args[0].meta.get("example_value"), torch.Tensor) and _has_tensor_index(node)
    if target in _INPLACE_OPERATORS:
        return True
    name = target if isinstance(target, str) else getattr(target, "__name__", "")
    if not isinstance(name, str):
        return False
    if "out" in node.kwargs:
        return True
    return name in _INDEXING or (name.endswith("_") and not name.startswith("_"))   # in-place writes


__all__ = ["catching_offsets", "may_raise_at_run_time"]
