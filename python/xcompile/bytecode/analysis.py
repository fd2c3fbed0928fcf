"""Dataflow facts about an instruction list: the stack, live locals, exception context.

All functions take the ``list[Instruction]`` of ``instr.disassemble`` (or an edited one) and
answer per list index. The stack analysis tracks, for each stack slot, what kind of thing it
holds, because a resume function has to rebuild the stack and some slots are not values:

    VALUE       an ordinary object
    NULL        the NULL that PUSH_NULL / LOAD_GLOBAL put below a callable (above it on 3.13)
    MAYBE_NULL  NULL or an object, known only at run time (3.11 LOAD_METHOD, 3.12 and 3.13
                LOAD_ATTR method form, LOAD_FAST_AND_CLEAR)
    EXC_INFO    the previous exception PUSH_EXC_INFO saved: the slot marks handler code
    SAVED       a local's previous value (maybe NULL) saved by 3.12's LOAD_FAST_AND_CLEAR
                while an inlined comprehension borrows the local's slot

Stack effects come from ``dis.stack_effect`` except for the few opcodes whose NULL handling
or run-time layout differs from the compiler's accounting (table ``_SPECIAL``).
"""
from __future__ import annotations

import dis
import enum
from dataclasses import dataclass
from typing import Callable, cast

from . import opcodes as op
from .instr import ExnEntry, Instruction


class Slot(enum.Enum):
    VALUE = "value"
    NULL = "null"
    MAYBE_NULL = "maybe_null"
    EXC_INFO = "exc_info"
    SAVED = "saved_local"

    def __repr__(self) -> str:
        return self.name


V, NULL, MAYBE, EXC, SAVED = Slot.VALUE, Slot.NULL, Slot.MAYBE_NULL, Slot.EXC_INFO, Slot.SAVED
Stack = tuple[Slot, ...]


class StackAnalysisError(ValueError):
    pass


def _with_null(kind: Slot) -> Stack:
    """A callable and the (maybe) NULL slot a call load pushes with it, bottom first: the NULL
    below the callable (3.11, 3.12) or above it (3.13)."""
    return (V, kind) if op.FACTS.null_above_callable else (kind, V)


# opname -> arg -> (values popped, kinds pushed bottom first)
# (``a`` is the instruction's ``arg``: an int for every entry that reads it)
_SPECIAL: dict[str, Callable[[int], tuple[int, Stack]]] = {
    "PUSH_NULL": lambda a: (0, (NULL,)),
    "LOAD_GLOBAL": lambda a: (0, _with_null(NULL)) if a & 1 else (0, (V,)),
    # the CALL family consumes the NULL (or self) slot next to the callable
    "CALL": lambda a: (a + 2, (V,)),
    "CALL_FUNCTION_EX": lambda a: (3 + (a & 1), (V,)),
    # the generator's first send() pushes a value that the POP_TOP after this discards
    "RETURN_GENERATOR": lambda a: (0, (V,)),
    "PUSH_EXC_INFO": lambda a: (1, (EXC, V)),
}
if "CALL_KW" in op.OPMAP:        # 3.13: the kw-names tuple is the top value
    _SPECIAL["CALL_KW"] = lambda a: (a + 3, (V,))
if "PRECALL" in op.OPMAP:       # 3.11: PRECALL leaves the stack alone, CALL pops everything
    _SPECIAL["PRECALL"] = lambda a: (0, ())
if "LOAD_METHOD" in op.OPMAP:
    _SPECIAL["LOAD_METHOD"] = lambda a: (1, (MAYBE, V))
if "LOAD_ATTR" in op.FACTS.name_shift:
    _SPECIAL["LOAD_ATTR"] = lambda a: (1, _with_null(MAYBE)) if a & 1 else (1, (V,))
if "LOAD_SUPER_ATTR" in op.OPMAP:
    _SPECIAL["LOAD_SUPER_ATTR"] = lambda a: (3, _with_null(MAYBE)) if a & 1 else (3, (V,))
if "LOAD_FAST_AND_CLEAR" in op.OPMAP:
    _SPECIAL["LOAD_FAST_AND_CLEAR"] = lambda a: (0, (SAVED,))


def pops_pushes(ins: Instruction, jump: bool) -> tuple[int, Stack]:
    """Values popped and kinds pushed when ``ins`` falls through (``jump=False``) or jumps."""
    special = _SPECIAL.get(ins.opname)
    if special is not None:
        return special(cast(int, ins.arg))  # None for PUSH_NULL & co., which ignore it
    arg = ins.arg if op.has_arg(ins.opname) else None
    net = dis.stack_effect(ins.opcode, arg, jump=jump)
    return max(0, -net), (V,) * max(0, net)


def _apply(ins: Instruction, stack: Stack, jump: bool) -> Stack:
    name = ins.opname
    if name == "COPY":
        assert ins.arg is not None
        return stack + (stack[-ins.arg],)
    if name == "SWAP":
        assert ins.arg is not None
        s = list(stack)
        s[-1], s[-ins.arg] = s[-ins.arg], s[-1]
        return tuple(s)
    pops, pushes = pops_pushes(ins, jump)
    if pops > len(stack):
        raise StackAnalysisError(f"{ins.opname} pops {pops} from a stack of {len(stack)}")
    return stack[:len(stack) - pops] + pushes


def _join(a: Slot, b: Slot) -> Slot:
    if a is b:
        return a
    if EXC in (a, b):
        return EXC
    return MAYBE


def falls_through(ins: Instruction) -> bool:
    return ins.opname not in op.FACTS.no_fallthrough


def handler_stack(stack: Stack, entry: ExnEntry) -> Stack:
    """The stack at a handler's first instruction when ``stack`` was live at the raise."""
    if len(stack) < entry.depth:
        raise StackAnalysisError(f"handler depth {entry.depth} above a stack of {len(stack)}")
    return stack[:entry.depth] + ((V,) if entry.lasti else ()) + (V,)


@dataclass
class StackInfo:
    before: list[Stack | None]   # slot kinds before each instruction; None where unreachable
    max_depth: int

    def depth(self, i: int) -> int | None:
        s = self.before[i]
        return None if s is None else len(s)


def analyze_stack(instrs: list[Instruction], entry_stack: Stack = ()) -> StackInfo:
    """Slot kinds before every instruction (flow from index 0 and through handlers)."""
    n = len(instrs)
    index = {id(x): i for i, x in enumerate(instrs)}
    before: list[Stack | None] = [None] * n
    if n == 0:
        return StackInfo(before, 0)
    before[0] = entry_stack
    max_depth = len(entry_stack)
    work = [0]

    def merge(j: int, s: Stack, src: int) -> None:
        nonlocal max_depth
        max_depth = max(max_depth, len(s))
        old = before[j]
        if old is None:
            before[j] = s
            work.append(j)
            return
        if len(old) != len(s):
            raise StackAnalysisError(
                f"stack depth {len(old)} vs {len(s)} at instruction {j} (edge from {src})")
        joined = tuple(_join(a, b) for a, b in zip(old, s))
        if joined != old:
            before[j] = joined
            work.append(j)

    while work:
        i = work.pop()
        ins = instrs[i]
        s = before[i]
        assert s is not None
        if ins.exn_entry is not None:
            merge(_index_of(index, ins.exn_entry.target, "handler"), handler_stack(s, ins.exn_entry), i)
        if ins.target is not None:
            merge(_index_of(index, ins.target, "jump target"), _apply(ins, s, True), i)
        if falls_through(ins):
            if i + 1 >= n:
                raise StackAnalysisError(f"control falls off the end after {ins.opname}")
            merge(i + 1, _apply(ins, s, False), i)
    return StackInfo(before, max_depth)


def _index_of(index: dict[int, int], ins: Instruction, what: str) -> int:
    try:
        return index[id(ins)]
    except KeyError:
        raise StackAnalysisError(f"{what} {ins.opname} is not in the instruction list") from None


def stack_depths(instrs: list[Instruction]) -> list[int | None]:
    info = analyze_stack(instrs)
    return [None if s is None else len(s) for s in info.before]


def max_stack_depth(instrs: list[Instruction]) -> int:
    return analyze_stack(instrs).max_depth


def reachable(instrs: list[Instruction]) -> list[bool]:
    return [s is not None for s in analyze_stack(instrs).before]


# ---- control flow ----------------------------------------------------------------------------

def jump_targets(instrs: list[Instruction]) -> set[int]:
    """Indices that some jump goes to (exception handlers not included)."""
    index = {id(x): i for i, x in enumerate(instrs)}
    return {index[id(i.target)] for i in instrs if i.target is not None and id(i.target) in index}


def handler_targets(instrs: list[Instruction]) -> set[int]:
    index = {id(x): i for i, x in enumerate(instrs)}
    return {index[id(i.exn_entry.target)] for i in instrs
            if i.exn_entry is not None and id(i.exn_entry.target) in index}


def is_jump_target(instrs: list[Instruction], i: int) -> bool:
    """True when a jump or an exception handler entry goes to ``instrs[i]``."""
    t = instrs[i]
    return any(x.target is t or (x.exn_entry is not None and x.exn_entry.target is t)
               for x in instrs)


def successors(instrs: list[Instruction], i: int, index: dict[int, int] | None = None) -> list[int]:
    """Normal and exceptional successors of ``instrs[i]``."""
    index = index if index is not None else {id(x): k for k, x in enumerate(instrs)}
    ins = instrs[i]
    out = []
    if falls_through(ins) and i + 1 < len(instrs):
        out.append(i + 1)
    if ins.target is not None:
        out.append(index[id(ins.target)])
    if ins.exn_entry is not None:
        out.append(index[id(ins.exn_entry.target)])
    return out


# ---- exception context -----------------------------------------------------------------------

def active_handlers(instrs: list[Instruction], i: int) -> list[ExnEntry]:
    """Exception-table entries in force at ``instrs[i]``, innermost first: the entry covering
    the instruction, then the one covering that handler's first instruction, and so on (the
    3.11+ equivalent of the old block stack)."""
    out: list[ExnEntry] = []
    e = instrs[i].exn_entry
    while e is not None and e not in out:
        out.append(e)
        e = e.target.exn_entry
    return out


def handler_kind(instrs: list[Instruction], entry: ExnEntry) -> str:
    """What kind of block a handler belongs to: 'with', 'except', 'finally', 'cleanup' (the
    re-raise stub that pops a handler's saved exception), or 'other' (generator/comprehension
    bookkeeping)."""
    index = {id(x): k for k, x in enumerate(instrs)}
    k = index[id(entry.target)]
    names = [x.opname for x in instrs[k:k + 40]]
    if names[:3] == ["COPY", "POP_EXCEPT", "RERAISE"]:
        return "cleanup"
    if not names or names[0] != "PUSH_EXC_INFO":
        return "other"
    for name in names[1:]:
        if name in ("WITH_EXCEPT_START",):
            return "with"
        if name in ("CHECK_EXC_MATCH", "CHECK_EG_MATCH"):
            return "except"
        if name in ("RERAISE", "POP_EXCEPT"):
            break
    return "finally"


def in_handler(instrs: list[Instruction], i: int, info: StackInfo | None = None) -> bool:
    """True when ``instrs[i]`` runs while an exception is being handled (the stack holds the
    exception state PUSH_EXC_INFO saved), or is a handler's first instruction."""
    info = info or analyze_stack(instrs)
    s = info.before[i]
    if s is not None and EXC in s:
        return True
    return i in handler_targets(instrs)


# ---- liveness --------------------------------------------------------------------------------

_READS = frozenset({"LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_FAST_AND_CLEAR", "DELETE_FAST",
                    "LOAD_DEREF", "LOAD_CLOSURE", "DELETE_DEREF", "LOAD_CLASSDEREF",
                    "LOAD_FROM_DICT_OR_DEREF", "MAKE_CELL"})
_WRITES = frozenset({"STORE_FAST", "STORE_DEREF", "DELETE_FAST", "DELETE_DEREF",
                     "LOAD_FAST_AND_CLEAR"})


def liveness(instrs: list[Instruction], variables: tuple[str, ...] = ()) -> list[frozenset[str]]:
    """For each index, the local, cell and free variable names whose current value may be
    read (or deleted, which also reads whether it is bound) before being overwritten, on
    some path from just before that instruction. Exceptional edges count as paths.
    ``variables``: every variable of the code (``locals()`` / ``vars()`` read them all)."""
    n = len(instrs)
    index = {id(x): k for k, x in enumerate(instrs)}
    normal: list[list[int]] = []
    handler: list[int | None] = []
    for k, ins in enumerate(instrs):
        nxt = [k + 1] if falls_through(ins) and k + 1 < n else []
        if ins.target is not None:
            nxt.append(index[id(ins.target)])
        normal.append(nxt)
        handler.append(index[id(ins.exn_entry.target)] if ins.exn_entry is not None else None)
    gen: list[frozenset[str]] = []
    kill: list[frozenset[str]] = []
    # `locals()` / `vars()` read every variable: loading either name reads them all
    every = frozenset(variables) | frozenset(ins.argval for ins in instrs
                                             if isinstance(ins.argval, str) and ins.opname in _READS | _WRITES)
    for ins in instrs:
        name = ins.argval if isinstance(ins.argval, str) else None
        if name in ("locals", "vars") and ins.opname in ("LOAD_GLOBAL", "LOAD_NAME"):
            gen.append(every)
            kill.append(frozenset())
            continue
        gen.append(frozenset({name}) if name and ins.opname in _READS else frozenset())
        kill.append(frozenset({name}) if name and ins.opname in _WRITES else frozenset())
    live: list[frozenset[str]] = [frozenset()] * n
    changed = True
    while changed:
        changed = False
        for k in range(n - 1, -1, -1):
            out: frozenset[str] = frozenset().union(*(live[s] for s in normal[k]))
            new = (out - kill[k]) | gen[k]
            h = handler[k]
            if h is not None:       # an exception leaves before the instruction's write
                new = new | live[h]
            if new != live[k]:
                live[k] = new
                changed = True
    return live


def borrowed_slots(instrs: list[Instruction], info: StackInfo | None = None) -> list[frozenset[str]]:
    """For each index, the locals whose slot an inlined comprehension (3.12) is using for its
    own variable: between ``LOAD_FAST_AND_CLEAR x`` and the ``STORE_FAST x`` that puts the
    saved value back. There the slot of a cell variable holds a plain value, not the cell.
    Always empty on 3.11 (comprehensions are separate functions)."""
    info = info or analyze_stack(instrs)
    n = len(instrs)
    index = {id(x): k for k, x in enumerate(instrs)}
    state: list[dict[str, int] | None] = [None] * n
    if n:
        state[0] = {}
    work = [0] if n else []
    while work:
        k = work.pop()
        cur = dict(state[k] or {})
        ins = instrs[k]
        before = info.before[k]
        if ins.opname == "LOAD_FAST_AND_CLEAR":
            cur[ins.argval] = cur.get(ins.argval, 0) + 1
        elif ins.opname == "STORE_FAST" and before and before[-1] is SAVED and cur.get(ins.argval):
            cur[ins.argval] -= 1
        edges = []
        if falls_through(ins) and k + 1 < n:
            edges.append((k + 1, cur))
        if ins.target is not None:
            edges.append((index[id(ins.target)], cur))
        if ins.exn_entry is not None:   # raised before the instruction completed
            edges.append((index[id(ins.exn_entry.target)], state[k] or {}))
        for j, new in edges:
            old = state[j]
            merged = dict(old or {})
            for name, d in new.items():
                merged[name] = max(merged.get(name, 0), d)
            if old is None or merged != old:
                state[j] = merged
                work.append(j)
    return [frozenset(name for name, d in (s or {}).items() if d > 0) for s in state]


# ---- definite assignment ---------------------------------------------------------------------

def bound_locals(instrs: list[Instruction], argnames: tuple[str, ...] | list[str],
                 info: StackInfo | None = None, *, must: bool = True) -> list[frozenset[str] | None]:
    """For each index, the local and cell variables bound on *every* path to it (``must``)
    or on *some* path (``must=False``); None where unreachable. ``argnames``: the names
    bound on entry (the code's arguments)."""
    info = info or analyze_stack(instrs)
    n = len(instrs)
    index = {id(x): k for k, x in enumerate(instrs)}
    state: list[frozenset[str] | None] = [None] * n
    if not n:
        return state
    state[0] = frozenset(argnames)
    work = [0]
    while work:
        k = work.pop()
        pre = state[k]
        assert pre is not None
        ins = instrs[k]
        name = ins.argval
        cur = pre
        if ins.opname in ("STORE_FAST", "STORE_DEREF"):
            before = info.before[k]
            restoring = ins.opname == "STORE_FAST" and before and before[-1] is SAVED
            if restoring:   # puts back whatever the slot held before: bound or not
                cur = pre - {name} if must else pre | {name}
            else:
                cur = pre | {name}
        elif ins.opname in ("DELETE_FAST", "DELETE_DEREF", "LOAD_FAST_AND_CLEAR"):
            cur = pre - {name}
        edges = []
        if falls_through(ins) and k + 1 < n:
            edges.append((k + 1, cur))
        if ins.target is not None:
            edges.append((index[id(ins.target)], cur))
        if ins.exn_entry is not None:
            edges.append((index[id(ins.exn_entry.target)], pre))
        for j, s in edges:
            old = state[j]
            new = s if old is None else (old & s if must else old | s)
            if new != old:
                state[j] = new
                work.append(j)
    return state


def argument_names(code) -> tuple[str, ...]:
    """The names a code object binds from its arguments (positional, keyword-only, *, **)."""
    n = code.co_argcount + code.co_kwonlyargcount
    n += bool(code.co_flags & op.CO_VARARGS) + bool(code.co_flags & op.CO_VARKEYWORDS)
    return tuple(code.co_varnames[:n])
