"""Opcode handlers: the ``match`` statement (structural pattern matching over Python values).

    MATCH_SEQUENCE   subject is a sequence (list/tuple/range, not str/bytes)  -> push bool
    MATCH_MAPPING    subject is a mapping (dict)                             -> push bool
    GET_LEN          push len(subject)
    MATCH_KEYS       subject, keys -> push a tuple of the values, or None
    MATCH_CLASS      subject, cls, names -> the matched attributes as a tuple, or None
"""
from __future__ import annotations

import collections.abc

from ...bytecode.instructions import Instr
from ..attrs import AttrMissing, load_attr
from ..exc import Unsupported
from ..iteration import length_of
from ..pyops import as_constant, getitem
from ..tracer import Frame, handler
from ..values import ClassValue, ConstantValue, DictValue, TupleValue, Value


def _type_of(v: Value) -> type:
    try:
        return v.python_type()
    except NotImplementedError:
        raise Unsupported(f"match on {v.describe()}") from None


@handler("MATCH_SEQUENCE")
def match_sequence(f: Frame, inst: Instr) -> None:
    t = _type_of(f.peek())
    ok = issubclass(t, collections.abc.Sequence) and not issubclass(t, (str, bytes, bytearray))
    f.push(ConstantValue(ok))


@handler("MATCH_MAPPING")
def match_mapping(f: Frame, inst: Instr) -> None:
    f.push(ConstantValue(issubclass(_type_of(f.peek()), collections.abc.Mapping)))


@handler("GET_LEN")
def get_len(f: Frame, inst: Instr) -> None:
    f.push(ConstantValue(length_of(f.tx, f.peek())))


@handler("MATCH_KEYS")
def match_keys(f: Frame, inst: Instr) -> None:
    keys_v, subject = f.peek(1), f.peek(2)
    ok, keys = as_constant(keys_v)
    if not ok or not isinstance(subject, DictValue):
        raise Unsupported(f"mapping pattern on {subject.describe()}")
    if all(k in subject.items for k in keys):
        f.push(TupleValue([getitem(f.tx, subject, ConstantValue(k)) for k in keys]))
    else:
        f.push(ConstantValue(None))


@handler("MATCH_CLASS")
def match_class(f: Frame, inst: Instr) -> None:
    names_v, cls_v, subject = f.pop(), f.pop(), f.pop()
    if not isinstance(cls_v, ClassValue):
        raise Unsupported(f"class pattern with {cls_v.describe()}")
    cls = cls_v.cls
    if not issubclass(_type_of(subject), cls):
        f.push(ConstantValue(None))
        return
    names = list(as_constant(names_v)[1])
    n_pos = inst.arg
    out: list[Value] = []
    if n_pos:
        match_args = getattr(cls, "__match_args__", None)
        if match_args is None:
            if n_pos > 1 or cls not in _SELF_MATCHING:
                raise Unsupported(f"{cls.__name__}() accepts 0 positional sub-patterns")
            out.append(subject)                       # int(x), str(x)...: the subject itself
        else:
            names = list(match_args[:n_pos]) + names
    for name in names:
        try:
            out.append(load_attr(f.tx, subject, name))
        except AttrMissing:
            f.push(ConstantValue(None))
            return
    f.push(TupleValue(out))


_SELF_MATCHING = (bool, bytearray, bytes, dict, float, frozenset, int, list, set, str, tuple)
