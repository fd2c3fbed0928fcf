"""Instruction list -> code object: offsets, arguments, and the three side tables.

``assemble(instrs, template=code, **overrides)`` does, in order:

1. jump directions: pick the forward or backward form of each jump from where its target
   lies; on 3.12, which has no backward conditional jumps, a backward ``POP_JUMP_IF_X T``
   becomes ``POP_JUMP_IF_NOT_X next; JUMP_BACKWARD T``;
2. tables: names and constants are looked up in the template's tables (or the overrides')
   and appended when missing; new local names are appended to ``co_varnames``; every
   table-indexed ``arg`` is recomputed from ``argval`` (flag bits kept);
3. offsets: EXTENDED_ARG prefixes and CACHE units sized to a fixed point (jump arguments
   depend on offsets, offsets on the size of jump arguments; sizes only grow);
   (3.13: a pair of instructions read from one super-instruction is fused back into it);
4. ``co_code``, ``co_exceptiontable`` (3.11+ varint rows, merged over consecutive
   instructions with equal entries), ``co_linetable`` (3.11+ location entries, the same
   forms CPython's compiler writes) and ``co_stacksize`` (``analysis.analyze_stack``);
5. ``template.replace(...)`` with all of that plus the overrides.

The caller's instruction objects are not changed, except that each one's ``offset`` is set
to where it landed.
"""
from __future__ import annotations

import types
from typing import Any

from . import opcodes as op
from .analysis import StackAnalysisError, analyze_stack
from .instr import ExnEntry, Instruction, clone, create, format_instructions


class AssemblyError(ValueError):
    pass


def assemble(instructions: list[Instruction], *, template: types.CodeType,
             **overrides: Any) -> types.CodeType:
    """Build a code object from ``instructions``; ``overrides`` are ``code.replace`` keywords
    (``co_name=...``, ``co_varnames=...``, ...) applied on top of ``template``."""
    originals = list(instructions)
    instrs = clone(originals)
    back = {id(c): o for c, o in zip(instrs, originals)}
    instrs = _fix_jump_directions(instrs)

    get = lambda key: overrides.get(key, getattr(template, key))  # noqa: E731
    consts = _ConstTable(get("co_consts"))
    names = _NameTable(get("co_names"))
    varnames = list(get("co_varnames"))
    cellvars = tuple(get("co_cellvars"))
    freevars = tuple(get("co_freevars"))

    _assign_table_args(instrs, consts, names, varnames, cellvars, freevars)
    try:
        stacksize = analyze_stack(instrs).max_depth
    except StackAnalysisError as e:
        raise AssemblyError(f"{e}\n{format_instructions(instrs)}") from None
    instrs, fused = _fuse_super_instructions(instrs)
    starts, owns, ext, caches = _layout(instrs)
    code = _emit_code(instrs, ext, caches)
    end = len(code)
    exctab = _emit_exception_table(instrs, starts, end)
    linetab = _emit_line_table(instrs, starts, end, get("co_firstlineno"))

    for c, own in zip(instrs, owns):
        for o in (back.get(id(c)), back.get(id(fused.get(id(c))))):
            if o is not None:
                o.offset = own

    fields = dict(overrides)
    fields.update(
        co_code=code, co_consts=tuple(consts.items), co_names=tuple(names.items),
        co_varnames=tuple(varnames), co_cellvars=cellvars, co_freevars=freevars,
        co_nlocals=len(varnames), co_linetable=linetab, co_exceptiontable=exctab,
    )
    fields.setdefault("co_stacksize", stacksize)
    nargs = (get("co_argcount") + get("co_kwonlyargcount")
             + bool(get("co_flags") & op.CO_VARARGS) + bool(get("co_flags") & op.CO_VARKEYWORDS))
    if nargs > len(varnames):
        raise AssemblyError(f"{nargs} arguments but only {len(varnames)} local names")
    return template.replace(**fields)


# ---- 1. jump directions ----------------------------------------------------------------------

def _fix_jump_directions(instrs: list[Instruction]) -> list[Instruction]:
    index = {id(x): i for i, x in enumerate(instrs)}
    out: list[Instruction] = []
    for i, ins in enumerate(instrs):
        out.append(ins)
        if ins.target is None:
            continue
        if id(ins.target) not in index:
            raise AssemblyError(f"{ins.opname} at {i} jumps to an instruction not in the list")
        if op.FACTS.for_iter_skips_end_for and ins.opname == "FOR_ITER" and ins.target.opname != "END_FOR":
            raise AssemblyError(f"FOR_ITER at {i} must jump to an END_FOR, not {ins.target.opname}")
        backward = index[id(ins.target)] <= i
        name = ins.opname
        if backward and name in op.BACKWARD_JUMPS or not backward and name not in op.BACKWARD_JUMPS:
            continue
        if backward:
            other = op.FACTS.forward_to_backward.get(name)
            if other is None and name in op.FACTS.negated:
                # 3.12: "if cond: goto T" backward == "if not cond: goto next; goto T"
                if i + 1 >= len(instrs):
                    raise AssemblyError(f"{name} at the end of the code")
                target = ins.target
                _set_op(ins, op.FACTS.negated[name])
                ins.target = instrs[i + 1]
                out.append(create("JUMP_BACKWARD", target=target, positions=ins.positions,
                                  exn_entry=ins.exn_entry))
                continue
        else:
            other = op.BACKWARD_TO_FORWARD.get(name)
        if other is None:
            where = "backward" if backward else "forward"
            raise AssemblyError(f"{name} at {i} cannot jump {where} on {op.VERSION}")
        _set_op(ins, other)
    return out


def _set_op(ins: Instruction, opname: str) -> None:
    ins.opname = opname
    ins.opcode = op.OPMAP[opname]


# ---- 2. tables -------------------------------------------------------------------------------

def _const_key(v: Any) -> Any:
    t = type(v)
    if t in (float, complex):
        return (t, repr(v))          # keeps 0.0 / -0.0 / nan apart
    if t is tuple:
        return (t, tuple(_const_key(x) for x in v))
    if t is frozenset:
        return (t, frozenset(_const_key(x) for x in v))
    if t in (int, str, bytes, bool, type(None), type(Ellipsis)):
        return (t, v)
    return ("id", id(v))


class _ConstTable:
    def __init__(self, items) -> None:
        self.items = list(items)
        self.by_id: dict[int, int] = {}
        self.by_key: dict[Any, int] = {}
        for i, v in enumerate(self.items):
            self.by_id.setdefault(id(v), i)
            self.by_key.setdefault(_const_key(v), i)

    def index(self, value: Any) -> int:
        i = self.by_id.get(id(value))
        if i is not None:
            return i
        key = _const_key(value)
        i = self.by_key.get(key)
        if i is None:
            i = len(self.items)
            self.items.append(value)
            self.by_id[id(value)] = i
            self.by_key[key] = i
        return i


class _NameTable:
    def __init__(self, items) -> None:
        self.items = list(items)
        self.pos: dict[str, int] = {}
        for i, v in enumerate(self.items):
            self.pos.setdefault(v, i)

    def index(self, name: str) -> int:
        i = self.pos.get(name)
        if i is None:
            i = self.pos[name] = len(self.items)
            self.items.append(name)
        return i


def _assign_table_args(instrs, consts, names, varnames, cellvars, freevars) -> None:
    known = set(varnames) | set(cellvars) | set(freevars)
    for ins in instrs:
        if ins.opname in op.HAS_LOCAL and ins.argval not in known:
            varnames.append(ins.argval)
            known.add(ins.argval)
        elif ins.opname in op.HAS_FREE and ins.argval not in known:
            raise AssemblyError(f"{ins.opname} {ins.argval!r}: not a cell or free variable")
    in_vars = set(varnames)
    localsplus = varnames + [c for c in cellvars if c not in in_vars] + list(freevars)
    slot: dict[str, int] = {}
    for i, name in enumerate(localsplus):
        slot.setdefault(name, i)
    for ins in instrs:
        name = ins.opname
        if name in op.HAS_CONST:
            ins.arg = consts.index(ins.argval)
        elif name in op.HAS_NAME:
            shift = op.FACTS.name_shift.get(name, 0)
            flags = (ins.arg or 0) & ((1 << shift) - 1)
            ins.arg = (names.index(ins.argval) << shift) | flags
        elif name in op.HAS_LOCAL or name in op.HAS_FREE:
            ins.arg = slot[ins.argval]
        elif name == "COPY_FREE_VARS":
            ins.arg = len(freevars)


def _fuse_super_instructions(instrs: list[Instruction]) -> tuple[list[Instruction], dict[int, Instruction]]:
    """3.13: the pairs ``disassemble`` split out of a super-instruction become one again when
    they are still adjacent, both slots fit in four bits, nothing jumps to the second and both
    have the same handler (what CPython's compiler requires as well). Returns the new list and,
    by id of each kept first half, the second half folded into it."""
    fused: dict[int, Instruction] = {}
    if not op.SUPER_FUSE:
        return instrs, fused
    targets = {id(x.target) for x in instrs if x.target is not None}
    targets |= {id(x.exn_entry.target) for x in instrs if x.exn_entry is not None}
    out: list[Instruction] = []
    i, n = 0, len(instrs)
    while i < n:
        x = instrs[i]
        if x.fuse_next and i + 1 < n:
            y = instrs[i + 1]
            name = op.SUPER_FUSE.get((x.opname, y.opname))
            if (name is not None and id(y) not in targets and x.exn_entry == y.exn_entry
                    and x.arg is not None and y.arg is not None and x.arg < 16 and y.arg < 16):
                x.opname, x.opcode = name, op.OPMAP[name]
                x.argval = (x.argval, y.argval)
                x.arg = (x.arg << 4) | y.arg
                x.fuse_next = False
                fused[id(x)] = y
                out.append(x)
                i += 2
                continue
        out.append(x)
        i += 1
    return out, fused


# ---- 3. offsets ------------------------------------------------------------------------------

def _ext_count(arg: int | None) -> int:
    if arg is None or arg <= 0xFF:
        if arg is not None and arg < 0:
            raise AssemblyError(f"negative argument {arg}")
        return 0
    if arg <= 0xFFFF:
        return 1
    if arg <= 0xFFFFFF:
        return 2
    return 3


def _layout(instrs: list[Instruction]) -> tuple[list[int], list[int], list[int], list[int]]:
    """Fix EXTENDED_ARG counts and jump arguments (sets ``offset`` and jump ``arg``).
    Returns per instruction: its first byte (prefix included), the byte of its own opcode,
    its number of EXTENDED_ARG prefixes and of CACHE units."""
    n = len(instrs)
    index = {id(x): i for i, x in enumerate(instrs)}
    caches = [op.cache_entries(x.opname) for x in instrs]
    is_jump = [x.target is not None for x in instrs]
    ext = [0 if j else _ext_count(x.arg) for x, j in zip(instrs, is_jump)]
    while True:
        starts, owns = [0] * n, [0] * n
        pos = 0
        for i in range(n):
            starts[i] = pos
            owns[i] = pos + 2 * ext[i]
            pos = owns[i] + 2 + 2 * caches[i]
        grew = False
        for i, x in enumerate(instrs):
            if not is_jump[i]:
                continue
            after = owns[i] + 2 + 2 * caches[i]
            target = starts[index[id(x.target)]]
            delta = after - target if x.opname in op.BACKWARD_JUMPS else target - after
            if delta < 0 or delta % 2:
                raise AssemblyError(f"{x.opname} at {i}: bad jump distance {delta}")
            x.arg = delta // 2
            need = _ext_count(x.arg)
            if need > ext[i]:
                ext[i] = need
                grew = True
        if not grew:
            break
    for i, x in enumerate(instrs):
        x.offset = owns[i]
    return starts, owns, ext, caches


# ---- 4. the byte strings ---------------------------------------------------------------------

def _emit_code(instrs: list[Instruction], ext: list[int], caches: list[int]) -> bytes:
    out = bytearray()
    for x, n_ext, n_cache in zip(instrs, ext, caches):
        arg = x.arg if op.has_arg(x.opname) and x.arg is not None else 0
        for k in range(n_ext, 0, -1):
            out += bytes((op.EXTENDED_ARG, (arg >> (8 * k)) & 0xFF))
        out += bytes((x.opcode, arg & 0xFF))
        out += bytes((op.CACHE, 0)) * n_cache
    return bytes(out)


def _write_exc_varint(out: bytearray, val: int, msb: int) -> None:
    """Big-endian 6-bit chunks, bit 6 = more follows, bit 7 marks a row's first byte."""
    for shift in (24, 18, 12, 6):
        if val >= 1 << shift:
            out.append(((val >> shift) & 0x3F) | 0x40 | msb)
            msb = 0
    out.append((val & 0x3F) | msb)


def _emit_exception_table(instrs: list[Instruction], starts: list[int], end: int) -> bytes:
    index = {id(x): i for i, x in enumerate(instrs)}
    out = bytearray()
    cur: ExnEntry | None = None
    cur_start = 0

    def flush(stop: int) -> None:
        if cur is None:
            return
        target = starts[index[id(cur.target)]]
        _write_exc_varint(out, cur_start // 2, 0x80)
        _write_exc_varint(out, (stop - cur_start) // 2, 0)
        _write_exc_varint(out, target // 2, 0)
        _write_exc_varint(out, (cur.depth << 1) | int(cur.lasti), 0)

    for x, start in zip(instrs, starts):
        if x.exn_entry != cur:
            flush(start)
            cur, cur_start = x.exn_entry, start
            if cur is not None and id(cur.target) not in index:
                raise AssemblyError(f"handler {cur.target.opname} is not in the instruction list")
    flush(end)
    return bytes(out)


def _write_varint(out: bytearray, val: int) -> None:
    """Little-endian 6-bit chunks, bit 6 = more follows (location table)."""
    while val >= 64:
        out.append(0x40 | (val & 63))
        val >>= 6
    out.append(val)


def _write_svarint(out: bytearray, val: int) -> None:
    _write_varint(out, ((-val) << 1) | 1 if val < 0 else val << 1)


def _location(x: Instruction) -> tuple[int, int, int, int]:
    p = x.positions
    if p is None or p.lineno is None:
        return (-1, -1, -1, -1)
    end_line = p.end_lineno if p.end_lineno is not None else p.lineno
    col = -1 if p.col_offset is None else p.col_offset
    end_col = -1 if p.end_col_offset is None else p.end_col_offset
    return (p.lineno, end_line, col, end_col)


class _LineWriter:
    """Writes location entries exactly as CPython's assembler does (same forms chosen)."""

    def __init__(self, firstlineno: int) -> None:
        self.out = bytearray()
        self.line = firstlineno

    def emit(self, loc: tuple[int, int, int, int], units: int) -> None:
        while units > 8:
            self._entry(loc, 8)
            units -= 8
        if units:
            self._entry(loc, units)

    def _entry(self, loc: tuple[int, int, int, int], n: int) -> None:
        line, end_line, col, end_col = loc
        out = self.out
        if line < 0:
            out.append(0x80 | (15 << 3) | (n - 1))
            return
        delta = line - self.line
        if col < 0 or end_col < 0:
            if end_line == line:
                out.append(0x80 | (13 << 3) | (n - 1))
                _write_svarint(out, delta)
                self.line = line
                return
        elif end_line == line:
            if delta == 0 and col < 80 and 0 <= end_col - col < 16:
                out.append(0x80 | ((col >> 3) << 3) | (n - 1))
                out.append(((col & 7) << 4) | (end_col - col))
                return
            if 0 <= delta < 3 and col < 128 and end_col < 128:
                out.append(0x80 | ((10 + delta) << 3) | (n - 1))
                out.append(col)
                out.append(end_col)
                self.line = line
                return
        out.append(0x80 | (14 << 3) | (n - 1))
        _write_svarint(out, delta)
        _write_varint(out, max(0, end_line - line))
        _write_varint(out, col + 1)
        _write_varint(out, end_col + 1)
        self.line = line


def _emit_line_table(instrs: list[Instruction], starts: list[int], end: int, firstlineno: int) -> bytes:
    w = _LineWriter(firstlineno)
    bounds = starts[1:] + [end]
    if not op.FACTS.merge_same_locations:
        for x, s, e in zip(instrs, starts, bounds):
            w.emit(_location(x), (e - s) // 2)
        return bytes(w.out)
    loc, units = None, 0
    for x, s, e in zip(instrs, starts, bounds):
        here = _location(x)
        if here != loc:
            if loc is not None:
                w.emit(loc, units)
            loc, units = here, 0
        units += (e - s) // 2
    if loc is not None:
        w.emit(loc, units)
    return bytes(w.out)
