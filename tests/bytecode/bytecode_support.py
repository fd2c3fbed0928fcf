"""Helpers shared by the bytecode tests. Import this module before ``xcompile.bytecode``.

The bytecode toolkit does not need torch, and these tests run under CPython 3.11 (pytest)
and 3.12 (``run_plain.py``, where neither torch nor pytest is installed). When the real
``xcompile`` package cannot be imported, a bare package object pointing at
``python/xcompile`` stands in for it so that ``xcompile.bytecode.*`` imports directly.
"""
from __future__ import annotations

import contextlib
import copy
import sys
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _ensure_importable() -> None:
    try:
        import xcompile.bytecode.instr  # noqa: F401
        return
    except Exception:  # no torch, extension not built, ...  # noqa: BLE001  (whatever the program under test raises)
        pass
    for name in [k for k in sys.modules if k == "xcompile" or k.startswith("xcompile.")]:
        del sys.modules[name]
    pkg = types.ModuleType("xcompile")
    pkg.__path__ = [str(ROOT / "python" / "xcompile")]
    sys.modules["xcompile"] = pkg


_ensure_importable()

import emit_helper as emit  # noqa: E402

from xcompile.bytecode import opcodes as op  # noqa: E402
from xcompile.bytecode.assemble import assemble  # noqa: E402
from xcompile.bytecode.edit import insert_before  # noqa: E402
from xcompile.bytecode.instr import create, disassemble  # noqa: E402
from xcompile.bytecode.resume import resume_target_index  # noqa: E402

NULL = object()   # stands for a NULL stack slot in snapshots


@contextlib.contextmanager
def raises(exc_type, match: str | None = None):
    """pytest.raises for plain-script runs."""
    try:
        yield
    except exc_type as e:
        if match is not None and match not in str(e):
            raise AssertionError(f"{exc_type.__name__} raised, but {match!r} not in {str(e)!r}")
        return
    raise AssertionError(f"{exc_type.__name__} not raised")


def outcome(fn, args=(), kwargs=None):
    """('ok', value) or ('raise', type name, message): what a call did."""
    try:
        return ("ok", fn(*args, **(kwargs or {})))
    except Exception as e:  # noqa: BLE001 - the exception is the outcome
        return ("raise", type(e).__name__, str(e))


def with_code(fn: types.FunctionType, code: types.CodeType) -> types.FunctionType:
    new = types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    new.__kwdefaults__ = fn.__kwdefaults__
    return new


def nested_codes(code: types.CodeType):
    yield code
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            yield from nested_codes(c)


def roundtrip_deep(code: types.CodeType) -> types.CodeType:
    """assemble(disassemble(c)) applied to ``code`` and every code object nested in it."""
    consts = tuple(roundtrip_deep(c) if isinstance(c, types.CodeType) else c for c in code.co_consts)
    instrs = disassemble(code)
    for ins in instrs:
        if ins.opname in op.HAS_CONST and isinstance(ins.argval, types.CodeType):
            ins.argval = consts[code.co_consts.index(ins.argval)]
    return assemble(instrs, template=code, co_consts=consts)


class _OpcodeTracer:
    """sys.settrace with opcode events for frames running ``code``: calls ``on_op(frame)``."""

    def __init__(self, code: types.CodeType, on_op) -> None:
        self.code, self.on_op = code, on_op

    def __call__(self, frame, event, arg):
        if frame.f_code is not self.code:
            return None
        frame.f_trace_opcodes = True
        if event == "opcode":
            self.on_op(frame)
        return self

    def run(self, fn, args, kwargs):
        old = sys.gettrace()
        sys.settrace(self)
        try:
            return outcome(fn, args, kwargs)
        finally:
            sys.settrace(old)


def first_visit_locals(fn, args, kwargs) -> dict[int, dict | None]:
    """Run ``fn`` under opcode tracing; a deep copy of the frame's locals the first time each
    offset ran (the run goes on and may mutate them), or None where they cannot be copied."""
    seen: dict[int, dict | None] = {}

    def on_op(frame):
        if frame.f_lasti not in seen:
            try:
                seen[frame.f_lasti] = copy.deepcopy(dict(frame.f_locals))
            except Exception:  # noqa: BLE001 - e.g. a live generator
                seen[frame.f_lasti] = None

    _OpcodeTracer(fn.__code__, on_op).run(fn, args, kwargs)
    return seen


def snapshot_before(fn: types.FunctionType, index: int, depth: int, args, kwargs):
    """Stack, locals and cells just before ``disassemble(fn.__code__)[index]`` first runs.

    A copy of the code stores the ``depth`` stack values into fresh locals, the cells into a
    tuple, and returns; opcode tracing reads the frame's locals at that return. Returns None
    when the instruction is not reached, else ``(stack, locals, cells)`` with ``NULL`` for NULL
    stack slots and cells keyed by cell-variable name.
    """
    code = fn.__code__
    instrs = disassemble(code)
    index = resume_target_index(instrs, index)   # not between KW_NAMES and its CALL
    grab = [create("STORE_FAST", 0, f"__snap_s{p}") for p in reversed(range(depth))]
    grab += [emit.load_closure(c) for c in code.co_cellvars]
    grab += [create("BUILD_TUPLE", len(code.co_cellvars)), create("STORE_FAST", 0, "__snap_cells")]
    ret = create("RETURN_VALUE")
    grab += [create("LOAD_CONST", None, None), ret]
    instrs = insert_before(instrs, index, grab, inherit_handler=False)
    spy = with_code(fn, assemble(instrs, template=code))
    box: list[dict] = []

    def on_op(frame):
        if frame.f_lasti == ret.offset and not box:
            box.append(dict(frame.f_locals))

    tracer = _OpcodeTracer(spy.__code__, on_op)
    tracer.run(spy, args, kwargs)
    if not box:
        return None
    seen = box[0]
    stack = [seen.get(f"__snap_s{p}", NULL) for p in range(depth)]
    cells = dict(zip(code.co_cellvars, seen["__snap_cells"]))
    local_values = {k: v for k, v in seen.items() if not k.startswith("__snap_")}
    return stack, local_values, cells
