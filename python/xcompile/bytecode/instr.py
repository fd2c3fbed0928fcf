"""Editable instructions: jumps point at instruction objects, not at offsets.

``disassemble(code)`` turns a code object into a list of ``Instruction``; ``assemble.assemble``
turns such a list back into a code object. In between, a list can be edited freely
(insert, remove, reorder): nothing holds an offset. CACHE units and EXTENDED_ARG prefixes are
dropped on the way in and re-created on the way out, so list index ``i`` here is the same
``i`` as in ``instructions.decode(code)`` (the interpreter's decoder drops the same units).

Meaning of the fields:

    opname, opcode  the real opcode of the running interpreter
    arg             the raw argument. For ops that index co_consts / co_names / the locals,
                    the assembler recomputes the index from ``argval`` and keeps only the
                    flag bits below the index (LOAD_GLOBAL's push-NULL bit, 3.12 LOAD_ATTR's
                    method bit, ...). For jumps the assembler computes it from ``target``.
    argval          constant, name, compare symbol, else the raw argument; for jumps the
                    original target offset, informational only
    target          the Instruction a jump goes to
    positions       ``dis.Positions`` (lineno, end_lineno, col_offset, end_col_offset) or None
                    for an instruction without a source location
    starts_line     the line number when this instruction begins a new source line (as dis)
    exn_entry       the innermost exception-table entry covering this instruction, or None
    offset          byte offset in the code it was read from, updated by ``assemble``
    fuse_next       3.13: this and the next instruction were one super-instruction
                    (``LOAD_FAST_LOAD_FAST`` ...), read as two plain ones; the assembler fuses
                    them again when they are still adjacent and their slots fit
"""
from __future__ import annotations

import dis
import types
from dataclasses import dataclass, field
from typing import Any, Iterable

from . import opcodes as op

MISSING: Any = object()


@dataclass(frozen=True)
class ExnEntry:
    """Exception-table data for one covered instruction: where to go, and the stack there.

    On an exception the stack is cut to ``depth`` values, the offset of the raising
    instruction is pushed if ``lasti``, then the exception, and control goes to ``target``.
    Equal entries (same target object, depth, lasti) on consecutive instructions form one
    table row when assembled.
    """
    target: "Instruction"
    depth: int
    lasti: bool


@dataclass(eq=False)
class Instruction:
    opname: str
    opcode: int
    arg: int | None = None
    argval: Any = None
    target: "Instruction | None" = None
    positions: dis.Positions | None = None
    starts_line: int | None = None
    exn_entry: ExnEntry | None = None
    offset: int | None = None
    argrepr: str = field(default="", repr=False)
    fuse_next: bool = field(default=False, repr=False)

    @property
    def lineno(self) -> int | None:
        return self.positions.lineno if self.positions is not None else None

    @property
    def is_jump(self) -> bool:
        return self.opname in op.JUMPS

    def __str__(self) -> str:
        return format_instruction(self)


def format_instruction(ins: Instruction, index: dict[int, int] | None = None) -> str:
    """One line: offset, name, argument, jump target, handler."""
    off = "" if ins.offset is None else f"{ins.offset:5d} "
    text = f"{off}{ins.opname}"
    if ins.target is not None:
        where = index.get(id(ins.target)) if index else ins.target.offset
        text += f" -> {where}"
    elif ins.arg is not None or ins.argval is not None:
        shown = ins.argrepr or repr(ins.argval)
        text += f" {shown}"
    if ins.exn_entry is not None:
        e = ins.exn_entry
        where = index.get(id(e.target)) if index else e.target.offset
        text += f"  [handler {where} depth={e.depth}{' lasti' if e.lasti else ''}]"
    return text


def format_instructions(instrs: list[Instruction]) -> str:
    """A listing with list indices; jump targets and handlers are shown as indices."""
    index = {id(x): i for i, x in enumerate(instrs)}
    lines = []
    for i, ins in enumerate(instrs):
        line = "" if ins.lineno is None else str(ins.lineno)
        lines.append(f"{i:4d} {line:>5} {format_instruction(ins, index)}")
    return "\n".join(lines)


# ---- reading ---------------------------------------------------------------------------------

def parse_varint_be(data: bytes, pos: int) -> tuple[int, int]:
    """One exception-table varint (6-bit chunks, most significant first, bit 6 = more)."""
    b = data[pos]
    val = b & 63
    pos += 1
    while b & 64:
        b = data[pos]
        pos += 1
        val = (val << 6) | (b & 63)
    return val, pos


def parse_exception_table(code: types.CodeType) -> list[tuple[int, int, int, int, bool]]:
    """Rows ``(start, end, target, depth, lasti)`` with byte offsets, ``end`` exclusive."""
    data = code.co_exceptiontable
    rows = []
    pos = 0
    while pos < len(data):
        start, pos = parse_varint_be(data, pos)
        size, pos = parse_varint_be(data, pos)
        target, pos = parse_varint_be(data, pos)
        dl, pos = parse_varint_be(data, pos)
        rows.append((start * 2, (start + size) * 2, target * 2, dl >> 1, bool(dl & 1)))
    return rows


_NO_POSITION = (None, None, None, None)


def disassemble(code: types.CodeType) -> list[Instruction]:
    """Instructions of ``code`` with jump targets and exception entries as objects.

    Decodes ``co_code`` directly (``dis.get_instructions`` is several times slower and its
    argval conventions vary between versions); ``argval`` is the constant, the name, the
    compare symbol, the jump target's offset, or else the raw argument.
    """
    co = code.co_code
    positions = list(code.co_positions())
    linestarts = dict(dis.findlinestarts(code))
    consts, names = code.co_consts, code.co_names
    in_vars = set(code.co_varnames)
    localsplus = code.co_varnames + tuple(c for c in code.co_cellvars if c not in in_vars) + code.co_freevars
    shifts = op.FACTS.name_shift
    out: list[Instruction] = []
    starts: list[int] = []           # first byte of each instruction, EXTENDED_ARG prefix included
    by_offset: dict[int, Instruction] = {}
    ext, prefix = 0, -1
    i, n = 0, len(co)
    while i < n:
        opc = co[i]
        if opc == op.EXTENDED_ARG:
            ext = (ext | co[i + 1]) << 8
            prefix = i if prefix < 0 else prefix
            i += 2
            continue
        name = op.OPNAME[opc]
        arg = ext | co[i + 1] if op.HAS_ARG_BY_OPCODE[opc] else None
        pair = op.SUPER_SPLIT.get(name)
        kind = op.ARG_KIND[opc] if pair is None else None
        argval: Any = arg
        if kind is not None:
            assert arg is not None  # ARG_KIND names a kind only for opcodes >= HAVE_ARGUMENT
            if kind is op.CONST:
                argval = consts[arg]
            elif kind is op.NAME:
                argval = names[arg >> shifts.get(name, 0)]
            elif kind is op.LOCAL:
                argval = localsplus[arg]
            elif kind is op.COMPARE:
                argval = dis.cmp_op[arg >> op.FACTS.compare_shift]
        start = i if prefix < 0 else prefix
        pos = positions[i // 2]
        ins = Instruction(name, opc, arg, argval, None,
                          dis.Positions(*pos) if pos != _NO_POSITION else None,
                          linestarts.get(start), None, i)
        if kind is op.JUMP:
            ins.argval = _jump_target_offset(ins)
        if pair is not None:
            # 3.13 super-instruction: two plain instructions at the same offset
            assert arg is not None
            first, second = pair
            a, b = arg >> 4, arg & 15
            ins = Instruction(first, op.OPMAP[first], a, localsplus[a], None, ins.positions,
                              ins.starts_line, None, i, fuse_next=True)
            out.append(ins)
            starts.append(start)
            out.append(Instruction(second, op.OPMAP[second], b, localsplus[b], None, ins.positions,
                                   None, None, i))
            starts.append(start)
        else:
            out.append(ins)
            starts.append(start)
        by_offset[start] = by_offset[i] = ins
        ext, prefix = 0, -1
        i += 2 + 2 * op.CACHES_BY_OPCODE[opc]
    for ins in out:
        if ins.opname in op.JUMPS:
            ins.target = by_offset[ins.argval]
    rows = parse_exception_table(code)
    entries: dict[tuple[int, int, bool], ExnEntry] = {}
    r = 0
    for ins, at in zip(out, starts):
        while r < len(rows) and rows[r][1] <= at:
            r += 1
        if r == len(rows):
            break
        begin, _end, target, depth, lasti = rows[r]
        if begin <= at:
            key = (target, depth, lasti)
            if key not in entries:
                entries[key] = ExnEntry(by_offset[target], depth, lasti)
            ins.exn_entry = entries[key]
    return out


def _jump_target_offset(ins: Instruction) -> int:
    """Target offset computed from the raw argument."""
    assert ins.offset is not None and ins.arg is not None
    if ins.opname in op.HAS_JABS:  # pragma: no cover - no absolute jumps in 3.11/3.12
        return ins.arg * 2
    after = ins.offset + 2 + 2 * op.cache_entries(ins.opname)
    return after - 2 * ins.arg if ins.opname in op.BACKWARD_JUMPS else after + 2 * ins.arg


# ---- writing ---------------------------------------------------------------------------------

def create(opname: str, arg: int | None = None, argval: Any = MISSING, *,
           target: Instruction | None = None, positions: dis.Positions | None = None,
           exn_entry: ExnEntry | None = None) -> Instruction:
    """A new instruction. Give names and constants as ``argval`` (the assembler finds or adds
    the table index), jumps as ``target`` (``JUMP`` and ``POP_JUMP_IF_*`` work on both
    versions; the assembler picks the direction), COMPARE_OP as its symbol in ``argval``.
    For ops with flag bits (LOAD_GLOBAL push-NULL, ...) pass the flags as ``arg``."""
    opname = op.GENERIC_JUMPS.get(opname, opname)
    if opname not in op.OPMAP:
        raise ValueError(f"unknown opcode {opname!r}")
    if opname in op.JUMPS:
        if target is None:
            raise ValueError(f"{opname} needs a target")
        return Instruction(opname, op.OPMAP[opname], 0, None, target, positions, None, exn_entry)
    if opname == "COMPARE_OP" and argval is not MISSING and arg is None:
        arg = op.COMPARE_ARG[argval]
    indexed = opname in op.HAS_CONST or opname in op.HAS_NAME or opname in op.HAS_LOCAL \
        or opname in op.HAS_FREE
    if indexed:
        if argval is MISSING:
            raise ValueError(f"{opname} needs argval (the name or constant)")
        arg = arg or 0
    elif argval is MISSING:
        argval = arg
    if op.has_arg(opname) and arg is None:
        raise ValueError(f"{opname} needs an arg")
    if not op.has_arg(opname):
        arg = None
    return Instruction(opname, op.OPMAP[opname], arg, argval, None, positions, None, exn_entry)


def clone(instrs: Iterable[Instruction]) -> list[Instruction]:
    """A copy of a list whose jump targets and exception entries point into the copy
    (references to instructions outside the list are kept as they are)."""
    instrs = list(instrs)
    copies = [Instruction(i.opname, i.opcode, i.arg, i.argval, i.target, i.positions,
                          i.starts_line, i.exn_entry, i.offset, i.argrepr, i.fuse_next) for i in instrs]
    remap = {id(old): new for old, new in zip(instrs, copies)}
    entries: dict[ExnEntry, ExnEntry] = {}
    for new in copies:
        if new.target is not None:
            new.target = remap.get(id(new.target), new.target)
        e = new.exn_entry
        if e is not None:
            if e not in entries:
                entries[e] = ExnEntry(remap.get(id(e.target), e.target), e.depth, e.lasti)
            new.exn_entry = entries[e]
    return copies
