"""Resume functions: the rest of a frame, from one instruction on, as a new code object.

``make_resume_code(code, i)`` builds ``xcompile_resume_in_<name>_at_<line>``. Its arguments
are the values on the stack before instruction ``i`` (``__stack0`` is the bottom) followed by
the locals that are live there; its body pushes the stack values back and jumps to (a copy
of) instruction ``i``; everything the original code could still reach from there follows.

Cells. A closure made before ``i`` holds the frame's cell objects, so the resume code must
use the *same* cells, not copies of their contents. With ``cells="closure"`` (the default)
the original's cell variables become free variables of the resume code: build the function
with ``ResumeCode.make_function(globals, cells)`` where ``cells`` maps each name in
``ResumeCode.freevars`` to its cell (the rewritten frame gets them with ``LOAD_CLOSURE``).
``cells="values"`` passes cell *contents* as ordinary arguments and makes fresh cells: only
right when no closure made before ``i`` is used after it.

Stack slots that hold NULL (below a callable) are not arguments: the resume code pushes NULL
itself. Slots that may or may not be NULL at run time (a method load) must be decided by
the caller through ``null_positions``.

A point between ``KW_NAMES`` and its ``CALL`` resumes at the ``KW_NAMES`` (it sets
interpreter state, not a stack value). 3.13 has no KW_NAMES: ``CALL_KW`` finds the names
on the stack.

Zero-argument ``super()`` reads the frame's first local slot, so in a method using it the
original first argument stays the resume function's first argument (``arg_sources`` gives
the order in every case).

Not resumable (``ResumeError``, see ``check_resume_point``): generator/coroutine code,
instructions in the prologue, unreachable instructions, instructions inside an exception
handler (the handled exception cannot be re-installed), 3.12's END_FOR (never executed; on
3.13 neither is the POP_TOP after it),
and points inside a 3.12 inlined comprehension that borrows the slot of a cell variable.
Points inside a ``try`` body or a ``with`` block are fine: the exception table is static,
and the ``with`` exit function is an ordinary stack value.
"""
from __future__ import annotations

import functools
import types
from dataclasses import dataclass
from typing import Any, Collection, Mapping, Sequence

from ..release import clear_on_reset
from . import opcodes as op
from .analysis import EXC, MAYBE, NULL, SAVED, StackInfo, analyze_stack, borrowed_slots, handler_targets, liveness
from .edit import change_arguments, prologue_end, remove_unreachable
from .instr import Instruction, create, disassemble


class ResumeError(ValueError):
    """This instruction cannot start a resume function; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class ResumeCode:
    code: types.CodeType
    index: int                        # instruction index in ``disassemble(original)``
    lineno: int | None
    stack_depth: int
    null_positions: tuple[int, ...]   # stack positions the resume code pushes NULL for
    # one entry per argument, in order: ("stack", position) or ("local", name)
    arg_sources: tuple[tuple[str, Any], ...]
    freevars: tuple[str, ...]         # the closure the function must be made with, in order

    @property
    def name(self) -> str:
        return self.code.co_name

    @property
    def local_args(self) -> tuple[str, ...]:
        return tuple(v for kind, v in self.arg_sources if kind == "local")

    def args(self, stack: Sequence[Any], local_values: Mapping[str, Any]) -> tuple:
        """Arguments for a call, from the stack (bottom first; NULL slots ignored) and the
        values of the frame's locals."""
        return tuple(stack[v] if kind == "stack" else local_values[v] for kind, v in self.arg_sources)

    def make_function(self, globals_: dict, cells: Mapping[str, types.CellType] | None = None,
                      ) -> types.FunctionType:
        cells = cells or {}
        missing = [n for n in self.freevars if n not in cells]
        if missing:
            raise ValueError(f"no cell given for {missing}")
        closure = tuple(cells[n] for n in self.freevars) or None
        return types.FunctionType(self.code, globals_, self.code.co_name, None, closure)


def resume_name(code: types.CodeType, lineno: int | None) -> str:
    return f"xcompile_resume_in_{code.co_name}_at_{lineno if lineno is not None else code.co_firstlineno}"


@dataclass(frozen=True)
class _CodeFacts:
    """Analyses of one code object, shared by every resume point in it."""
    n: int
    prologue_end: int
    info: StackInfo
    live: list[frozenset[str]]
    borrowed: list[frozenset[str]]
    handler_targets: frozenset[int]
    opnames: tuple[str, ...]


@clear_on_reset
@functools.lru_cache(maxsize=128)
def _facts(code: types.CodeType) -> _CodeFacts:
    instrs = disassemble(code)
    info = analyze_stack(instrs)
    variables = (*code.co_varnames, *code.co_cellvars, *code.co_freevars)
    return _CodeFacts(len(instrs), prologue_end(instrs), info, liveness(instrs, variables),
                      borrowed_slots(instrs, info), frozenset(handler_targets(instrs)),
                      tuple(x.opname for x in instrs))


def check_resume_point(code: types.CodeType, index: int) -> str | None:
    """None when a resume function can start at instruction ``index`` of
    ``disassemble(code)``, else the reason it cannot."""
    if code.co_flags & op.GENERATOR_LIKE:
        return "generator and coroutine frames cannot be resumed"
    facts = _facts(code)
    if not 0 <= index < facts.n:
        return f"instruction index {index} out of range"
    if index < facts.prologue_end:
        return "instruction is part of the function prologue"
    stack = facts.info.before[index]
    if stack is None:
        return "instruction is unreachable"
    if EXC in stack or index in facts.handler_targets:
        return "instruction is inside an exception handler"
    if op.FACTS.for_iter_skips_end_for and facts.opnames[index] == "END_FOR":
        return "END_FOR never runs (FOR_ITER jumps past it)"
    if op.FACTS.for_iter_skip > 1 and index and facts.opnames[index - 1] == "END_FOR":
        return "the POP_TOP after END_FOR never runs (FOR_ITER jumps past both)"
    borrowed = facts.borrowed[index] & set(code.co_cellvars)
    if borrowed:
        return (f"inside an inlined comprehension that uses the slot of cell variable(s) "
                f"{sorted(borrowed)} for its own variable")
    return None


def _line_at(instrs: list[Instruction], index: int) -> int | None:
    for k in range(index, -1, -1):
        if instrs[k].lineno is not None:
            return instrs[k].lineno
    return None


def make_resume_code(code: types.CodeType, index: int, *, null_positions: Collection[int] | None = None,
                     unbound: Collection[str] = (), cells: str = "closure",
                     name: str | None = None) -> ResumeCode:
    """The resume code object for ``code`` at instruction ``index`` of ``disassemble(code)``.

    ``null_positions``: stack positions holding NULL at run time; by default the positions
    the analysis proves NULL (an error when some slot may be either).
    ``unbound``: locals known to be unbound at ``index``; they are not arguments.
    ``cells``: "closure" or "values", see the module docstring.
    """
    if cells not in ("closure", "values"):
        raise ValueError(f"cells must be 'closure' or 'values', not {cells!r}")
    reason = check_resume_point(code, index)
    if reason:
        raise ResumeError(reason)
    facts = _facts(code)
    instrs = disassemble(code)       # fresh objects: the edits below re-point their jumps
    stack = facts.info.before[index]
    assert stack is not None
    nulls = _null_positions(stack, null_positions)

    freevars = tuple(code.co_freevars)
    if cells == "closure":
        freevars += tuple(code.co_cellvars)
        new_cells: tuple[str, ...] = ()
    else:
        new_cells = tuple(code.co_cellvars)
    live = facts.live[index]
    local_order = list(code.co_varnames) + [c for c in code.co_cellvars if c not in code.co_varnames]
    locals_ = [n for n in local_order if n in live and n not in freevars and n not in unbound]

    # Zero-argument super() reads the frame's first local slot: keep the original first
    # argument there.
    first: list[str] = []
    if "__class__" in code.co_freevars and code.co_argcount and code.co_varnames[0] not in unbound:
        if code.co_varnames[0] in freevars:
            raise ResumeError("zero-argument super() needs the first argument in the first local "
                              "slot, but it is a cell here")
        first = [code.co_varnames[0]]
        locals_ = [n for n in locals_ if n != first[0]]

    stack_args = [p for p in range(len(stack)) if p not in nulls]
    sources = ([("local", n) for n in first] + [("stack", p) for p in stack_args]
               + [("local", n) for n in locals_])
    argnames = first + [f"__stack{p}" for p in stack_args] + locals_

    target = instrs[resume_target_index(instrs, index)]
    lineno = _line_at(instrs, index)
    entry = [create("PUSH_NULL") if p in nulls else create("LOAD_FAST", 0, f"__stack{p}")
             for p in range(len(stack))]
    entry.append(create("JUMP", target=target))
    body = remove_unreachable(entry + instrs[facts.prologue_end:])
    rname = name or resume_name(code, lineno)
    new = change_arguments(body, template=code, argnames=argnames, cellvars=new_cells,
                           freevars=freevars, name=rname, qualname=rname)
    return ResumeCode(new, index, lineno, len(stack), tuple(sorted(nulls)), tuple(sources), freevars)


def resume_target_index(instrs: list[Instruction], index: int) -> int:
    """Where the resume code jumps to run ``instrs[index]`` with the right hidden state
    (also where code that must run "just before ``index``" belongs).
    KW_NAMES sets interpreter state (not a stack value) that the next CALL consumes: a point
    between the two resumes at the KW_NAMES, which neither touches the stack nor does 3.11's
    PRECALL (idempotent on an already-prepared call)."""
    j = index
    call_ops, before_call = ("PRECALL", "CALL"), ("PRECALL", "KW_NAMES")
    while j > 0 and instrs[j].opname in call_ops and instrs[j - 1].opname in before_call:
        j -= 1
        if instrs[j].opname == "KW_NAMES":
            return j
    return index


def _null_positions(stack: tuple, given: Collection[int] | None) -> set[int]:
    if given is None:
        maybe = [p for p, k in enumerate(stack) if k in (MAYBE, SAVED)]
        if maybe:
            raise ResumeError(f"stack positions {maybe} may or may not be NULL; pass null_positions")
        return {p for p, k in enumerate(stack) if k is NULL}
    out = set(given)
    for p, k in enumerate(stack):
        if k is NULL and p not in out:
            raise ResumeError(f"stack position {p} is always NULL")
        if p in out and k not in (NULL, MAYBE, SAVED):
            raise ResumeError(f"stack position {p} is never NULL")
    return out


def resume_function(fn: types.FunctionType, index: int,
                    **kwargs: Any) -> tuple[ResumeCode, types.FunctionType]:
    """Convenience for tests and tools: the resume code for ``fn`` and a function made with
    ``fn``'s globals and free-variable cells (``cells="values"`` or code without cells)."""
    rc = make_resume_code(fn.__code__, index, **kwargs)
    cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()))
    return rc, rc.make_function(fn.__globals__, cells)
