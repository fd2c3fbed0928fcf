"""Opcode handlers: jumps, loops, returns, `with` blocks, generators, raise."""
from __future__ import annotations

import sys

from ...bytecode.instructions import Instr
from ...bytecode.versions import facts_for
from .. import hub
from ..exc import Unsupported
from ..generators import ITERATORS, iter_next
from ..iteration import get_iter
from ..pyops import truth
from ..tracer import Frame, handler
from ..values import (
    ConstantValue,
    ContextExitValue,
    GeneratorValue,
    GradModeValue,
    NoOpContextValue,
)

_FACTS = facts_for(sys.version_info[:2])


@handler("RETURN_VALUE")
def return_value(f: Frame, inst: Instr) -> None:
    f.finish(f.pop())


@handler("RETURN_CONST")
def return_const(f: Frame, inst: Instr) -> None:
    f.finish(ConstantValue(inst.argval))


@handler("JUMP_FORWARD", "JUMP_BACKWARD", "JUMP")
def jump(f: Frame, inst: Instr) -> None:
    f.jump(inst.jump_target)


@handler("POP_JUMP_IF_FALSE")
def pop_jump_if_false(f: Frame, inst: Instr) -> None:
    if not truth(f.tx, f.pop()):
        f.jump(inst.jump_target)


@handler("POP_JUMP_IF_TRUE")
def pop_jump_if_true(f: Frame, inst: Instr) -> None:
    if truth(f.tx, f.pop()):
        f.jump(inst.jump_target)


def _is_none(v) -> bool:
    return isinstance(v, ConstantValue) and v.value is None


@handler("POP_JUMP_IF_NONE")
def pop_jump_if_none(f: Frame, inst: Instr) -> None:
    if _is_none(f.pop()):
        f.jump(inst.jump_target)


@handler("POP_JUMP_IF_NOT_NONE")
def pop_jump_if_not_none(f: Frame, inst: Instr) -> None:
    if not _is_none(f.pop()):
        f.jump(inst.jump_target)


@handler("JUMP_IF_FALSE_OR_POP")
def jump_if_false_or_pop(f: Frame, inst: Instr) -> None:
    if not truth(f.tx, f.peek()):
        f.jump(inst.jump_target)
    else:
        f.pop()


@handler("JUMP_IF_TRUE_OR_POP")
def jump_if_true_or_pop(f: Frame, inst: Instr) -> None:
    if truth(f.tx, f.peek()):
        f.jump(inst.jump_target)
    else:
        f.pop()


# -- loops ------------------------------------------------------------------------------------------------
@handler("GET_ITER")
def get_iter_op(f: Frame, inst: Instr) -> None:
    f.push(get_iter(f.tx, f.pop()))


@handler("FOR_ITER")
def for_iter(f: Frame, inst: Instr) -> None:
    it = f.peek()
    if not isinstance(it, ITERATORS):         # e.g. a real iterator given to a resume function
        raise Unsupported(f"iterating over {it.describe()}",
                          "Iterators made outside the traced code cannot be traced without consuming them.")
    item = iter_next(f.tx, it)
    if item is not None:
        f.push(item)
    else:
        f.pop()
        f.jump(inst.jump_target + _FACTS.for_iter_skip)   # past END_FOR (3.12) and its POP_TOP (3.13)


@handler("END_FOR")
def end_for(f: Frame, inst: Instr) -> None:
    f.popn(_FACTS.end_for_pops)


# -- with blocks --------------------------------------------------------------------------------------------
@handler("BEFORE_WITH")
def before_with(f: Frame, inst: Instr) -> None:
    ctx = f.pop()
    if isinstance(ctx, GradModeValue):
        if ctx.prev is None:                  # no_grad() / enable_grad(): switch on enter
            ctx.exit_to = f.tx.gb.grad_enabled
            hub.switch_grad_mode(f.tx, ctx.enabled)
        else:                                 # set_grad_enabled(b): switched at the call already
            ctx.exit_to = ctx.prev
    elif type(ctx) in hub.CONTEXT_VALUES:
        hub.CONTEXT_VALUES[type(ctx)][0](f.tx, ctx)
    elif not isinstance(ctx, NoOpContextValue):      # user classes, @contextmanager, autocast
        ctx, entered = hub.enter_context(f.tx, ctx)
        f.ctx_stack.append(ctx)
        f.stack.append(ContextExitValue(ctx))
        f.push(entered)
        return
    f.ctx_stack.append(ctx)
    f.stack.append(ContextExitValue(ctx))
    f.push(ConstantValue(None))


# -- generators (run to exhaustion when called: see Tracer.inline_call) -----------------------------------
@handler("RETURN_GENERATOR")
def return_generator(f: Frame, inst: Instr) -> None:
    f.push(ConstantValue(None))               # the value the first resume sends (popped next)


@handler("YIELD_VALUE")
def yield_value(f: Frame, inst: Instr) -> None:
    if f.yields is None:
        raise Unsupported("yield outside a generator")
    f.yields.append(f.pop())
    f.push(ConstantValue(None))               # what `yield` evaluates to


@handler("GET_YIELD_FROM_ITER")
def get_yield_from_iter(f: Frame, inst: Instr) -> None:
    f.push(get_iter(f.tx, f.pop()))


@handler("SEND")
def send(f: Frame, inst: Instr) -> None:
    """`yield from`: each SEND hands out the sub-iterator's next item (sent values are None)."""
    f.pop()                                   # the sent value (always None here)
    it = f.peek()
    if not isinstance(it, ITERATORS):
        raise Unsupported(f"yield from {it.describe()}")
    item = iter_next(f.tx, it)
    if item is not None:
        f.push(item)
        return
    if not _FACTS.send_keeps_receiver:
        f.pop()
    result = it.result if isinstance(it, GeneratorValue) else None
    f.push(result if result is not None else ConstantValue(None))   # the sub-iterator's return value
    f.jump(inst.jump_target)


@handler("END_SEND")
def end_send(f: Frame, inst: Instr) -> None:
    v = f.pop()
    f.pop()
    f.push(v)


# raise, try/except/finally and `with` exits on an exception: frontend/exceptions.py
