"""The replacement code of a frame with a graph break, planned from the traced prefix: the graph's
outputs, the side effects to apply, the stack and locals rebuilt, the breaking instruction run
eagerly, the resume call(s) (``codegen.RunnerBuilder`` writes it; ``graph_break.capture`` asks
for it once the prefix is traced again up to the break).
"""
from __future__ import annotations

import sys
import types

import torch

from .. import _C
from ..bytecode.versions import facts_for
from ..effects import value_parts
from .break_log import BreakRecord
from .calls import split_callable, switch_grad_mode
from .capture import BrokenFrame, CapturedGraph, Seq, out
from .codegen import RunnerBuilder
from .marks import torch_disabled
from .output import OutputBuilder
from .resume import BreakKind, CannotResume, resume_code, stub_code
from .tracer import Frame, Tracer
from .values import ConstantValue, ContextExitValue, GradModeValue, NullValue, Value, real_object

FACTS = facts_for(sys.version_info[:2])


def _built_ids(steps) -> set[int]:
    """Ids of the values an EffectPlan builds (the spec format of effects.py): the replacement
    code takes those objects from the plan instead of building them a second time."""
    ids: set[int] = set()

    def walk(spec) -> None:
        key = getattr(spec, "key", None)
        if key is not None:
            ids.add(key)
        for p in value_parts(spec):
            walk(p)

    for step in steps:
        walk(step)
    return ids


class RunnerPlan:
    """Builds the replacement code for one break (see codegen.py for its shape)."""

    def __init__(self, tracer: Tracer, frame: Frame, kind: BreakKind, record: BreakRecord):
        self.tx, self.frame, self.kind, self.record = tracer, frame, kind, record
        self.b = RunnerBuilder(tracer, frame)
        code = frame.code
        for i, name in enumerate(code.co_freevars):     # the frame's own closure cells
            cell = frame.cells.get(name)
            if cell is not None:
                self.b.bind(cell, f"closure[{i}]")

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
                                 output=Seq("tuple", [out(i) for i in range(len(b.outputs))]),
                                 guards=tx.build_guards())

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
            if opname in ("CALL", "CALL_KW"):
                first, second, *args = operands
                kw = frame.kw_names
                if opname == "CALL_KW":             # 3.13: the names are the top operand
                    names = args.pop()
                    if not isinstance(names, ConstantValue):
                        raise CannotResume("CALL_KW without a constant tuple of keyword names")
                    kw = tuple(names.value)
                callee, pos = split_callable(first, second, args)
                kwargs = dict(zip(kw, pos[len(pos) - len(kw):])) if kw else {}
                if kw:
                    pos = pos[:len(pos) - len(kw)]
                if not pos and not kwargs and real_object(callee) is super:
                    pos = _super_args(frame)      # zero-argument super() needs the frame's cell
                parts = [b.expr(a) for a in pos] + [f"{k}={b.expr(a)}" for k, a in kwargs.items()]
                line = f"result = {self._callee(callee)}({', '.join(parts)})"
            else:
                null, fn, *rest = operands
                if FACTS.null_above_callable:        # 3.13: [callable, NULL, args, kwargs?]
                    fn, null = null, fn
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
        stub_fn = b.const(types.FunctionType(stub, self.tx.frame_state.f_globals), "stub")
        stub_args = [b.expr(v) for v in operands if not isinstance(v, NullValue)]
        line = f"result = {stub_fn}({', '.join(stub_args)})"
        if kind.kind == "method":                  # [NULL, method] ([method, NULL] on 3.13)
            pair = ["result[0]", NullValue()] if FACTS.null_above_callable else [NullValue(), "result[0]"]
            return [line], [below + pair]
        return [line], [below + [f"result[{k}]" for k in range(kind.pushes)]]

    def _callee(self, callee: Value) -> str:
        """A function torch excludes from compilation (``torch._disable_dynamo``: checkpoint's
        reentrant form, ``Optimizer.zero_grad``; ``torch.compiler.disable``) runs with compilation
        off for everything it calls, as under torch.compile (a checkpointed function compiled in
        the forward and recomputed eagerly in the backward saved different tensors)."""
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


def _super_args(frame: Frame) -> list[Value]:
    """``super()``'s implicit arguments in ``frame``: its ``__class__`` cell and first argument."""
    cell = frame.cells.get("__class__")
    first = frame.code.co_varnames[0] if frame.code.co_argcount else None
    self_v = frame.locals.get(first) if first else None
    if self_v is None and first in frame.cells:
        self_v = frame.cells[first].contents
    if cell is None or cell.contents is None or self_v is None or isinstance(self_v, NullValue):
        raise CannotResume("a graph break at a zero-argument super() whose arguments are not known")
    return [cell.contents, self_v]


__all__ = ["RunnerPlan"]
