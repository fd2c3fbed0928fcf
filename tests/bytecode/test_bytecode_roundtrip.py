"""assemble(disassemble(code)) reproduces CPython's own bytes, and edited code runs right."""
from __future__ import annotations

import dis
import importlib.util
import math
import types

import bytecode_corpus as corpus
import bytecode_support as S
from bytecode_support import outcome, raises, roundtrip_deep, with_code

from xcompile.bytecode import opcodes as op
from xcompile.bytecode.assemble import AssemblyError, assemble
from xcompile.bytecode.edit import change_arguments, insert_before, insert_prefix, replace_range
from xcompile.bytecode.instr import clone, create, disassemble, format_instructions, parse_exception_table

STDLIB = ["json.decoder", "dis", "inspect", "collections", "typing", "argparse", "ast", "pathlib",
          "enum", "functools", "tokenize", "difflib", "contextlib", "dataclasses", "tarfile"]
FIELDS = ("co_code", "co_exceptiontable", "co_linetable", "co_stacksize", "co_consts", "co_names",
          "co_varnames", "co_cellvars", "co_freevars", "co_nlocals")


def _source_code(module: str) -> types.CodeType:
    path = importlib.util.find_spec(module).origin
    with open(path, encoding="utf-8") as f:
        return compile(f.read(), path, "exec")


def test_stdlib_roundtrip_is_byte_identical():
    n, diffs = 0, []
    for module in STDLIB:
        for code in S.nested_codes(_source_code(module)):
            new = assemble(disassemble(code), template=code)
            n += 1
            for f in FIELDS:
                if getattr(new, f) != getattr(code, f):
                    diffs.append(f"{module}:{code.co_name}:{code.co_firstlineno} {f}")
    assert n > 1500
    assert not diffs, diffs[:20]


def _plain(instrs):
    """dis's instructions with 3.13's super-instructions as the two plain ones they stand for
    (what ``disassemble`` reads them as)."""
    for d in instrs:
        pair = op.SUPER_SPLIT.get(d.opname)
        if pair is None:
            yield d
            continue
        for name, arg, val in zip(pair, (d.arg >> 4, d.arg & 15), d.argval):
            yield d._replace(opname=name, opcode=op.OPMAP[name], arg=arg, argval=val)


def test_disassemble_agrees_with_dis():
    n = 0
    for module in STDLIB[:6]:
        for code in S.nested_codes(_source_code(module)):
            theirs = list(_plain(d for d in dis.get_instructions(code) if d.opname != "EXTENDED_ARG"))
            mine = disassemble(code)
            assert len(mine) == len(theirs)
            for m, d in zip(mine, theirs):
                n += 1
                assert (m.offset, m.opname, m.arg) == (d.offset, d.opname, d.arg)
                assert (m.positions or dis.Positions()) == d.positions
                if m.target is not None:     # dis names the target's EXTENDED_ARG prefix, if any
                    assert m.target.offset == d.argval or code.co_code[d.argval] == op.EXTENDED_ARG
                elif d.opcode in dis.hasconst:
                    assert m.argval is code.co_consts[d.arg]
                elif d.opcode in dis.hasname or d.opcode in dis.haslocal or d.opcode in dis.hasfree \
                        or d.opname == "COMPARE_OP":
                    assert m.argval == d.argval, (m, d)
    assert n > 20000


def _run_generator(gen):
    out = []
    try:
        out.append(next(gen))
        out.append(gen.send(3))
        out.append(gen.send(4))
        out.append(gen.send(None))
    except StopIteration as e:
        out.append(("stop", e.value))
    return out


def _run_coroutine(c):
    try:
        c.send(None)
    except StopIteration as e:
        return e.value
    raise AssertionError("coroutine suspended")


def test_corpus_runs_the_same_after_roundtrip():
    for fn, make_args in corpus.CASES:
        new = with_code(fn, roundtrip_deep(fn.__code__))
        args, kwargs = make_args()
        expected = outcome(fn, args, kwargs)
        args, kwargs = make_args()
        assert outcome(new, args, kwargs) == expected, fn.__qualname__
    gen = with_code(corpus.gen_squares, roundtrip_deep(corpus.gen_squares.__code__))
    assert list(gen(4)) == list(corpus.gen_squares(4)) == [0, 1, 4, 9, 0, 1]
    send = with_code(corpus.gen_with_send, roundtrip_deep(corpus.gen_with_send.__code__))
    assert _run_generator(send()) == _run_generator(corpus.gen_with_send()) == [0, 3, 7, ("stop", 7)]
    coro = with_code(corpus.coro, roundtrip_deep(corpus.coro.__code__))
    assert _run_coroutine(coro([1, 2])) == _run_coroutine(corpus.coro([1, 2])) == [2, 4]


def test_extended_arg_roundtrip_and_run():
    big = corpus.make_big_function()
    code = big.__code__
    raw_ops = [code.co_code[k] for k in range(0, len(code.co_code), 2)]
    assert op.EXTENDED_ARG in raw_ops
    assert max(parse_exception_table(code), key=lambda r: r[0])[0] > 2 * 4096   # multi-byte varints
    new = assemble(disassemble(code), template=code)
    for f in FIELDS:
        assert getattr(new, f) == getattr(code, f), f
    for args in [(True, [1, 2, 0, 3]), (False, [5, 0])]:
        assert outcome(with_code(big, new), args) == outcome(big, args)


def test_growing_jumps_get_extended_args():
    fn = corpus.loop_break_continue
    instrs = disassemble(fn.__code__)
    # pad the loop body with 300 NOPs: every jump across it needs EXTENDED_ARG now
    k = next(i for i, x in enumerate(instrs) if x.opname == "FOR_ITER") + 1
    padded = instrs[:k + 1] + [create("NOP") for _ in range(300)] + instrs[k + 1:]
    new = assemble(padded, template=fn.__code__)
    assert new.co_code.count(bytes((op.EXTENDED_ARG,))) > 0
    assert outcome(with_code(fn, new), (12,)) == outcome(fn, (12,))
    # lines survive: the real instructions keep their lines
    before = [(x.opname, x.lineno) for x in disassemble(fn.__code__)]
    after = [(x.opname, x.lineno) for x in disassemble(new) if x.opname != "NOP"]
    assert before == after


def _raise_site(fn, *args):
    """(line relative to the def, exception argument) of the ValueError ``fn`` raises."""
    try:
        fn(*args)
    except ValueError as e:
        tb = e.__traceback__
        while tb.tb_next:
            tb = tb.tb_next
        return tb.tb_lineno - fn.__code__.co_firstlineno, e.args[0]
    raise AssertionError("no ValueError")


def test_insert_prefix_and_traceback_lines():
    def f(a):
        b = a * 2
        raise ValueError(b)

    instrs = insert_prefix(disassemble(f.__code__),
                           [create("LOAD_CONST", None, 21), create("STORE_FAST", None, "a")])
    g = with_code(f, assemble(instrs, template=f.__code__))
    assert _raise_site(f, 1) == (2, 2)
    assert _raise_site(g, 1) == (2, 42)    # the prefix ran; the raise keeps its line


def test_replace_range_and_insert_before_retarget():
    def f(xs):
        t = 0
        for x in xs:
            t = t + x
        return t

    instrs = disassemble(f.__code__)
    k = next(i for i, x in enumerate(instrs) if x.opname == "BINARY_OP")
    mul = create("BINARY_OP", 5)   # NB_MULTIPLY
    assert op.OPNAME[mul.opcode] == "BINARY_OP"
    edited = replace_range(instrs, k, k + 1, [mul])
    g = with_code(f, assemble(edited, template=f.__code__))
    assert g([1, 2, 3]) == 0 and f([1, 2, 3]) == 6
    # insert before the loop head: the back edge now runs the new code every iteration
    instrs = disassemble(f.__code__)
    head = next(i for i, x in enumerate(instrs) if x.opname == "FOR_ITER")
    bump = [create("LOAD_FAST", None, "t"), create("LOAD_CONST", None, 100), create("BINARY_OP", 0),
            create("STORE_FAST", None, "t")]
    edited = insert_before(instrs, head, bump)
    g = with_code(f, assemble(edited, template=f.__code__))
    assert g([1, 2, 3]) == 6 + 400
    edited = insert_before(disassemble(f.__code__), head, clone(bump), redirect=False)
    g = with_code(f, assemble(edited, template=f.__code__))
    assert g([1, 2, 3]) == 6 + 100


def _call(n: int) -> list:
    return ([create("PRECALL", n)] if "PRECALL" in op.OPMAP else []) + [create("CALL", n)]


def test_built_code_with_generic_jumps_new_names_and_constants():
    def template(n):
        i = 0
        return i

    # i = 0; do { i = i + 1 } while (i < n); return (len((i,)), i, False, -0.0)
    loop = create("LOAD_FAST", None, "i")
    instrs = [create("RESUME", 0), create("LOAD_CONST", None, 0), create("STORE_FAST", None, "i"),
              loop, create("LOAD_CONST", None, 1), create("BINARY_OP", 0), create("STORE_FAST", None, "i"),
              create("LOAD_FAST", None, "i"), create("LOAD_FAST", None, "n"),
              create("COMPARE_OP", argval="<"), create("POP_JUMP_IF_TRUE", target=loop)]
    skip = create("NOP")
    instrs += [create("JUMP", target=skip), create("LOAD_CONST", None, "dead"), create("RETURN_VALUE"), skip]
    instrs += [create("LOAD_GLOBAL", 1, "len"), create("LOAD_FAST", None, "i"), create("BUILD_TUPLE", 1)]
    instrs += _call(1)
    instrs += [create("LOAD_FAST", None, "i"), create("LOAD_CONST", None, False),
               create("LOAD_CONST", None, -0.0), create("BUILD_TUPLE", 4), create("RETURN_VALUE")]
    code = assemble(instrs, template=template.__code__)
    assert "len" in code.co_names and "dead" in code.co_consts
    g = with_code(template, code)
    for n in (0, 1, 5):
        length, i, false, zero = g(n)
        assert (length, i) == (1, max(n, 1))
        assert false is False and math.copysign(1, zero) == -1
    names = [x.opname for x in disassemble(code)]
    if op.VERSION == (3, 11):
        assert "POP_JUMP_BACKWARD_IF_TRUE" in names
    else:   # no backward conditional jump in 3.12: negated jump over a JUMP_BACKWARD
        assert "POP_JUMP_IF_FALSE" in names and "JUMP_BACKWARD" in names


def test_assembly_errors():
    def f(x):
        return x

    instrs = disassemble(f.__code__)
    stray = create("JUMP", target=create("NOP"))
    with raises(AssemblyError, "not in the list"):
        assemble(instrs[:-1] + [stray] + instrs[-1:], template=f.__code__)
    with raises(AssemblyError, "not a cell or free variable"):
        assemble(instrs[:1] + [create("LOAD_DEREF", None, "nope")] + instrs[1:], template=f.__code__)
    with raises(AssemblyError, "stack"):
        assemble(instrs[:1] + [create("POP_TOP")] + instrs[1:], template=f.__code__)
    with raises(ValueError, "needs a target"):
        create("JUMP_FORWARD")
    with raises(ValueError, "unknown opcode"):
        create("NOT_AN_OPCODE")
    listing = format_instructions(instrs)
    assert "RETURN_VALUE" in listing and "LOAD_FAST" in listing


def test_change_arguments():
    def f(a, b):
        return a - b

    g = with_code(f, change_arguments(disassemble(f.__code__), template=f.__code__, argnames=("b", "a"),
                                      name="swapped"))
    assert g(1, 10) == 9 and g.__code__.co_name == g.__code__.co_qualname == "swapped"
    def pair(a, b):
        return a, b

    code = pair.__code__
    v = with_code(pair, change_arguments(disassemble(code), template=code, argnames=("a",), varargs="b"))
    assert v(1, 2, 3) == (1, (2, 3))
    assert v.__code__.co_flags & op.CO_VARARGS and v.__code__.co_argcount == 1
    kw = with_code(pair, change_arguments(disassemble(code), template=code, argnames=(), kwonly=("a",),
                                          varkwargs="b"))
    assert kw(a=1, x=2) == (1, {"x": 2}) and kw.__code__.co_kwonlyargcount == 1

    def outer(a):
        def h():
            return a * 3
        return h()

    code = outer.__code__
    assert code.co_cellvars == ("a",)
    # the cell variable becomes a free variable: the caller supplies the cell
    free = change_arguments(disassemble(code), template=code, argnames=(), cellvars=(), freevars=("a",))
    cell = types.CellType(7)
    fn = types.FunctionType(free, outer.__globals__, "outer", None, (cell,))
    assert fn() == 21
    with raises(ValueError, "also free variables"):
        change_arguments(disassemble(code), template=code, argnames=("a",), cellvars=(), freevars=("a",))


def test_index_parity_with_interpreter_decoder():
    # the symbolic interpreter's decoder (instructions.py) drops the same units, so list
    # indices agree; skip if that module is not there
    try:
        from xcompile.bytecode.instructions import decode
    except ImportError:
        return
    for fn, _ in corpus.CASES:
        mine = disassemble(fn.__code__)
        theirs = decode(fn.__code__)
        assert [x.offset for x in mine] == [x.offset for x in theirs], fn.__qualname__


def _swap_then_add(a, b):
    a, b = b, a
    c = a + b
    return c - a


def test_super_instructions_split_and_fuse_back():
    """3.13 reads LOAD_FAST_LOAD_FAST & co. as two plain instructions and fuses them again when
    they still fit (slots under 16, nothing jumping between); otherwise two plain ones run."""
    code = _swap_then_add.__code__
    instrs = disassemble(code)
    raw = {d.opname for d in dis.get_instructions(code)}
    assert not set(op.SUPER_SPLIT) & {x.opname for x in instrs}
    if not op.SUPER_SPLIT:
        return
    assert set(op.SUPER_SPLIT) & raw
    new = assemble(instrs, template=code)
    assert new.co_code == code.co_code
    # 20 new leading arguments push every local past slot 15: no fusing, the same behaviour
    pad = [f"p{k}" for k in range(20)]
    wide = change_arguments(disassemble(code), template=code, argnames=pad + ["a", "b"])
    assert not set(op.SUPER_SPLIT) & {d.opname for d in dis.get_instructions(wide)}
    fn = types.FunctionType(wide, {})
    assert fn(*range(20), 3, 10) == _swap_then_add(3, 10) == 3


def _hot_loop(n):
    s = 0
    for i in range(n):
        s += i
    return s


def test_hot_code_reads_without_executors():
    """A loop hot enough for CPython 3.13's tier-2 optimizer gets ENTER_EXECUTOR in its
    adaptive code; co_code (what the decoders read) never shows it."""
    for _ in range(50):
        _hot_loop(2000)
    code = _hot_loop.__code__
    assert "ENTER_EXECUTOR" not in {x.opname for x in disassemble(code)}
    assert assemble(disassemble(code), template=code).co_code == code.co_code
