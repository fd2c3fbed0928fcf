"""Opcode handlers: binary, unary and comparison operators, `is`, `in`, intrinsics."""
from __future__ import annotations

import operator
from typing import cast

from ...bytecode.instructions import Instr
from ...bytecode.versions import BINARY_OPS, COMPARE_OPS
from .. import hub
from ..exc import PythonError, Unsupported
from ..pyops import binary_op, contains, is_op, truth, unary_op
from ..tracer import Frame, handler
from ..values import ConstantValue, ListValue, TupleValue


@handler("BINARY_OP")
def binary(f: Frame, inst: Instr) -> None:
    b, a = f.pop(), f.pop()
    f.push(binary_op(f.tx, BINARY_OPS[inst.oparg][1], a, b))


@handler("COMPARE_OP")
def compare(f: Frame, inst: Instr) -> None:
    b, a = f.pop(), f.pop()
    f.push(binary_op(f.tx, COMPARE_OPS[inst.argval], a, b))


@handler("IS_OP")
def is_op_handler(f: Frame, inst: Instr) -> None:
    b, a = f.pop(), f.pop()
    f.push(ConstantValue(is_op(a, b) != bool(inst.arg)))


@handler("CONTAINS_OP")
def contains_op(f: Frame, inst: Instr) -> None:
    container, item = f.pop(), f.pop()
    f.push(ConstantValue(contains(f.tx, item, container) != bool(inst.arg)))


@handler("UNARY_NEGATIVE")
def unary_negative(f: Frame, inst: Instr) -> None:
    f.push(unary_op(f.tx, operator.neg, f.pop()))


@handler("UNARY_POSITIVE")
def unary_positive(f: Frame, inst: Instr) -> None:
    f.push(unary_op(f.tx, operator.pos, f.pop()))


@handler("UNARY_INVERT")
def unary_invert(f: Frame, inst: Instr) -> None:
    f.push(unary_op(f.tx, operator.invert, f.pop()))


@handler("TO_BOOL")
def to_bool(f: Frame, inst: Instr) -> None:
    """3.13: only ever read by the POP_JUMP_IF_TRUE/FALSE or UNARY_NOT right after it, whose
    handlers take any value's truth (a tensor's there is a graph break at the jump, as on 3.12),
    so the value stays as it is."""


@handler("UNARY_NOT")
def unary_not(f: Frame, inst: Instr) -> None:
    f.push(ConstantValue(not truth(f.tx, f.pop())))


@handler("CALL_INTRINSIC_1")
def call_intrinsic_1(f: Frame, inst: Instr) -> None:
    if inst.argval == "INTRINSIC_UNARY_POSITIVE":
        f.push(unary_op(f.tx, operator.pos, f.pop()))
    elif inst.argval == "INTRINSIC_LIST_TO_TUPLE":
        f.push(TupleValue(list(cast(ListValue, f.pop()).items)))
    elif inst.argval == "INTRINSIC_PRINT":
        raise Unsupported("call to builtin print")
    elif inst.argval == "INTRINSIC_STOPITERATION_ERROR":   # 3.12 generators: StopIteration -> RuntimeError
        exc = f.pop()
        if isinstance(hub.real_exception(exc), StopIteration):
            exc = PythonError.of(RuntimeError("generator raised StopIteration")).value
        f.push(exc)
    else:
        raise Unsupported(f"unsupported intrinsic {inst.argval}")
