"""Per-version opcode facts the assembler and the analyses need, in one table.

``versions.py`` (the symbolic interpreter's table) normalizes opcodes for *reading*; this
table is about *writing* bytecode back: which opcodes index which code-object table, which
jumps exist in which direction, how many inline CACHE units follow each opcode, and how the
location table is laid out. Everything that can be read off the running interpreter's
``dis``/``opcode`` modules is read there; the rest is a row per version below. No other file
of the bytecode toolkit looks at ``sys.version_info``.
"""
from __future__ import annotations

import dataclasses
import dis
import opcode as _opcode
import sys
from dataclasses import dataclass, field


@dataclass(frozen=True)
class OpcodeFacts:
    version: tuple[int, int]
    # name-table ops whose ``arg`` is ``(index << shift) | flag bits``
    name_shift: dict[str, int] = field(default_factory=dict)
    # relative jumps: opname -> opname of the same jump in the other direction (None: none exists)
    forward_to_backward: dict[str, str | None] = field(default_factory=dict)
    # a conditional jump with its condition negated (used to build a backward conditional
    # jump where the version has only forward ones)
    negated: dict[str, str] = field(default_factory=dict)
    # 3.12 merges consecutive instructions with the same location into one line-table entry;
    # 3.11 writes one entry per instruction
    merge_same_locations: bool = False
    # instructions after which control never falls through to the next one
    no_fallthrough: frozenset[str] = frozenset()
    # 3.12: an exhausted FOR_ITER jumps one instruction past its target, which must be the
    # END_FOR (so nothing may be inserted before that END_FOR)
    for_iter_skips_end_for: bool = False
    # COMPARE_OP's ``arg >> compare_shift`` indexes ``dis.cmp_op``
    compare_shift: int = 0
    # 3.13: an exhausted FOR_ITER skips the END_FOR *and* the POP_TOP after it (3.12: END_FOR only)
    for_iter_skip: int = 0
    # 3.13 packs two local slots into one instruction (``(first << 4) | second``): these are
    # read as two plain instructions and fused again when assembled (see ``SUPER_SPLIT``)
    super_instructions: bool = False
    # 3.13: LOAD_GLOBAL / a method LOAD_ATTR push the callable first and NULL (or self) above
    # it; CALL's stack is [callable, self_or_null, args...] (3.11, 3.12: [NULL, callable, ...])
    null_above_callable: bool = False
    # 3.13: POP_JUMP_IF_TRUE/FALSE and UNARY_NOT read an exact bool (TO_BOOL makes it)
    jumps_need_bool: bool = False


_NO_FALLTHROUGH = frozenset({"RETURN_VALUE", "RAISE_VARARGS", "RERAISE", "JUMP_FORWARD",
                             "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT", "INTERPRETER_EXIT"})

TABLE: dict[tuple[int, int], OpcodeFacts] = {
    (3, 11): OpcodeFacts(
        version=(3, 11),
        name_shift={"LOAD_GLOBAL": 1},
        forward_to_backward={
            "JUMP_FORWARD": "JUMP_BACKWARD",
            "POP_JUMP_FORWARD_IF_FALSE": "POP_JUMP_BACKWARD_IF_FALSE",
            "POP_JUMP_FORWARD_IF_TRUE": "POP_JUMP_BACKWARD_IF_TRUE",
            "POP_JUMP_FORWARD_IF_NONE": "POP_JUMP_BACKWARD_IF_NONE",
            "POP_JUMP_FORWARD_IF_NOT_NONE": "POP_JUMP_BACKWARD_IF_NOT_NONE",
            "JUMP_IF_FALSE_OR_POP": None, "JUMP_IF_TRUE_OR_POP": None,
            "FOR_ITER": None, "SEND": None,
        },
        negated={},
        merge_same_locations=False,
        no_fallthrough=_NO_FALLTHROUGH,
    ),
    (3, 12): OpcodeFacts(
        version=(3, 12),
        name_shift={"LOAD_GLOBAL": 1, "LOAD_ATTR": 1, "LOAD_SUPER_ATTR": 2},
        forward_to_backward={
            "JUMP_FORWARD": "JUMP_BACKWARD",
            "POP_JUMP_IF_FALSE": None, "POP_JUMP_IF_TRUE": None,
            "POP_JUMP_IF_NONE": None, "POP_JUMP_IF_NOT_NONE": None,
            "FOR_ITER": None, "SEND": None,
        },
        negated={"POP_JUMP_IF_FALSE": "POP_JUMP_IF_TRUE", "POP_JUMP_IF_TRUE": "POP_JUMP_IF_FALSE",
                 "POP_JUMP_IF_NONE": "POP_JUMP_IF_NOT_NONE",
                 "POP_JUMP_IF_NOT_NONE": "POP_JUMP_IF_NONE"},
        merge_same_locations=True,
        no_fallthrough=_NO_FALLTHROUGH | {"RETURN_CONST"},
        for_iter_skips_end_for=True,
        compare_shift=4,
        for_iter_skip=1,
    ),
}

# 3.13: 3.12's facts, with the compare and FOR_ITER encodings moved, super-instructions, the NULL
# above the callable and conditional jumps that need an exact bool
TABLE[(3, 13)] = dataclasses.replace(TABLE[(3, 12)], version=(3, 13), compare_shift=5, for_iter_skip=2,
                                     super_instructions=True, null_above_callable=True, jumps_need_bool=True)

VERSION = sys.version_info[:2]
if VERSION not in TABLE:  # pragma: no cover - guarded by requires-python
    raise ImportError(f"xcompile.bytecode supports CPython 3.11 to 3.13, not {VERSION}")
FACTS = TABLE[VERSION]

# ---- facts read off the running interpreter -------------------------------------------------
# (real opcodes only: 3.13's opmap also lists the compiler's pseudo-ops, numbered from 256)
OPMAP: dict[str, int] = {name: code for name, code in _opcode.opmap.items() if code < 256}
OPNAME: list[str] = list(_opcode.opname)
HAVE_ARGUMENT: int = _opcode.HAVE_ARGUMENT
EXTENDED_ARG: int = OPMAP["EXTENDED_ARG"]
CACHE: int = OPMAP["CACHE"]


def _names(codes) -> frozenset[str]:
    return frozenset(OPNAME[c] for c in codes if c < 256 and not OPNAME[c].startswith("<"))


HAS_CONST = _names(dis.hasconst)
HAS_NAME = _names(dis.hasname)
HAS_LOCAL = _names(dis.haslocal)
HAS_FREE = _names(dis.hasfree)
HAS_JREL = _names(dis.hasjrel)
HAS_JABS = _names(dis.hasjabs)
JUMPS = HAS_JREL | HAS_JABS
BACKWARD_JUMPS = frozenset(n for n in JUMPS if "BACKWARD" in n)

_found = getattr(dis, "_inline_cache_entries", None)
if _found is None:  # pragma: no cover
    _found = _opcode._inline_cache_entries  # type: ignore[attr-defined]  # private; typeshed omits it
_cache_table: list[int] | dict[str, int] = _found


def cache_entries(opname: str) -> int:
    """Number of CACHE code units that follow ``opname`` in co_code."""
    op = OPMAP[opname]
    if isinstance(_cache_table, dict):  # 3.13: keyed by name
        return _cache_table.get(opname, 0)
    return _cache_table[op]


CACHES_BY_OPCODE: tuple[int, ...] = tuple(cache_entries(OPNAME[c]) if not OPNAME[c].startswith("<") else 0
                                          for c in range(256))

# What ``arg`` means, per opcode (for decoding): one of the names below, or None (a plain number)
CONST, NAME, LOCAL, JUMP, COMPARE = "const", "name", "local", "jump", "compare"
ARG_KIND: tuple[str | None, ...] = tuple(
    CONST if n in HAS_CONST else NAME if n in HAS_NAME else LOCAL if n in HAS_LOCAL | HAS_FREE
    else JUMP if n in JUMPS else COMPARE if n == "COMPARE_OP" else None
    for n in OPNAME[:256])


# opcodes whose code unit carries an argument (3.12+ lists them; 3.13's WITH_EXCEPT_START sits
# at HAVE_ARGUMENT but takes none)
_HASARG: frozenset[int] = frozenset(getattr(_opcode, "hasarg", range(HAVE_ARGUMENT, 256)))
HAS_ARG_BY_OPCODE: tuple[bool, ...] = tuple(c in _HASARG for c in range(256))


def has_arg(opname: str) -> bool:
    return HAS_ARG_BY_OPCODE[OPMAP[opname]]


# 3.13 super-instructions -> the two plain instructions they stand for (first, second)
SUPER_SPLIT: dict[str, tuple[str, str]] = {
    "LOAD_FAST_LOAD_FAST": ("LOAD_FAST", "LOAD_FAST"),
    "STORE_FAST_STORE_FAST": ("STORE_FAST", "STORE_FAST"),
    "STORE_FAST_LOAD_FAST": ("STORE_FAST", "LOAD_FAST"),
} if FACTS.super_instructions else {}
SUPER_FUSE: dict[tuple[str, str], str] = {pair: name for name, pair in SUPER_SPLIT.items()}


def _compare_args() -> dict[str, int]:
    """COMPARE_OP's full ``arg`` per operator, as this interpreter's compiler writes it
    (3.12 packs a result mask into the low four bits that the specialized forms rely on)."""
    out: dict[str, int] = {}
    for sym in dis.cmp_op:
        code = compile(f"a {sym} b", "<cmp>", "eval")
        for ins in dis.get_instructions(code):
            if ins.opname == "COMPARE_OP":
                assert ins.arg is not None
                out[sym] = ins.arg
    return out


COMPARE_ARG: dict[str, int] = _compare_args()

# Generic names accepted by ``instr.create``: they resolve to this version's forward form,
# and the assembler picks the direction from where the target lies.
GENERIC_JUMPS: dict[str, str] = {"JUMP": "JUMP_FORWARD"}
for _cond in ("FALSE", "TRUE", "NONE", "NOT_NONE"):
    _fwd = f"POP_JUMP_FORWARD_IF_{_cond}" if VERSION == (3, 11) else f"POP_JUMP_IF_{_cond}"
    GENERIC_JUMPS[f"POP_JUMP_IF_{_cond}"] = _fwd
BACKWARD_TO_FORWARD: dict[str, str] = {b: f for f, b in FACTS.forward_to_backward.items() if b}
BACKWARD_TO_FORWARD["JUMP_BACKWARD_NO_INTERRUPT"] = "JUMP_FORWARD"

# Code flags (``inspect`` has them too, but it is a heavy import).
CO_OPTIMIZED = 0x1
CO_NEWLOCALS = 0x2
CO_VARARGS = 0x4
CO_VARKEYWORDS = 0x8
CO_NESTED = 0x10
CO_GENERATOR = 0x20
CO_COROUTINE = 0x80
CO_ITERABLE_COROUTINE = 0x100
CO_ASYNC_GENERATOR = 0x200
GENERATOR_LIKE = CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR
