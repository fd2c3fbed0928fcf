"""Stack kinds and depths, liveness, exception context and jump targets."""
from __future__ import annotations

import dis

import bytecode_corpus as corpus
import bytecode_support as S
from bytecode_support import raises

from xcompile.bytecode import opcodes as op
from xcompile.bytecode.analysis import (
    _SPECIAL,
    EXC,
    MAYBE,
    NULL,
    SAVED,
    StackAnalysisError,
    V,
    active_handlers,
    analyze_stack,
    argument_names,
    borrowed_slots,
    bound_locals,
    handler_kind,
    in_handler,
    is_jump_target,
    jump_targets,
    liveness,
    max_stack_depth,
    pops_pushes,
    stack_depths,
)
from xcompile.bytecode.instr import Instruction, create, disassemble


def _at(fn, opname, argval=None, nth=0):
    instrs = disassemble(fn.__code__)
    hits = [i for i, x in enumerate(instrs) if x.opname == opname and (argval is None or x.argval == argval)]
    return instrs, hits[nth]


def test_null_and_method_slots():
    def f(x):
        return print(len(x))

    instrs, i = _at(f, "LOAD_FAST", "x")
    above = op.FACTS.null_above_callable          # 3.13: [callable, NULL] instead of [NULL, callable]
    assert analyze_stack(instrs).before[i] == ((V, NULL, V, NULL) if above else (NULL, V, NULL, V))

    def g(xs):
        xs.append(1)

    instrs, i = _at(g, "LOAD_CONST", 1)
    assert analyze_stack(instrs).before[i] == ((V, MAYBE) if above else (MAYBE, V))

    def h(a, b):
        return a < b < 3      # COPY / SWAP keep kinds straight

    instrs = disassemble(h.__code__)
    assert max(len(s) for s in analyze_stack(instrs).before if s is not None) <= h.__code__.co_stacksize


def test_max_depth_matches_cpython_on_the_corpus():
    for fn, _ in corpus.CASES:
        for code in S.nested_codes(fn.__code__):
            assert max_stack_depth(disassemble(code)) == code.co_stacksize, code.co_qualname
    for g in (corpus.gen_squares, corpus.gen_with_send, corpus.coro):
        assert max_stack_depth(disassemble(g.__code__)) == g.__code__.co_stacksize


def test_special_effects_agree_with_dis_on_net_effect():
    for name in _SPECIAL:
        if name in ("RETURN_GENERATOR", "PRECALL", "CALL"):
            continue     # checked below: they deliberately differ from the compiler's split
        for arg in (0, 1, 2, 3):
            ins = Instruction(name, op.OPMAP[name], arg if op.has_arg(name) else None, "x")
            pops, pushes = pops_pushes(ins, False)
            assert len(pushes) - pops == dis.stack_effect(ins.opcode, ins.arg), (name, arg)
    for argc in (0, 2):
        call = create("CALL", argc)
        net = len(pops_pushes(call, False)[1]) - pops_pushes(call, False)[0]
        compiler = dis.stack_effect(call.opcode, argc)
        if "PRECALL" in op.OPMAP:
            compiler += dis.stack_effect(op.OPMAP["PRECALL"], argc)
        assert net == compiler


def test_inconsistent_stack_is_reported():
    def f(x):
        return x

    instrs = disassemble(f.__code__)
    ret = instrs[-1]
    bad = instrs[:-2] + [create("LOAD_CONST", None, 1), create("POP_JUMP_IF_TRUE", target=ret),
                         create("LOAD_CONST", None, 2), create("LOAD_CONST", None, 3)] + instrs[-2:]
    with raises(StackAnalysisError, "stack depth"):
        analyze_stack(bad)
    assert stack_depths(instrs) == [0, 0, 1]


def test_liveness():
    def f(a, b, c):
        d = a + 1
        if b:
            return d
        e = 5
        for i in range(c):
            e = e + i
        return e

    instrs = disassemble(f.__code__)
    live = liveness(instrs)
    start = next(i for i, x in enumerate(instrs) if x.opname == "LOAD_FAST" and x.argval == "a")
    assert live[start] == {"a", "b", "c"}
    store_d = next(i for i, x in enumerate(instrs) if x.opname == "STORE_FAST" and x.argval == "d")
    assert live[store_d + 1] == {"b", "c", "d"}
    head = next(i for i, x in enumerate(instrs) if x.opname == "FOR_ITER")
    assert live[head] == {"e"}          # e is read next iteration or after the loop; c is dead
    ret = len(instrs) - 1
    assert live[ret] == set()


def test_liveness_follows_exception_edges_and_deletes():
    def f(a):
        x = 1
        try:
            a = a + 1
            x = 2
        except TypeError:
            return x
        del a
        return x

    instrs = disassemble(f.__code__)
    live = liveness(instrs)
    k = next(i for i, x in enumerate(instrs) if x.opname == "STORE_FAST" and x.argval == "x" and
             x.exn_entry is not None)
    assert "x" in live[k]               # the handler may still read the old x
    d = next(i for i, x in enumerate(instrs) if x.opname == "DELETE_FAST")
    assert "a" in live[d]               # deleting checks that a is bound


def test_handlers_and_their_kinds():
    instrs, i = _at(corpus.try_except, "BINARY_OP")      # 10 // x, inside the try body
    info = analyze_stack(instrs)
    handlers = active_handlers(instrs, i)
    assert handlers and handler_kind(instrs, handlers[0]) == "except"
    assert not in_handler(instrs, i, info)
    h = next(k for k, x in enumerate(instrs) if x.opname == "LOAD_CONST" and x.argval == "type")
    assert in_handler(instrs, h, info) and EXC in info.before[h]
    assert handler_kind(instrs, active_handlers(instrs, h)[0]) == "cleanup"

    instrs, i = _at(corpus.with_blocks, "LOAD_FAST", "b")
    kinds = [handler_kind(instrs, e) for e in active_handlers(instrs, i)]
    assert kinds[0] == "with" and kinds.count("with") >= 2   # nested with blocks

    instrs, i = _at(corpus.try_finally_return, "LOAD_CONST", "after")
    assert handler_kind(instrs, active_handlers(instrs, i)[0]) == "finally"


def test_jump_targets():
    instrs = disassemble(corpus.while_branches.__code__)
    targets = jump_targets(instrs)
    assert targets and all(is_jump_target(instrs, t) for t in targets)
    assert not is_jump_target(instrs, 0)
    instrs, i = _at(corpus.try_except, "PUSH_EXC_INFO")
    assert is_jump_target(instrs, i) and i not in jump_targets(instrs)   # a handler entry only


def test_borrowed_slots_of_inlined_comprehensions():
    def f(xs):
        return [x * 2 for x in xs], [lambda: y for y in xs]

    instrs = disassemble(f.__code__)
    borrowed = borrowed_slots(instrs)
    info = analyze_stack(instrs)
    if op.VERSION == (3, 11):
        assert not any(borrowed)        # comprehensions are functions of their own
        return
    k = next(i for i, x in enumerate(instrs) if x.opname == "BINARY_OP")
    assert borrowed[k] == {"x"}
    m = next(i for i, x in enumerate(instrs) if x.opname == "MAKE_FUNCTION")
    assert borrowed[m] == {"y"} and SAVED in info.before[m]
    assert borrowed[len(instrs) - 1] == set() or instrs[-1].opname != "RETURN_VALUE"


def test_bound_locals_must_and_may():
    def f(a, flag):
        if flag:
            b = 1  # noqa: F841
        c = 2
        del a
        return c

    instrs = disassemble(f.__code__)
    args = argument_names(f.__code__)
    assert args == ("a", "flag")
    must = bound_locals(instrs, args)
    may = bound_locals(instrs, args, must=False)
    k = next(i for i, x in enumerate(instrs) if x.opname == "STORE_FAST" and x.argval == "c")
    assert must[k] == {"a", "flag"} and may[k] == {"a", "flag", "b"}
    r = len(instrs) - 1
    assert "a" not in must[r] and "a" not in may[r] and "c" in must[r]
