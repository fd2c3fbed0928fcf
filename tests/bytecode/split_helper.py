"""Graph-break mechanics without a graph: hand a running frame over to a resume function.

``split_code(code, i)`` returns a copy of ``code`` in which reaching instruction ``i``
stores the stack, makes the resume function for ``i`` (sharing this frame's cells) and
returns what it returns:

    <original instructions, unchanged, up to wherever control goes>
    at i:  STORE_FAST __split_s{k-1} ... __split_s0      (the stack, top first)
           PUSH_NULL; <MAKE_FUNCTION resume code, closure = this frame's cells>  (3.13: NULL after)
           LOAD_FAST <arguments in ResumeCode.arg_sources order>
           CALL; RETURN_VALUE

This is the shape of the frame the graph-break codegen emits (there, the prefix is a call
of the compiled graph instead of the original instructions), and running it for every
instruction of many functions is the end-to-end test of the resume machinery.
"""
from __future__ import annotations

import types

import emit_helper as emit

from xcompile.bytecode.analysis import MAYBE, SAVED, analyze_stack, argument_names, bound_locals
from xcompile.bytecode.assemble import assemble
from xcompile.bytecode.edit import insert_before
from xcompile.bytecode.instr import disassemble
from xcompile.bytecode.resume import ResumeCode, ResumeError, make_resume_code, resume_target_index


def split_code(code: types.CodeType, index: int) -> tuple[types.CodeType, ResumeCode]:
    """``code`` handing over to its resume function at instruction ``index``.

    Raises ``ResumeError`` where the resume function cannot start, where a stack slot may or
    may not be NULL, or where a live local is bound on some paths only (the frontend knows
    both at run time; this static version does not). Locals unbound on every path are not
    passed.
    """
    instrs = disassemble(code)
    info = analyze_stack(instrs)
    stack = info.before[index]
    if stack is not None and any(k in (MAYBE, SAVED) for k in stack):
        raise ResumeError("a stack slot may or may not be NULL here")
    args = argument_names(code)
    surely = bound_locals(instrs, args, info)[index] or frozenset()
    maybe = bound_locals(instrs, args, info, must=False)[index] or frozenset()
    rc = make_resume_code(code, index, unbound=set(code.co_varnames) - maybe)
    unknown = [n for n in rc.local_args if n not in surely]
    if unknown:
        raise ResumeError(f"locals {unknown} may be unbound here")
    k = len(stack or ())
    handoff = [emit.store_fast(f"__split_s{p}") for p in reversed(range(k))]
    handoff += emit.with_null(emit.make_function(rc.code, rc.freevars))
    handoff += [emit.load_fast(f"__split_s{v}" if kind == "stack" else v) for kind, v in rc.arg_sources]
    handoff += emit.call(len(rc.arg_sources)) + [emit.return_value()]
    at = resume_target_index(instrs, index)
    return assemble(insert_before(instrs, at, handoff, inherit_handler=False), template=code), rc
