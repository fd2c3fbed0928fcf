"""Decode a code object into normalized instructions whose jumps point at instruction indices.

``decode(code)`` is the only place that reads raw ``dis`` output; handlers see ``Instr``:

    opname    normalized name (``versions.VersionFacts.renames`` applied)
    arg       the raw argument (flag bits still in it, for debugging)
    argval    the decoded argument: a name, a constant, a compare symbol, a kw-names tuple...
    target    index of the jump target instruction (jumps and FOR_ITER), else None
    push_null LOAD_GLOBAL pushes NULL too (below the value, above it on 3.13); LOAD_ATTR /
              LOAD_SUPER_ATTR is a method load
    lineno    source line (None for compiler-made instructions)

EXTENDED_ARG and CACHE are dropped (their effect is already in the next ``arg``); a 3.13
super-instruction (``LOAD_FAST_LOAD_FAST`` ...) becomes the two plain instructions it stands
for, both at its offset.
"""
from __future__ import annotations

import dis
import sys
import types
from dataclasses import dataclass
from typing import Any, cast

from .versions import VersionFacts, facts_for

_DROP = {"EXTENDED_ARG", "CACHE"}
# 3.13 super-instructions -> the plain instructions they are read as
_SUPER = {"LOAD_FAST_LOAD_FAST": ("LOAD_FAST", "LOAD_FAST"),
          "STORE_FAST_STORE_FAST": ("STORE_FAST", "STORE_FAST"),
          "STORE_FAST_LOAD_FAST": ("STORE_FAST", "LOAD_FAST")}


@dataclass(frozen=True)
class Instr:
    index: int
    offset: int
    opname: str
    arg: int | None
    argval: Any
    target: int | None
    push_null: bool
    lineno: int | None

    @property
    def oparg(self) -> int:
        """``arg`` for an opcode that has one (what a handler that reads it relies on)."""
        assert self.arg is not None, f"{self.opname} has no argument"
        return self.arg

    @property
    def jump_target(self) -> int:
        """``target`` of a jump (or FOR_ITER / SEND); asserts it is there."""
        assert self.target is not None, f"{self.opname} does not jump"
        return self.target

    def __str__(self) -> str:
        tgt = f" -> {self.target}" if self.target is not None else ""
        return f"{self.index:4d} {self.opname} {self.argval!r}{tgt}"


def decode(code: types.CodeType, facts: VersionFacts | None = None) -> list[Instr]:
    facts = facts or facts_for(sys.version_info[:2])
    everything = list(dis.get_instructions(code))
    raw = [i for i in everything if i.opname not in _DROP]
    by_offset = {ins.offset: n for n, ins in enumerate(raw)}
    # index in the output of each raw instruction (a super-instruction takes two)
    index_of: list[int] = []
    k = 0
    for ins in raw:
        index_of.append(k)
        k += 2 if ins.opname in _SUPER else 1
    # A jump to an instruction with an EXTENDED_ARG prefix targets the prefix's offset:
    # map dropped prefixes to the instruction they belong to.
    pending: list[int] = []
    for ins in everything:
        if ins.opname == "EXTENDED_ARG":
            pending.append(ins.offset)
        elif ins.opname != "CACHE":
            for off in pending:
                by_offset[off] = by_offset[ins.offset]
            pending.clear()
    out: list[Instr] = []
    for n, ins in enumerate(raw):
        if ins.opname in _SUPER:
            # 3.13: one super-instruction, two plain instructions (both at its offset)
            first, second = _SUPER[ins.opname]
            a, b = cast(int, ins.arg) >> 4, cast(int, ins.arg) & 15
            line = ins.positions.lineno if ins.positions is not None else None
            out.append(Instr(len(out), ins.offset, first, a, ins.argval[0], None, False, line))
            out.append(Instr(len(out), ins.offset, second, b, ins.argval[1], None, False, line))
            continue
        name = ins.opname
        argval = ins.argval
        push_null = False
        # (the opcodes below all take an argument: ``ins.arg`` is an int)
        if name == "LOAD_GLOBAL":
            push_null = bool(cast(int, ins.arg) & 1)
        elif name == "LOAD_METHOD":
            push_null = True
        elif name == "LOAD_ATTR" and facts.load_attr_method_bit:
            push_null = bool(cast(int, ins.arg) & 1)
        elif name == "LOAD_SUPER_ATTR":
            push_null = bool(cast(int, ins.arg) & 1)
        elif name == "KW_NAMES" and facts.kw_names_from_consts:
            argval = code.co_consts[cast(int, ins.arg)]
        elif name == "CALL_INTRINSIC_1":
            argval = facts.intrinsic_1[cast(int, ins.arg)]
        name = facts.renames.get(name, name)
        target = None
        if ins.opcode in dis.hasjrel or ins.opcode in dis.hasjabs:
            target = index_of[by_offset[ins.argval]]
        lineno = ins.positions.lineno if ins.positions is not None else None
        out.append(Instr(len(out), ins.offset, name, ins.arg, argval, target, push_null, lineno))
    return out


def render(instrs: list[Instr]) -> str:
    return "\n".join(str(i) for i in instrs)
