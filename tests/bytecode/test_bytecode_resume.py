"""Resume functions built at every reachable instruction give the original's result.

For each corpus function and each instruction index where a resume function may start:
run a copy of the function that stops just before that instruction and hands back the stack,
the locals (read through ``sys.settrace`` opcode tracing) and the cell objects; call the
resume function with them; compare its outcome with a fresh run of the original.
"""
from __future__ import annotations

import types

import bytecode_corpus as corpus
import bytecode_support as S
from bytecode_support import NULL, outcome, raises

from xcompile.bytecode import opcodes as op
from xcompile.bytecode.analysis import analyze_stack, liveness
from xcompile.bytecode.instr import disassemble
from xcompile.bytecode.resume import ResumeError, check_resume_point, make_resume_code, resume_function


def _resume_outcome(fn, rc, stack, local_values, cells):
    all_cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()))
    all_cells.update(cells)
    f = rc.make_function(fn.__globals__, all_cells)
    return outcome(f, rc.args(stack, local_values))


def _check_function(fn, make_args, *, cells: str = "closure", step: int = 1) -> tuple[int, list[str]]:
    code = fn.__code__
    instrs = disassemble(code)
    info = analyze_stack(instrs)
    live = liveness(instrs)
    args, kwargs = make_args()
    expected = outcome(fn, args, kwargs)
    checked, failures = 0, []
    for i in range(0, len(instrs), step):
        if check_resume_point(code, i) is not None:
            continue
        depth = info.depth(i)
        args, kwargs = make_args()
        snap = S.snapshot_before(fn, i, depth, args, kwargs)
        if snap is None:
            continue     # not reached with these inputs
        stack, local_values, cell_objs = snap
        nulls = [p for p, v in enumerate(stack) if v is NULL]
        unbound = [n for n in live[i] if n not in local_values]
        where = f"{fn.__qualname__} @{i} {instrs[i].opname} (line {instrs[i].lineno}, stack {depth})"
        try:
            rc = make_resume_code(code, i, null_positions=nulls, unbound=unbound, cells=cells)
            got = _resume_outcome(fn, rc, stack, local_values, cell_objs if cells == "closure" else {})
        except Exception as e:  # noqa: BLE001 - reported below with the place
            failures.append(f"{where}: {type(e).__name__}: {e}")
            continue
        checked += 1
        if got != expected:
            failures.append(f"{where}: got {got!r}, expected {expected!r}")
    return checked, failures


def test_resume_at_every_reached_instruction():
    total, failures = 0, []
    for fn, make_args in corpus.CASES:
        n, bad = _check_function(fn, make_args)
        assert n > 0, f"no resume point of {fn.__qualname__} was checked"
        total += n
        failures += bad
    assert not failures, f"{len(failures)} of {total} resume points wrong:\n" + "\n".join(failures[:30])
    assert total > 1000


def test_resume_in_a_function_that_needs_extended_args():
    big = corpus.make_big_function(n_locals=260, n_branch=12)
    assert len(big.__code__.co_varnames) > 256 and len(big.__code__.co_consts) > 256
    n, bad = _check_function(big, lambda: ((True, [2, 0, 1]), {}), step=61)
    assert n > 15 and not bad, bad[:10]


def test_resume_with_cell_values_where_no_closure_escapes():
    # "values" mode copies cell contents: right for these (no closure made before the point
    # is used after it, or no cells at all)
    for fn, make_args in [(corpus.straight, lambda: ((1, 2), {})),
                          (corpus.loop_break_continue, lambda: ((9,), {})),
                          (corpus.comprehensions, lambda: (([3, 1, 2],), {}))]:
        n, bad = _check_function(fn, make_args, cells="values")
        assert n > 10 and not bad, bad[:10]


def test_values_mode_loses_cell_identity_and_closure_mode_keeps_it():
    fn = corpus.closures
    code = fn.__code__
    instrs = disassemble(code)
    # the point right after `b = b * 10`: `inner` already holds the cell of b
    line = next(x.lineno for x in instrs if x.opname == "STORE_FAST" and x.argval == "first")
    i = next(k for k, x in enumerate(instrs) if x.lineno == line)
    assert analyze_stack(instrs).depth(i) == 0
    stack, local_values, cells = S.snapshot_before(fn, i, 0, (4,), {})
    expected = fn(4)
    rc = make_resume_code(code, i, cells="closure")
    assert set(rc.freevars) == {"a", "b"}
    assert _resume_outcome(fn, rc, stack, local_values, cells) == ("ok", expected)
    rc_values = make_resume_code(code, i, cells="values")
    assert rc_values.freevars == ()
    got = _resume_outcome(fn, rc_values, stack, local_values, {})
    assert got != ("ok", expected)     # documents why "closure" is the default


def test_empty_stack_points_from_a_plain_trace():
    # Independent of the instrumented copy: locals come from tracing the unmodified function.
    checked = 0
    for fn, make_args in corpus.CASES:
        code = fn.__code__
        if code.co_cellvars:
            continue
        instrs = disassemble(code)
        info = analyze_stack(instrs)
        live = liveness(instrs)
        args, kwargs = make_args()
        expected = outcome(fn, args, kwargs)
        args, kwargs = make_args()
        seen = S.first_visit_locals(fn, args, kwargs)
        for i, ins in enumerate(instrs):
            if info.depth(i) != 0 or ins.offset not in seen or check_resume_point(code, i):
                continue
            local_values = seen[ins.offset]
            if local_values is None:
                continue     # locals that cannot be copied
            unbound = [n for n in live[i] if n not in local_values]
            rc, f = resume_function(fn, i, unbound=unbound, cells="values")
            assert outcome(f, rc.args((), local_values)) == expected, (fn.__qualname__, i)
            checked += 1
    assert checked > 100


def test_resume_code_shape():
    fn = corpus.nested_calls
    instrs = disassemble(fn.__code__)
    info = analyze_stack(instrs)
    # the CALL of abs(): below it the NULL + max, a, NULL + min, b, NULL + abs
    i = next(k for k, x in enumerate(instrs) if x.opname == "BINARY_OP")
    rc = make_resume_code(fn.__code__, i)
    assert rc.name == f"xcompile_resume_in_nested_calls_at_{instrs[i].lineno}"
    assert rc.code.co_qualname == rc.name
    assert rc.stack_depth == info.depth(i)
    names = rc.code.co_varnames[:rc.code.co_argcount]
    if op.FACTS.null_above_callable:    # 3.13: the NULL above each callable
        assert rc.null_positions == (1, 4, 7)
        assert names == ("__stack0", "__stack2", "__stack3", "__stack5", "__stack6", "__stack8",
                         "__stack9", "a", "b")
        assert rc.arg_sources[0] == ("stack", 0) and rc.arg_sources[-1] == ("local", "b")
    else:
        assert rc.null_positions == (0, 3, 6)
        assert names == ("__stack1", "__stack2", "__stack4", "__stack5", "__stack7", "__stack8",
                         "__stack9", "a", "b")
        assert rc.arg_sources[0] == ("stack", 1) and rc.arg_sources[-1] == ("local", "b")
    assert rc.code.co_flags & 0x4 == 0


def test_rejected_points():
    code = corpus.try_except.__code__
    instrs = disassemble(code)
    handler = next(k for k, x in enumerate(instrs) if x.opname == "PUSH_EXC_INFO")
    with raises(ResumeError, "exception handler"):
        make_resume_code(code, handler)
    with raises(ResumeError, "exception handler"):
        make_resume_code(code, handler + 2)
    with raises(ResumeError, "prologue"):
        make_resume_code(code, 0)
    with raises(ResumeError, "generator"):
        make_resume_code(corpus.gen_squares.__code__, 5)
    # inside the try body is fine
    body = next(k for k, x in enumerate(instrs) if x.exn_entry is not None
                and not check_resume_point(code, k))
    make_resume_code(code, body)
    # a maybe-NULL slot (method load) needs the caller's decision
    mc = corpus.method_calls.__code__
    minstrs = disassemble(mc)
    k = next(j for j, x in enumerate(minstrs) if x.opname == "LOAD_CONST" and x.argval == "A")
    with raises(ResumeError, "may or may not be NULL"):
        make_resume_code(mc, k)
    with raises(ResumeError, "never NULL"):
        make_resume_code(mc, k, null_positions=[0])


def test_resume_for_closure_function_uses_its_cells():
    fn = corpus.closure_fn
    assert fn.__code__.co_freevars == ("k",)
    instrs = disassemble(fn.__code__)
    i = next(k for k, x in enumerate(instrs) if x.opname == "FOR_ITER")
    rc, f = resume_function(fn, i)
    assert rc.freevars == ("k",)
    assert isinstance(f, types.FunctionType)
    # resume in the loop with an iterator that has 2 of the 3 values left
    assert f(*rc.args([iter([2, 3])], {"total": 10, "xs": None})) == 10 + 5 * 5


def test_rejected_points_specific_to_312():
    code = corpus.comprehensions.__code__
    instrs = disassemble(code)
    reasons = {check_resume_point(code, i) for i in range(len(instrs))}
    if "END_FOR" in {x.opname for x in instrs}:
        assert "END_FOR never runs (FOR_ITER jumps past it)" in reasons
        # `[lambda: x for x in ...]` makes x a cell whose slot the other comprehensions borrow
        assert any(r and "cell variable(s) ['x']" in r for r in reasons)
    else:
        assert not any(r and ("END_FOR" in r or "cell variable" in r) for r in reasons)
