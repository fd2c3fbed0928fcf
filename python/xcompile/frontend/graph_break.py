"""Graph breaks: a frame the interpreter cannot capture whole is split where it stopped.

    capture(frame, fullgraph) -> WholeFrame | BrokenFrame | EagerFrame

1. Trace the frame. No ``Unsupported``: ``WholeFrame`` (one graph).
2. ``Unsupported`` at top-frame instruction ``i`` (a break inside an inlined call stops the
   top frame at its CALL): with ``fullgraph=True`` or ``error_on_graph_break`` on, that is the
   user's error (re-raised with reason, hint and user stack). Otherwise the break is recorded
   and logged (``XCOMPILE_LOGS=graph_breaks``).
3. Trace again from the start and stop just before instruction ``i`` (the interpreter is
   deterministic), so the stack, locals and graph are exactly the prefix's.
4. ``BrokenFrame``: the prefix graph, whose outputs are the tensors still live, and the plan
   of the replacement code (``codegen.RunnerBuilder``): run the graph, rebuild the stack and
   locals, run instruction ``i`` eagerly, call the resume function(s) (``resume.py``).
5. Where the frame cannot continue after ``i`` (inside a loop, a ``try`` block, an
   instruction the runner cannot run, a value it cannot rebuild): ``EagerFrame``, the frame
   runs eagerly and the frames it calls are still compiled.
"""
from __future__ import annotations

import inspect
import types

import torch

from .. import log
from ..bytecode.analysis import active_handlers, handler_kind
from ..bytecode.instr import disassemble
from ..guards.shape_expr import UnsupportedShapeExpr
from . import (
    handlers,  # noqa: F401  (every opcode family registers its handlers)
    hub,
    implementations,  # noqa: F401  (every value module fills the hub)
)
from .break_log import BreakRecord, complete, report_break
from .break_plan import RunnerPlan
from .capture import BrokenFrame, CapturedGraph, EagerFrame, FrameState, WholeFrame
from .exc import Unsupported
from .frame_hooks import pending_stop
from .output import OutputBuilder
from .resume import CannotResume, classify
from .shapes import ShapePolicy
from .tracer import Frame, Tracer
from .tracing_rules import error_on_graph_break_now
from .values import Value

_NOT_PLAIN = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR | inspect.CO_ITERABLE_COROUTINE


class _Stop(Exception):
    def __init__(self, steps: int, index: int, error: Unsupported):
        super().__init__(error.reason)
        self.steps, self.index, self.error = steps, index, error


def _run_top(frame: Frame, stop_after: int | None = None) -> None:
    """Run the top frame (to the end, or for ``stop_after`` instructions)."""
    steps, at = 0, frame.ip
    tx = frame.tx
    try:
        while not frame.done:
            if steps == stop_after:
                return
            at = frame.ip
            tx.top_step = (steps, at)
            frame.step()
            steps += 1
    except Unsupported as e:
        e.user_stack.insert(0, frame.user_frame())
        where = pending_stop(tx)
        if where is not None and where < (steps, at):
            raise _Stop(*where, _hook_kept(e)) from None
        raise _Stop(steps, at, e) from None
    where = pending_stop(tx)
    if where is not None and stop_after is None:
        raise _Stop(*where, _hook_kept(None)) from None


def _hook_kept(cause: Unsupported | None) -> Unsupported:
    e = Unsupported("a forward hook registered in the compiled frame is still registered where the "
                    "graph ends" + (f" ({cause.reason})" if cause is not None else " (the frame returns)"),
                    "Remove the hook (handle.remove()) before the frame returns, or register it outside "
                    "the compiled region.",
                    "The registering call runs eagerly, so the hook stays on the module as in eager.")
    if cause is not None:
        e.user_stack = list(cause.user_stack)
    return e


def _whole(tracer: Tracer, result: Value) -> CapturedGraph:
    out = OutputBuilder(tracer)
    spec = out.spec(result)
    initial_grad, final_grad = torch.is_grad_enabled(), tracer.gb.grad_enabled
    if final_grad != initial_grad:                    # the graph leaves grad mode as it found it
        hub.switch_grad_mode(tracer, initial_grad)
    gm = tracer.gb.finish(out.outputs)
    return CapturedGraph(gm=gm, example_inputs=list(tracer.gb.example_inputs),
                         input_sources=list(tracer.gb.input_sources), output=spec,
                         guards=tracer.build_guards(), passthrough_sources=out.passthrough,
                         side_effects=out.effects,
                         grad_mode_after=final_grad if final_grad != initial_grad else None)


def _new_tracer(fs: FrameState, fullgraph: bool, shapes: ShapePolicy) -> Tracer:
    return Tracer(fs, fullgraph=fullgraph, shapes=shapes)


def capture(fs: FrameState, *, fullgraph: bool = False, dynamic: bool | None = None
            ) -> WholeFrame | BrokenFrame | EagerFrame:
    """Trace one frame; split it at the first graph break (see the module docstring).
    ``dynamic``: compile()'s argument (None: automatic dynamic; frontend/shapes.py). A shape
    relation the C++ guards cannot express traces the frame again with static shapes."""
    try:
        return _capture(fs, fullgraph, dynamic)
    except UnsupportedShapeExpr as e:
        if dynamic is False:
            raise
        log.log("dynamic", "%s: %s; compiling it with static shapes", fs.code.co_name, e)
        return _capture(fs, fullgraph, False)


def _capture(fs: FrameState, fullgraph: bool, dynamic: bool | None) -> WholeFrame | BrokenFrame | EagerFrame:
    if fs.code.co_flags & _NOT_PLAIN:
        e = Unsupported(f"compiling generator or coroutine {fs.code.co_name}",
                        "Compile the code that consumes the generator instead.")
        if fullgraph:
            raise e
        return EagerFrame(BreakRecord.of(e), "generator or coroutine frame")
    shapes = ShapePolicy(fs.code, dynamic)
    tracer = _new_tracer(fs, fullgraph, shapes)
    frame = tracer.top_frame()
    try:
        _run_top(frame)
        assert frame.result is not None
        return WholeFrame(_whole(tracer, frame.result))
    except _Stop as s:
        stop, err, flag = s, s.error, error_on_graph_break_now(tracer)
    except Unsupported as e:                   # the return value cannot leave the graph
        e.user_stack.insert(0, frame.user_frame())
        if fullgraph or error_on_graph_break_now(tracer):
            raise complete(e)
        record = BreakRecord.of(e)
        record.resumed = False
        report_break(record)
        return EagerFrame(record, "the return value cannot be rebuilt")
    if fullgraph or (flag and not err.never_an_error):
        raise complete(err)
    record = BreakRecord.of(err)
    try:
        broken = _split(fs, stop, record, shapes)
    except (CannotResume, Unsupported) as why:
        # (Unsupported: the code before the break leaves state the runner cannot rebuild, a
        # function stored into an outside object: the whole frame runs eagerly instead)
        reason = why.args[0] if isinstance(why, CannotResume) and why.args else \
            getattr(why, "reason", None) or str(why).splitlines()[0]
        record.resumed = False
        if reason:
            record.explanation = (record.explanation + " " if record.explanation else "") + \
                f"(The frame runs eagerly: {reason}.)"
        report_break(record)
        return EagerFrame(record, str(reason))
    report_break(record)
    return broken


def _in_loop(instrs, index: int) -> bool:
    return any(ins.target is not None and ins.target <= index < ins.index for ins in instrs)


def _check_handlers(code: types.CodeType, index: int) -> None:
    instrs = disassemble(code)
    for entry in active_handlers(instrs, index):
        kind = handler_kind(instrs, entry)
        if kind not in ("with", "cleanup"):
            raise CannotResume(f"the break is inside a {kind!r} block")


def _split(fs: FrameState, stop: _Stop, record: BreakRecord, shapes: ShapePolicy) -> BrokenFrame:
    code = fs.code
    tracer = _new_tracer(fs, False, shapes)
    frame = tracer.top_frame()
    try:
        _run_top(frame, stop_after=stop.steps)
    except _Stop as again:                     # pragma: no cover - the interpreter is deterministic
        raise CannotResume(f"tracing the prefix again failed: {again.error.reason}") from None
    if frame.ip != stop.index or frame.done:
        raise CannotResume("tracing the prefix again stopped somewhere else")  # pragma: no cover
    instrs = tracer.decoded(code)
    inst = instrs[stop.index]
    if _in_loop(instrs, stop.index):
        raise CannotResume("the break is inside a loop")
    kind = classify(code, stop.index, inst.opname, inst.arg, inst.target, frame.kw_names)
    _check_handlers(code, stop.index)
    return RunnerPlan(tracer, frame, kind, record).build()


__all__ = ["BreakRecord", "BrokenFrame", "EagerFrame", "WholeFrame", "capture"]
