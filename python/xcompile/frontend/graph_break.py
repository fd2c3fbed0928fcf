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
import traceback
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from .. import log
from . import handlers  # noqa: F401  (every opcode family registers its handlers)
from .capture import CapturedGraph, FrameState
from .codegen import RunnerBuilder
from .exc import Unsupported
from .frame_hooks import pending_stop
from .output import OutputBuilder
from .resume import BreakKind, CannotResume, classify, resume_code, stub_code
from .tracer import Frame, Tracer
from .tracing_rules import error_on_graph_break_now
from .values import ContextExitValue, GradModeValue, NullValue, Value

_NOT_PLAIN = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR | inspect.CO_ITERABLE_COROUTINE


# -- what a break looks like to users ---------------------------------------------------------------------
@dataclass
class BreakRecord:
    """One graph break: reason, explanation, hint and the user's stack (outermost first)."""

    reason: str
    explanation: str | None
    hint: str | None
    user_stack: list[traceback.FrameSummary]
    resumed: bool = True            # False: the frame runs eagerly from its start

    @classmethod
    def of(cls, e: Unsupported) -> BreakRecord:
        _complete(e)
        return cls(e.reason, e.explanation, e.hint, list(e.user_stack))

    @property
    def where(self) -> str:
        if not self.user_stack:
            return "<unknown>"
        fs = self.user_stack[-1]
        return f"{fs.filename}:{fs.lineno}"

    def key(self) -> tuple:
        return (self.where, self.reason)

    def details(self) -> str:
        lines = [f"Graph Break Reason: {self.reason}"]
        if self.explanation:
            lines.append(f"  Explanation: {self.explanation}")
        if self.hint:
            lines.append(f"  Hint: {self.hint}")
        return "\n".join(lines)

    def stack_text(self) -> str:
        return "".join(traceback.format_list(self.user_stack)).rstrip("\n")

    def log_text(self, duplicate: bool) -> str:
        if duplicate:
            return (f"Graph break (user stack suppressed due to duplicate graph break) in user code at "
                    f"{self.where}\n{self.details()}\n")
        return (f"Graph break in user code at {self.where}\n{self.details()}\n"
                f"User code traceback:\n{self.stack_text()}\n")


# Explanations for breaks whose Unsupported carries none: (reason prefix, explanation).
_EXPLANATIONS = [
    ("call to builtin print", ("print() writes output, a side effect a graph cannot hold; it runs in the "
                               "normal interpreter between the graphs.")),
    ("call to logging", ("Logging writes output, a side effect a graph cannot hold; it runs in the normal "
                         "interpreter between the graphs.")),
    ("Tensor.item()", "The Python number depends on the tensor's data, which is not known while tracing."),
    ("Tensor.tolist()", "The Python list depends on the tensor's data, which is not known while tracing."),
    ("unsupported bytecode", "The interpreter has no rule for this instruction yet."),
    ("call to builtin", ("The callable is implemented in C or has side effects the interpreter cannot "
                         "trace; it runs in the normal interpreter.")),
    ("calling builtin", ("The callable is implemented in C (an extension other than PyTorch's operators); "
                         "the interpreter cannot see what it does.")),
]
_DEFAULT_EXPLANATION = ("The interpreter cannot put this in a graph: the graph ends before it, it runs in "
                        "the normal interpreter, and the rest of the function is compiled on its own.")


_DEFAULT_HINT = ("Move it out of the compiled function, or mark the function that contains it with "
                 "xcompile.disable / allow_in_graph / nonstrict_trace.")


def explain_reason(reason: str) -> str:
    for prefix, text in _EXPLANATIONS:
        if reason.startswith(prefix):
            return text
    return _DEFAULT_EXPLANATION


def _complete(e: Unsupported) -> Unsupported:
    """Every break (and every fullgraph error) names a reason, an explanation and a hint."""
    if not e.explanation:
        e.explanation = explain_reason(e.reason)
    if not e.hint:
        e.hint = _DEFAULT_HINT
    return e


_seen_breaks: set[tuple] = set()


def report_break(record: BreakRecord) -> None:
    key = record.key()
    duplicate = key in _seen_breaks
    _seen_breaks.add(key)
    log.log("graph_breaks", "%s", record.log_text(duplicate))
    for o in log.observers():
        o.on_break(record)


def reset_break_log() -> None:
    _seen_breaks.clear()


# -- results ------------------------------------------------------------------------------------------------
@dataclass
class WholeFrame:
    captured: CapturedGraph


@dataclass
class EagerFrame:
    record: BreakRecord
    why: str


@dataclass
class BrokenFrame:
    """The prefix graph and the replacement code that continues after the break."""

    captured: CapturedGraph
    record: BreakRecord
    has_graph: bool
    _finish: Callable[[Any], types.FunctionType] = field(repr=False)
    source_text: str = ""

    def make_runner(self, compiled_graph) -> types.FunctionType:
        """The function the C++ cache entry calls with the frame's arguments (and closure)."""
        return self._finish(compiled_graph)


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
        from .calls import switch_grad_mode
        switch_grad_mode(tracer, initial_grad)
    gm = tracer.gb.finish(out.outputs)
    return CapturedGraph(gm=gm, example_inputs=list(tracer.gb.example_inputs),
                         input_sources=list(tracer.gb.input_sources), output=spec,
                         guards=tracer.guards.build(), passthrough_sources=out.passthrough,
                         side_effects=out.effects,
                         grad_mode_after=final_grad if final_grad != initial_grad else None)


def _new_tracer(fs: FrameState, fullgraph: bool) -> Tracer:
    from .. import config
    tracer = Tracer(fs, fullgraph=fullgraph)
    tracer.eogb_stack = [bool(config.error_on_graph_break)]
    return tracer


def capture(fs: FrameState, *, fullgraph: bool = False) -> WholeFrame | BrokenFrame | EagerFrame:
    """Trace one frame; split it at the first graph break (see the module docstring)."""
    if fs.code.co_flags & _NOT_PLAIN:
        e = Unsupported(f"compiling generator or coroutine {fs.code.co_name}",
                        "Compile the code that consumes the generator instead.")
        if fullgraph:
            raise e
        return EagerFrame(BreakRecord.of(e), "generator or coroutine frame")
    tracer = _new_tracer(fs, fullgraph)
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
            raise _complete(e)
        record = BreakRecord.of(e)
        record.resumed = False
        report_break(record)
        return EagerFrame(record, "the return value cannot be rebuilt")
    if fullgraph or (flag and not getattr(err, "never_an_error", False)):
        raise _complete(err)
    record = BreakRecord.of(err)
    try:
        broken = _split(fs, stop, record)
    except CannotResume as why:
        record.resumed = False
        if why.args:
            record.explanation = (record.explanation + " " if record.explanation else "") + \
                f"(The frame runs eagerly: {why.args[0]}.)"
        report_break(record)
        return EagerFrame(record, str(why))
    report_break(record)
    return broken


def _built_ids(steps) -> set[int]:
    """Ids of the values an EffectPlan builds (side_effects.py spec format): the replacement code
    takes those objects from the plan instead of building them a second time."""
    ids: set[int] = set()

    def walk(spec) -> None:
        if not isinstance(spec, tuple) or not spec:
            return
        kind = spec[0]
        if kind in ("tuple", "list", "set"):
            ids.add(spec[1])
            for p in spec[2]:
                walk(p)
        elif kind == "namedtuple" or kind == "dict":
            ids.add(spec[1])
            for p in spec[3]:
                walk(p)
        elif kind == "object":
            ids.add(spec[1])
            for p in spec[3].values():
                walk(p)
            for p in (spec[4][2] if len(spec) > 4 and spec[4] is not None else ()):
                walk(p)

    for step in steps:
        kind = step[0]
        parts = {"list": step[2] if kind == "list" else (), "dict": step[3] if kind == "dict" else (),
                 "set_ops": [p for _, p in step[2]] if kind == "set_ops" else (),
                 "attrs": [p for _, p in step[2]] if kind == "attrs" else (),
                 "global": [step[3]] if kind == "global" else (), "cell": [step[2]] if kind == "cell" else ()}
        for p in parts.get(kind, ()):
            if p is not None:
                walk(p)
    return ids


def _in_loop(instrs, index: int) -> bool:
    return any(ins.target is not None and ins.target <= index < ins.index for ins in instrs)


def _check_handlers(code: types.CodeType, index: int) -> None:
    from ..bytecode.analysis import active_handlers, handler_kind
    from ..bytecode.instr import disassemble
    instrs = disassemble(code)
    for entry in active_handlers(instrs, index):
        kind = handler_kind(instrs, entry)
        if kind not in ("with", "cleanup"):
            raise CannotResume(f"the break is inside a {kind!r} block")


def _split(fs: FrameState, stop: _Stop, record: BreakRecord) -> BrokenFrame:
    code = fs.code
    tracer = _new_tracer(fs, False)
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
    return _Plan(tracer, frame, kind, record).build()


class _Plan:
    """Builds the replacement code for one break (see codegen.py for its shape)."""

    def __init__(self, tracer: Tracer, frame: Frame, kind: BreakKind, record: BreakRecord):
        self.tx, self.frame, self.kind, self.record = tracer, frame, kind, record
        self.b = RunnerBuilder(tracer, frame)
        code = frame.code
        for i, name in enumerate(code.co_freevars):     # the frame's own closure cells
            cell = frame.cells.get(name)
            if cell is not None:
                self.b._memo[id(cell)] = f"closure[{i}]"

    def build(self) -> BrokenFrame:
        tx, frame, kind, b = self.tx, self.frame, self.kind, self.b
        effect_lines = self._side_effects()
        # blocks handed in by the caller's runner that ended inside the graph: dropped from their
        # holders, so no handler exits them again
        effect_lines += [f"{b.load(src)}.discard()" for src in dict.fromkeys(tx.exited_holders)]
        initial_grad = torch.is_grad_enabled()
        final_grad = tx.gb.grad_enabled
        stack = list(frame.stack)
        below, operands = stack[:len(stack) - kind.pops], stack[len(stack) - kind.pops:]
        for v in below:                                   # outer `with` blocks are entered first
            if not isinstance(v, NullValue):
                b.expr(v)
        mode = initial_grad
        for v in below:                                   # contexts the runner enters again
            if isinstance(v, ContextExitValue) and isinstance(v.ctx, GradModeValue) and v.source is None:
                mode = v.ctx.enabled
        action, after = self._action(operands, below)
        tails = self._resumes(after)
        if mode != final_grad:
            b.emit(f"torch._C._set_grad_enabled({final_grad})")
        body = action + tails        # inside `with` blocks: held by their exits (RunnerBuilder.render)
        if tx.gb.grad_enabled != initial_grad:            # the graph leaves grad mode as it found it
            from .calls import switch_grad_mode
            switch_grad_mode(tx, initial_grad)
        gm = tx.gb.finish(b.outputs)
        has_graph = any(n.op in ("call_function", "call_method", "call_module")
                        and n.target is not torch._C._set_grad_enabled for n in gm.graph.nodes)
        inputs = [b.source(s) for s in tx.gb.input_sources]
        graph_call = f"graph({', '.join(inputs)})" if has_graph else None
        if effect_lines and not has_graph:
            effect_lines.insert(0, "outs = ()")
        text = b.render(body, graph_call, effect_lines)
        captured = CapturedGraph(gm=gm, example_inputs=list(tx.gb.example_inputs),
                                 input_sources=list(tx.gb.input_sources),
                                 output=("tuple", [("out", i) for i in range(len(b.outputs))]),
                                 guards=tx.guards.build())

        def finish(compiled):
            b.ns["graph"] = compiled
            return b.build(text)

        return BrokenFrame(captured, self.record, has_graph, finish, text)

    def _side_effects(self) -> list[str]:
        """Mutations of outside state the prefix recorded (side_effects.py): applied right after
        the graph, before anything else runs. Their tensors are the graph's first outputs."""
        out = OutputBuilder(self.tx)
        plan = out.effects
        if plan is None:
            return []
        for t in out.outputs:
            self.b.tensor_output(t)
        objects = [self.b.source(s) for s in out.passthrough[:plan.n_objects]]
        self.b.ns["effects"] = plan
        self.b.built_by_effects = _built_ids(plan.steps)
        return ["built = {}",
                f"effects.apply(outs, ({''.join(o + ', ' for o in objects)}), built)"]

    # -- the breaking instruction ------------------------------------------------------------------------
    def _action(self, operands: list[Value], below: list[Value]) -> tuple[list[str], list]:
        """Lines that run the breaking instruction, and the stack after it (values, NULLs and
        result expressions) for each resume point."""
        kind, b, frame = self.kind, self.b, self.frame
        if kind.kind == "call":
            opname = self.tx.decoded(frame.code)[kind.index].opname
            if opname == "CALL":
                first, second, *args = operands
                if isinstance(first, NullValue):
                    callee, pos = second, args
                else:
                    callee, pos = first, [second, *args]
                kw = frame.kw_names
                kwargs = dict(zip(kw, pos[len(pos) - len(kw):])) if kw else {}
                if kw:
                    pos = pos[:len(pos) - len(kw)]
                parts = [b.expr(a) for a in pos] + [f"{k}={b.expr(a)}" for k, a in kwargs.items()]
                line = f"result = {self._callee(callee)}({', '.join(parts)})"
            else:
                null, fn, *rest = operands
                if not isinstance(null, NullValue):
                    raise CannotResume("CALL_FUNCTION_EX without a NULL below the callable")
                star = f"*{b.expr(rest[0])}"
                starstar = f", **{b.expr(rest[1])}" if len(rest) > 1 else ""
                line = f"result = {b.expr(fn)}({star}{starstar})"
            return [line], [below + ["result"]]
        if kind.kind == "branch":
            cond = operands[0]
            lines = [f"cond = bool({b.expr(cond)})"]
            return lines, [below + ([cond] if keep else []) for keep in kind.keep_condition_on]
        nulls = tuple(p for p, v in enumerate(operands) if isinstance(v, NullValue))
        stub = stub_code(frame.code, kind.index, nulls, len(operands), kind.pushes)
        fn = b.const(types.FunctionType(stub, self.tx.frame_state.f_globals), "stub")
        args = [b.expr(v) for v in operands if not isinstance(v, NullValue)]
        line = f"result = {fn}({', '.join(args)})"
        if kind.kind == "method":
            return [line], [below + [NullValue(), "result[0]"]]
        return [line], [below + [f"result[{k}]" for k in range(kind.pushes)]]

    def _callee(self, callee: Value) -> str:
        """A function torch excludes from compilation (``torch._disable_dynamo``: checkpoint's
        reentrant form, ``Optimizer.zero_grad``; ``torch.compiler.disable``) runs with compilation
        off for everything it calls, as under torch.compile (a checkpointed function compiled in
        the forward and recomputed eagerly in the backward saved different tensors)."""
        from .. import _C
        from .tracing_rules import torch_disabled
        from .values import real_object
        obj = real_object(callee)
        if obj is not None and torch_disabled(obj):
            return self.b.const(_C.untraced(obj), "untraced")
        return self.b.expr(callee)

    # -- the resume calls ---------------------------------------------------------------------------------
    def _resumes(self, afters: list[list]) -> list[str]:
        calls = [self._resume_call(j, after) for j, after in zip(self.kind.resume_at, afters)]
        if len(calls) == 1:
            return [f"return {calls[0]}"]
        return ["if cond:", f"    return {calls[0]}", f"return {calls[1]}"]

    def _resume_call(self, index: int, after: list) -> str:
        frame, b, code = self.frame, self.b, self.frame.code
        nulls = frozenset(p for p, v in enumerate(after) if isinstance(v, NullValue))
        bound = {n for n, v in frame.locals.items() if not isinstance(v, NullValue)}
        unbound = frozenset(n for n in code.co_varnames if n not in bound and n not in code.co_cellvars)
        rc = resume_code(code, index, nulls, unbound)
        args = []
        for kind, x in rc.arg_sources:
            if kind == "stack":
                item = after[x]
                args.append(item if isinstance(item, str) else b.expr(item))
            else:
                args.append(b.expr(frame.locals[x]))
        if rc.freevars:
            cells = []
            for name in rc.freevars:
                if name in code.co_freevars:
                    cells.append(f"closure[{code.co_freevars.index(name)}]")
                else:
                    cells.append(b.cell(frame.cells[name]))
            fn = f"make_function({b.const(rc.code, 'resume_code')}, G, None, ({''.join(c + ', ' for c in cells)}))"
        else:
            fn = b.const(types.FunctionType(rc.code, self.tx.frame_state.f_globals), "resume")
        return f"{fn}({', '.join(args)})"


__all__ = ["BreakRecord", "BrokenFrame", "EagerFrame", "WholeFrame", "capture", "report_break"]
