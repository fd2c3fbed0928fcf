"""Loop IR and the ops protocol.

A lowered graph is a ``KernelGraph``: named ``Buffer``s (graph inputs, computed buffers,
outputs of extern ATen calls) and a topologically ordered list of nodes.  A ``LoopNode``
computes one buffer (two for a Welford reduction) over an iteration space: ``ranges`` for
pointwise nodes, ``ranges`` x ``rranges`` for reductions.  Its ``body`` is a plain Python
function of an ops handler and sympy index expressions::

    def body(ops, idx):                       # pointwise
        return ops.add(ops.load("arg0", idx), ops.constant(1.0, torch.float32))

    def body(ops, idx, ridx):                 # reduction: the value to reduce
        return ops.load("buf1", [idx[0], ridx[0]])

``ops`` is passed explicitly (no global handler).  Replaying a body into different handlers
is how everything downstream works: ``ReadRecorder`` collects what a node reads, ``InlineOps``
substitutes a producer's body for a load of its buffer, ``PrintOps`` renders the IR, and the
C++ and Triton emitters turn the same calls into source code.

Loads and stores index a buffer by its *own* dimensions (a list of sympy expressions, one per
dim); the emitters apply the buffer's layout (strides, offset).  Index variables are
non-negative integer sympy symbols ``x0, x1, ...`` (iteration) and ``r0, r1, ...`` (reduction).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Sequence, TypeAlias

import sympy
import torch

from .index import index_var
from .sizes import is_symbolic, sym

Expr: TypeAlias = sympy.Expr


# -- layouts and buffers ---------------------------------------------------------------------------

def contiguous_strides(size: Sequence) -> tuple:
    strides: list = []
    acc: Any = 1
    for s in reversed(size):
        strides.append(acc)
        acc = acc * s if is_symbolic(s) else acc * max(int(s), 1)   # a size symbol is >= 2
    return tuple(reversed(strides))


def same_strides(size: Sequence[int], a: Sequence[int] | None, b: Sequence[int] | None) -> bool:
    """Strides ``a`` and ``b`` address the same elements of a tensor of ``size``: the stride
    of a size-1 dim is never multiplied by anything but 0, and an empty tensor has no elements."""
    if a is None or b is None or len(a) != len(size) or len(b) != len(size):
        return a is None and b is None
    if any(n == 0 for n in size):
        return True
    return all(n == 1 or x == y or (is_symbolic(x) or is_symbolic(y)) and sympy.expand(x - y) == 0
               for n, x, y in zip(size, a, b))


@dataclasses.dataclass(frozen=True, eq=False)
class Layout:
    """dtype, size, strides and storage offset of a buffer.  Two layouts are equal when they
    address the same elements: strides of size-1 dims (and all strides and the offset of an
    empty tensor) do not count."""

    dtype: torch.dtype
    size: tuple[int, ...]
    stride: tuple[int, ...]
    offset: int = 0

    def _key(self) -> tuple:
        if 0 in self.size:
            return (self.dtype, self.size)
        return (self.dtype, self.size, self.offset,
                tuple(st for n, st in zip(self.size, self.stride) if n != 1))

    def __eq__(self, other) -> bool:
        if not isinstance(other, Layout):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    @staticmethod
    def contiguous(dtype: torch.dtype, size: Sequence) -> "Layout":
        size = tuple(sym(s) for s in size)
        return Layout(dtype, size, contiguous_strides(size))

    @staticmethod
    def of(t: torch.Tensor) -> "Layout":
        """The layout of a tensor (a fake one's symbolic sizes as sympy expressions)."""
        return Layout(t.dtype, tuple(sym(s) for s in t.shape), tuple(sym(s) for s in t.stride()))

    @property
    def numel(self) -> int:
        return math.prod(self.size)

    @property
    def storage_numel(self) -> int:
        """Elements from the first to one past the last addressed element."""
        if self.numel == 0:
            return 0
        return self.offset + 1 + sum((s - 1) * st for s, st in zip(self.size, self.stride))

    def flat_index(self, idx: Sequence[Expr]) -> Expr:
        e = sympy.Integer(self.offset)
        for i, s, st in zip(idx, self.size, self.stride):
            if s != 1:
                e = e + i * st
        return e


@dataclasses.dataclass(eq=False)
class Buffer:
    """A named region of memory. ``kind``: "input", "computed" or "extern"."""

    name: str
    layout: Layout
    kind: str

    @property
    def dtype(self) -> torch.dtype:
        return self.layout.dtype


@dataclasses.dataclass(frozen=True)
class TensorRef:
    """A tensor as Python code sees it: buffer ``name`` viewed with size/stride/offset.

    ``view`` is None when the buffer itself is meant (no ``as_strided`` needed)."""

    name: str
    view: tuple | None = None  # (size, stride, storage_offset)


# -- nodes -----------------------------------------------------------------------------------------

REDUCTION_TYPES = ("sum", "prod", "max", "min", "argmax", "argmin", "any", "all", "welford")


@dataclasses.dataclass(eq=False)
class LoopNode:
    """One loop computation; stores its value into ``outputs`` at its own index."""

    name: str
    ranges: tuple[int, ...]
    body: Callable
    outputs: list[str]
    dtype: torch.dtype                     # dtype of the value the body (or reduction) yields
    rranges: tuple[int, ...] = ()
    reduction_type: str | None = None
    src_dtype: torch.dtype | None = None   # dtype of the value fed to the reduction
    origins: tuple[str, ...] = ()          # the ATen ops it came from (for comments)

    @property
    def is_reduction(self) -> bool:
        return self.reduction_type is not None

    def run(self, ops: "Ops", idx: Sequence[Expr], ridx: Sequence[Expr] = ()) -> None:
        """Replay the whole node (body and stores) into ``ops``."""
        if not self.is_reduction:
            ops.store(self.outputs[0], idx, self.body(ops, idx))
            return
        assert self.reduction_type is not None   # is_reduction
        value = self.body(ops, idx, ridx)
        rindex = sympy.Integer(0)
        for r, n in zip(ridx, self.rranges):
            rindex = rindex * n + r
        result = ops.reduction(self.reduction_type, value, rindex, self.src_dtype, self.dtype)
        results = result if self.reduction_type == "welford" else (result,)
        for name, v in zip(self.outputs, results):
            ops.store_reduction(name, idx, v)


@dataclasses.dataclass(eq=False)
class ExternNode:
    """An ATen call run by the wrapper ("extern kernel"): matmul, convolution, attention, ..."""

    name: str
    op: Any                       # a torch OpOverload (or any callable)
    args: tuple                   # pytree; TensorRef leaves are tensors
    kwargs: dict
    outputs: list[str]            # one buffer per tensor output (flattened)
    out_paths: list[tuple]        # for each output: index path into the op's result
    origins: tuple[str, ...] = ()


@dataclasses.dataclass
class KernelGraph:
    buffers: dict[str, Buffer]
    nodes: list                                   # LoopNode | ExternNode, topologically ordered
    inputs: list[str | None]                      # buffer of each placeholder (None: not a tensor)
    outputs: list                                 # TensorRef | Python constant
    mutations: list[tuple[int, TensorRef]]        # (input position, value to copy into it)
    device: torch.device = torch.device("cpu")
    fallbacks: list[str] = dataclasses.field(default_factory=list)
    # buffer name -> tensor, constants the wrapper binds as globals (set by the lowering)
    constants: dict[str, torch.Tensor] = dataclasses.field(default_factory=dict, repr=False, compare=False)
    # dynamic shapes: position of each symbolic int input -> its symbol (input buffers' layouts
    # hold the other size symbols)
    sym_inputs: dict[int, Expr] = dataclasses.field(default_factory=dict)
    # symbolic floats: position of a float input -> its name; then (name, function, arguments)
    # of each float the graph computes from them, in order (the wrapper computes them per call)
    float_inputs: dict[int, str] = dataclasses.field(default_factory=dict)
    float_exprs: list[tuple[str, Any, tuple]] = dataclasses.field(default_factory=list)

    def float_names(self) -> list[str]:
        return [*self.float_inputs.values(), *(name for name, _, _ in self.float_exprs)]

    def producers(self) -> dict[str, Any]:
        out = {}
        for n in self.nodes:
            for b in n.outputs:
                out[b] = n
        return out


# -- the ops protocol --------------------------------------------------------------------------------

UNARY_OPS = (
    "neg", "abs", "reciprocal", "sign", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p",
    "sqrt", "rsqrt", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh",
    "acosh", "atanh", "erf", "erfc", "sigmoid", "floor", "ceil", "trunc", "round", "relu",
    "bitwise_not", "logical_not", "isnan", "isinf", "signbit", "square", "lgamma", "erfinv",
    "erf_approx",   # erf where a few ulp do (GELU: eager's own is an approximation there)
)
BINARY_OPS = (
    "add", "sub", "mul", "truediv", "floordiv", "truncdiv", "remainder", "fmod", "pow", "minimum",
    "maximum", "atan2", "hypot", "copysign", "bitwise_and", "bitwise_or", "bitwise_xor",
    "lshift", "rshift", "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or",
    "logical_xor",
)
BOOL_RESULT_OPS = frozenset(("eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or",
                             "logical_xor", "logical_not", "isnan", "isinf", "signbit"))
POINTWISE_OPS = UNARY_OPS + BINARY_OPS


@dataclasses.dataclass(frozen=True)
class IndexCheck:
    """What a kernel checks about one indirect index (``x[idx]``, gather, embedding, ...), and
    how the error reads when it fails: eager raises ``error`` before computing anything.

    ``wrap``: negative indices count from the end (``x[idx]``); otherwise they are errors too.
    """

    op: str                     # "aten.gather", for the message
    dim: int
    size: Any                   # an int, or a sympy expression of the size symbols
    wrap: bool
    error: type                 # IndexError or RuntimeError, as eager raises for the op
    eager_text: str = ""        # eager's own words where they do not name the index

    @property
    def low(self) -> int:
        return -self.size if self.wrap else 0

    def exception(self, index: int) -> Exception:
        what = f"index {index} is out of bounds for dimension {self.dim} with size {self.size}"
        text = f"{self.eager_text}: {what}" if self.eager_text else what
        return self.error(f"{text} (xcompile kernel for {self.op})")


@dataclasses.dataclass(frozen=True)
class ZeroDivCheck(IndexCheck):
    """Integer division by zero: eager raises before computing anything.  The kernel checks
    ``divisor == 0`` as an index into a dim of size 1 (the same min/max bookkeeping)."""

    def exception(self, index: int) -> Exception:
        return RuntimeError(f"ZeroDivisionError (xcompile kernel for {self.op})")


def raise_index_error(checks: Sequence[IndexCheck], site: int, index: int, scope: dict | None = None):
    """Called by a generated wrapper when kernel check ``site`` saw ``index`` out of range
    (``scope``: the values of symbolic sizes in this call)."""
    check = checks[site]
    if scope and is_symbolic(check.size):
        size = sympy.sympify(sympy.sympify(check.size).xreplace({s: sympy.Integer(scope[s.name])
                                                  for s in sympy.sympify(check.size).free_symbols if s.name in scope}))
        check = dataclasses.replace(check, size=int(size) if size.is_Integer else size)
    raise check.exception(int(index))


class Ops:
    """The ops protocol.  Every handler implements these; pointwise ops go through
    ``pointwise(op, *args)`` unless a handler overrides a specific one."""

    def load(self, name: str, index: Sequence[Expr]): raise NotImplementedError
    def store(self, name: str, index: Sequence[Expr], value) -> None: raise NotImplementedError
    def reduction(self, rtype: str, value, rindex: Expr, src_dtype, dtype): raise NotImplementedError
    def store_reduction(self, name: str, index: Sequence[Expr], value) -> None: raise NotImplementedError
    def constant(self, value, dtype: torch.dtype): raise NotImplementedError
    def index_expr(self, expr: Expr, dtype: torch.dtype): raise NotImplementedError
    def to_dtype(self, x, dtype: torch.dtype): raise NotImplementedError
    def where(self, cond, a, b): raise NotImplementedError
    def indirect_indexing(self, x, size: int, check: IndexCheck | None = None) -> Expr:
        """``x`` (int64) as an index into a dim of ``size``: negative values wrap; with ``check``
        the kernel also reports values outside ``[check.low, size)`` as an error."""
        raise NotImplementedError
    def pointwise(self, op: str, *args): raise NotImplementedError


def _make_op(name: str):
    def op(self, *args):
        return self.pointwise(name, *args)
    op.__name__ = name
    return op


for _name in POINTWISE_OPS:
    setattr(Ops, _name, _make_op(_name))


class ReadRecorder(Ops):
    """Collects the loads (buffer, index) of a body and counts its ops."""

    def __init__(self):
        self.reads: list[tuple[str, tuple]] = []
        self.op_count = 0
        self.indirect = 0

    def load(self, name, index):
        self.reads.append((name, tuple(sympy.sympify(i) for i in index)))
        return name

    def store(self, name, index, value):
        pass

    def store_reduction(self, name, index, value):
        pass

    def reduction(self, rtype, value, rindex, src_dtype, dtype):
        self.op_count += 1
        return (None, None) if rtype == "welford" else None

    def constant(self, value, dtype):
        return None

    def index_expr(self, expr, dtype):
        return None

    def to_dtype(self, x, dtype):
        return x

    def where(self, cond, a, b):
        self.op_count += 1
        return None

    def indirect_indexing(self, x, size, check=None):
        self.indirect += 1
        return sympy.Symbol(f"ind{self.indirect}", integer=True, nonnegative=True)

    def pointwise(self, op, *args):
        self.op_count += 1
        return None


def record(node: LoopNode) -> ReadRecorder:
    rec = ReadRecorder()
    idx = [index_var("x", i) for i in range(len(node.ranges))]
    ridx = [index_var("r", i) for i in range(len(node.rranges))]
    node.run(rec, idx, ridx)
    return rec


class InlineOps(Ops):
    """Delegates to ``inner``, but a load of an inlined buffer replays its producer's body."""

    def __init__(self, inner: Ops, inlined: dict[str, LoopNode], buffers: dict[str, Buffer]):
        self.inner = inner
        self.inlined = inlined
        self.buffers = buffers

    def load(self, name, index):
        node = self.inlined.get(name)
        if node is None:
            return self.inner.load(name, index)
        value = node.body(self, list(index))
        dtype = self.buffers[name].dtype
        # The stored buffer would have rounded the value to its dtype; so does the inlined one.
        return value if dtype == node.dtype else self.inner.to_dtype(value, dtype)

    def store(self, name, index, value):
        return self.inner.store(name, index, value)

    def reduction(self, rtype, value, rindex, src_dtype, dtype):
        return self.inner.reduction(rtype, value, rindex, src_dtype, dtype)

    def store_reduction(self, name, index, value):
        return self.inner.store_reduction(name, index, value)

    def constant(self, value, dtype):
        return self.inner.constant(value, dtype)

    def index_expr(self, expr, dtype):
        return self.inner.index_expr(expr, dtype)

    def to_dtype(self, x, dtype):
        return self.inner.to_dtype(x, dtype)

    def where(self, cond, a, b):
        return self.inner.where(cond, a, b)

    def indirect_indexing(self, x, size, check=None):
        return self.inner.indirect_indexing(x, size, check)

    def pointwise(self, op, *args):
        return self.inner.pointwise(op, *args)


class PrintOps(Ops):
    """Renders a body as SSA lines: the readable dump of the loop IR."""

    def __init__(self):
        self.lines: list[str] = []

    def _emit(self, text: str) -> str:
        name = f"t{len(self.lines)}"
        self.lines.append(f"{name} = {text}")
        return name

    def load(self, name, index):
        return self._emit(f"load({name}, [{', '.join(map(str, index))}])")

    def store(self, name, index, value):
        self.lines.append(f"store({name}, [{', '.join(map(str, index))}], {value})")

    def reduction(self, rtype, value, rindex, src_dtype, dtype):
        v = self._emit(f"reduction({rtype}, {value})")
        return (f"{v}.mean", f"{v}.m2") if rtype == "welford" else v

    def store_reduction(self, name, index, value):
        self.lines.append(f"store_reduction({name}, [{', '.join(map(str, index))}], {value})")

    def constant(self, value, dtype):
        return self._emit(f"constant({value!r}, {str(dtype).replace('torch.', '')})")

    def index_expr(self, expr, dtype):
        return self._emit(f"index_expr({expr}, {str(dtype).replace('torch.', '')})")

    def to_dtype(self, x, dtype):
        return self._emit(f"to_dtype({x}, {str(dtype).replace('torch.', '')})")

    def where(self, cond, a, b):
        return self._emit(f"where({cond}, {a}, {b})")

    def indirect_indexing(self, x, size, check=None):
        return sympy.Symbol(f"indirect({x}{', checked' if check else ''})")

    def pointwise(self, op, *args):
        return self._emit(f"{op}({', '.join(map(str, args))})")


def format_node(node: LoopNode | ExternNode) -> str:
    if isinstance(node, ExternNode):
        name = getattr(node.op, "__name__", str(node.op))
        return f"{', '.join(node.outputs)} = extern {name}{node.args}"
    p = PrintOps()
    idx = [index_var("x", i) for i in range(len(node.ranges))]
    ridx = [index_var("r", i) for i in range(len(node.rranges))]
    node.run(p, idx, ridx)
    head = f"{node.name}: ranges={list(node.ranges)}"
    if node.is_reduction:
        head += f" rranges={list(node.rranges)} {node.reduction_type}"
    head += f"  # {', '.join(node.origins)}"
    return "\n".join([head] + ["    " + ln for ln in p.lines])


def format_graph(g: KernelGraph) -> str:
    lines = [f"inputs: {g.inputs}"]
    for b in g.buffers.values():
        lines.append(f"  {b.name}: {b.kind} {str(b.dtype).replace('torch.', '')} "
                     f"size={list(b.layout.size)} stride={list(b.layout.stride)}")
    lines += [format_node(n) for n in g.nodes]
    lines.append(f"outputs: {g.outputs}")
    return "\n".join(lines)


class _Checker(ReadRecorder):
    """Replays a node and checks that every load and store names a buffer with the right rank."""

    def __init__(self, buffers: dict, node: LoopNode):
        super().__init__()
        self.buffers, self.node = buffers, node

    def _check(self, what: str, name: str, index) -> None:
        buf = self.buffers.get(name)
        if buf is None:
            raise AssertionError(f"{self.node.name}: {what} of unknown buffer {name}")
        if len(index) != len(buf.layout.size):
            raise AssertionError(f"{self.node.name}: {what} {name} with {len(index)} indices, "
                                 f"buffer has {len(buf.layout.size)} dims")

    def load(self, name, index):
        self._check("load", name, index)
        return super().load(name, index)

    def store(self, name, index, value):
        if name not in self.node.outputs:
            raise AssertionError(f"{self.node.name}: stores {name}, not one of its outputs")
        self._check("store", name, index)

    def store_reduction(self, name, index, value):
        self.store(name, index, value)


def verify_graph(g: KernelGraph) -> None:
    """The loop IR's invariants (run under XCOMPILE_CHECK=1): nodes in topological order, every
    buffer produced once, loads and stores of known buffers with the right rank."""
    produced = {n for n, b in g.buffers.items() if b.kind == "input"}
    for node in g.nodes:
        for b in node.outputs:
            if b in produced:
                raise AssertionError(f"buffer {b} produced twice")
            if b not in g.buffers:
                raise AssertionError(f"{node.name} produces unknown buffer {b}")
        if isinstance(node, LoopNode):
            rec = _Checker(g.buffers, node)
            node.run(rec, [index_var("x", i) for i in range(len(node.ranges))],
                     [index_var("r", i) for i in range(len(node.rranges))])
            late = [b for b, _ in rec.reads if b not in produced]
            if late:
                raise AssertionError(f"{node.name} reads {late} before they are produced")
        produced.update(node.outputs)
    for ref in [o for o in g.outputs if isinstance(o, TensorRef)] + [r for _, r in g.mutations]:
        if ref.name not in produced:
            raise AssertionError(f"output {ref.name} is never produced")
