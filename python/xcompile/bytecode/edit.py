"""Common edits of an instruction list, and re-building a code object with new arguments.

Every edit returns a new list; instruction objects are shared with the input and jump
targets / handler entries that pointed at removed instructions are re-pointed in place
(``instr.clone`` first to keep the input intact).
"""
from __future__ import annotations

import types
from typing import Sequence

from . import opcodes as op
from .analysis import analyze_stack
from .assemble import assemble
from .instr import ExnEntry, Instruction, create

_PROLOGUE_OPS = frozenset({"COPY_FREE_VARS", "MAKE_CELL", "RETURN_GENERATOR", "NOP"})


def prologue_end(instrs: Sequence[Instruction]) -> int:
    """Index of the first instruction after the prologue (COPY_FREE_VARS, MAKE_CELL,
    RETURN_GENERATOR + POP_TOP, and the ``RESUME 0`` that ends it); 0 when there is none."""
    i = 0
    while i < len(instrs):
        name = instrs[i].opname
        if name in _PROLOGUE_OPS or (name == "POP_TOP" and i and instrs[i - 1].opname == "RETURN_GENERATOR"):
            i += 1
            continue
        if name == "RESUME" and instrs[i].arg == 0:
            return i + 1
        break
    return 0


def retarget(instrs: Sequence[Instruction], old: Instruction, new: Instruction) -> None:
    """Point every jump and handler entry that goes to ``old`` at ``new``."""
    entries: dict[ExnEntry, ExnEntry] = {}
    for x in instrs:
        if x.target is old:
            x.target = new
        e = x.exn_entry
        if e is not None and e.target is old:
            if e not in entries:
                entries[e] = ExnEntry(new, e.depth, e.lasti)
            x.exn_entry = entries[e]


def insert_before(instrs: Sequence[Instruction], index: int, new: Sequence[Instruction], *,
                  redirect: bool = True, inherit_handler: bool = True) -> list[Instruction]:
    """Insert ``new`` before ``instrs[index]``. With ``redirect``, jumps to that instruction
    now run ``new`` first; with ``inherit_handler``, ``new`` gets its exception entry."""
    if not new:
        return list(instrs)
    anchor = instrs[index]
    if redirect and op.FACTS.for_iter_skips_end_for and anchor.opname == "END_FOR":
        raise ValueError("cannot insert before END_FOR: FOR_ITER jumps past it (insert after it)")
    if redirect:
        retarget(instrs, anchor, new[0])
    if inherit_handler:
        for x in new:
            if x.exn_entry is None:
                x.exn_entry = anchor.exn_entry
    return list(instrs[:index]) + list(new) + list(instrs[index:])


def insert_prefix(instrs: Sequence[Instruction], new: Sequence[Instruction]) -> list[Instruction]:
    """Insert ``new`` right after the prologue, so it runs once at the start of every call."""
    k = prologue_end(instrs)
    return list(instrs[:k]) + list(new) + list(instrs[k:])


def replace_range(instrs: Sequence[Instruction], start: int, end: int,
                  new: Sequence[Instruction]) -> list[Instruction]:
    """Replace ``instrs[start:end]`` by ``new``. References to a removed instruction go to
    ``new[0]``, or to ``instrs[end]`` when ``new`` is empty."""
    removed = instrs[start:end]
    rest = list(instrs[:start]) + list(new) + list(instrs[end:])
    if removed:
        repl = new[0] if new else (instrs[end] if end < len(instrs) else None)
        for old in removed:
            if repl is None:
                if any(x.target is old or (x.exn_entry and x.exn_entry.target is old) for x in rest):
                    raise ValueError("removed instructions at the end are still jumped to")
                continue
            retarget(rest, old, repl)
    return rest


def remove_unreachable(instrs: Sequence[Instruction]) -> list[Instruction]:
    """Drop instructions that no path from index 0 (handlers included) reaches."""
    before = analyze_stack(list(instrs)).before
    return [x for x, s in zip(instrs, before) if s is not None]


def make_cells_prologue(cellvars: Sequence[str], nfree: int) -> list[Instruction]:
    """COPY_FREE_VARS and one MAKE_CELL per cell, in CPython's order."""
    out = []
    if nfree:
        out.append(create("COPY_FREE_VARS", nfree))
    out.extend(create("MAKE_CELL", 0, name) for name in cellvars)
    return out


def change_arguments(instrs: Sequence[Instruction], *, template: types.CodeType, argnames: Sequence[str],
                     posonly: int = 0, kwonly: Sequence[str] = (), varargs: str | None = None,
                     varkwargs: str | None = None, cellvars: Sequence[str] | None = None,
                     freevars: Sequence[str] | None = None, name: str | None = None,
                     qualname: str | None = None, flags: int | None = None) -> types.CodeType:
    """Assemble ``instrs`` as a function taking ``argnames`` (then ``*varargs``, keyword-only
    ``kwonly``, ``**varkwargs``). Other locals keep their template order after the arguments.
    The COPY_FREE_VARS / MAKE_CELL prologue is rebuilt for ``cellvars`` / ``freevars``
    (defaults: the template's), and ``RESUME 0`` is added when missing."""
    cellvars = tuple(template.co_cellvars if cellvars is None else cellvars)
    freevars = tuple(template.co_freevars if freevars is None else freevars)
    args = list(argnames) + list(kwonly) + [n for n in (varargs, varkwargs) if n]
    if len(set(args)) != len(args):
        raise ValueError(f"duplicate argument names {args}")
    if set(args) & set(freevars):
        raise ValueError(f"arguments {sorted(set(args) & set(freevars))} are also free variables")
    taken = set(args) | set(freevars)
    varnames = args + [v for v in template.co_varnames if v not in taken]
    flags = template.co_flags if flags is None else flags
    flags &= ~(op.CO_VARARGS | op.CO_VARKEYWORDS)
    flags |= (op.CO_VARARGS if varargs else 0) | (op.CO_VARKEYWORDS if varkwargs else 0)

    k = prologue_end(instrs)
    head = [x for x in instrs[:k] if x.opname not in ("COPY_FREE_VARS", "MAKE_CELL")]
    if not any(x.opname == "RESUME" for x in head):
        head.append(create("RESUME", 0))
    ordered_cells = [v for v in varnames if v in cellvars] + [c for c in cellvars if c not in varnames]
    body = make_cells_prologue(ordered_cells, len(freevars)) + head + list(instrs[k:])
    name = name or template.co_name
    return assemble(body, template=template, co_varnames=tuple(varnames), co_cellvars=cellvars,
                    co_freevars=freevars, co_argcount=len(argnames), co_posonlyargcount=posonly,
                    co_kwonlyargcount=len(kwonly), co_flags=flags, co_name=name,
                    co_qualname=qualname or name)
