"""The FX graph under construction, with fake-tensor metadata for every node.

One ``GraphBuilder`` per trace.  It owns the ``torch.fx.Graph``, the ``FakeTensorMode``
(static shapes; with ``config.capture_scalar_outputs`` or ``capture_dynamic_output_shape_ops`` it
has a ``ShapeEnv`` so that ``item()`` gives unbacked symbolic scalars and ``nonzero()`` a result
sized by an unbacked symbol, see scalars.py), the graph inputs (placeholders, in first-use order, one per distinct
tensor object) and the module state the graph reads (``get_attr`` nodes whose targets
hold the very same Parameter / buffer objects), and the grad mode the traced code is in.

Every op goes through ``call``: symbolic arguments are unpacked into FX arguments and
fake arguments, the op runs on the fakes (under the traced grad mode) to get the
result's metadata, then the node is added and the result wrapped as values.
"""
from __future__ import annotations

import contextlib
import operator
import re
from typing import Any, Callable

import torch
import torch.fx
from torch._subclasses.fake_tensor import (
    DataDependentOutputException,
    DynamicOutputShapeException,
    FakeTensor,
    FakeTensorMode,
    UnsupportedOperatorException,
)
from torch.fx.experimental.symbolic_shapes import (
    DimDynamic,
    GuardOnDataDependentSymNode,
    free_unbacked_symbols,
    guard_or_false,
)
from torch.utils._device import DeviceContext, _device_constructors
from torch.utils._pytree import tree_leaves, tree_map

from .. import config
from ..guards.sources import AttrSource, ClosureSource, GlobalSource, ItemSource, LocalSource, Source
from . import scalars
from .dict_keys import has_value_keys
from .exc import TorchRuntimeError, Unsupported
from .shapes import ShapePolicy, ShapeSource, make_shape_env
from .tensor_classes import result_class, subclass_result
from .values import (
    ConstantValue,
    DictValue,
    ListValue,
    NewObjectValue,
    TensorValue,
    TupleValue,
    UserObjectValue,
    Value,
    is_constant,
)

_DATA_DEPENDENT_HINT = ("This needs the value of a tensor at trace time; move it out of the compiled region, "
                        "or compute it with tensor ops (torch.where, masking) instead.")

_DYNAMIC_OUTPUT_HINT = ("Set xcompile.config.capture_dynamic_output_shape_ops = True to capture it in the graph "
                        "(its output size becomes an unbacked symbol), or keep it outside the compiled region.")


def source_to_name(src: Source) -> str:
    """A readable identifier for a source: L['self'].layers[0].weight -> self_layers_0_weight."""
    if isinstance(src, LocalSource):
        return src.local_name
    if isinstance(src, GlobalSource):
        return "G_" + src.global_name
    if isinstance(src, ClosureSource):
        return "C_" + src.var_name
    if isinstance(src, AttrSource):
        return f"{source_to_name(src.base)}_{src.attr}"
    if isinstance(src, ItemSource):
        return f"{source_to_name(src.base)}_{src.key}"
    return "input"


def _identifier(name: str) -> str:
    name = re.sub(r"[^0-9a-zA-Z_]+", "_", name).strip("_") or "v"
    return "_" + name if name[0].isdigit() else name


def _is_structseq(cls: type) -> bool:
    return issubclass(cls, tuple) and hasattr(cls, "n_sequence_fields")


def _is_namedtuple(cls: type) -> bool:
    return issubclass(cls, tuple) and hasattr(cls, "_fields")


def _eager_error(fn: Callable, fargs, fkwargs) -> BaseException | None:
    """The exception ``fn`` raises on real zero tensors with the fake arguments' metadata."""

    def real(x):
        if isinstance(x, FakeTensor):
            return torch.zeros([_hint(d) for d in x.shape], dtype=x.dtype,
                               device="cpu" if x.device.type == "meta" else x.device)
        return _hint(x) if isinstance(x, (torch.SymInt, torch.SymFloat, torch.SymBool)) else x

    try:
        args, kwargs = tree_map(real, fargs), tree_map(real, fkwargs)
    except _NoStandIn:
        return None
    try:
        with torch.no_grad():
            fn(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 - we only want its message
        return e
    return None


def _hint(v):
    """A symbolic size or scalar's example value (the call's own), without a guard."""
    if isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        h = v.node.hint
        if h is None:                   # unbacked (data-dependent): no example value
            raise _NoStandIn
        return h
    return v


class _NoStandIn(Exception):
    """A fake argument with no real stand-in (a data-dependent size)."""


# Reductions that raise on an empty input (or an empty reduced dim) where their meta kernels do not.
_EMPTY_CHECKED = frozenset({"max", "min", "amax", "amin", "argmax", "argmin", "aminmax", "max_pool2d",
                            "kthvalue", "mode", "median", "nanmedian"})


class GraphBuilder:
    def __init__(self, grad_enabled: bool):
        self.graph = torch.fx.Graph()
        # where the trace is (a user line), for errors that name it; set by the tracer
        self.where: Callable[[], Any] = lambda: None
        self.captures_scalars = bool(config.capture_scalar_outputs)
        # nonzero, masked_select, x[mask], unique: results sized by unbacked symbols (u0, ...)
        self.captures_dynamic_outputs = bool(config.capture_dynamic_output_shape_ops)
        unbacked = self.captures_scalars or self.captures_dynamic_outputs
        self.fake_mode = FakeTensorMode(allow_non_fake_inputs=False,
                                        shape_env=make_shape_env(self._where) if unbacked else None)
        # which dims of tensor inputs are symbolic (frontend/shapes.py); set by the tracer
        self.shapes: ShapePolicy | None = None
        self.grad_enabled = grad_enabled
        # active torch.autocast(...) arguments (or a callable making a mode: inference_mode), innermost last
        self.autocast_modes: list[Any] = []
        # `with torch.device(d)` / torch.set_default_device(d) around the call: factory calls get
        # device=d in the graph, as the DeviceContext mode gives them in eager (the guards check
        # the mode stack, so the graph only runs under the same default device)
        self.default_device: torch.device | None = default_device()
        # (input, its copy on the default device, the copy's fake, its version when made): NumPy
        # inputs moved to the default device (numpy_tracing); written copies are copied back
        self.copy_back: list[tuple[torch.fx.Node, torch.fx.Node, torch.Tensor, int]] = []
        self.input_sources: list[Source] = []
        self.example_inputs: list[Any] = []                 # tensors, and ints (symbolic int inputs)
        self.root: dict[str, Any] = {}                 # get_attr target -> the real tensor
        self.by_id: dict[int, TensorValue] = {}        # id(real tensor) -> its value (one input per object)
        self.by_source: dict[Source, Value] = {}       # a symbolic int or float input, by its source
        self._keepalive: list[Any] = []
        self._last_placeholder: torch.fx.Node | None = None
        # set by the tracer: turns LazyValue items inside containers into values
        self.resolve: Callable[[Value], Value] = lambda v: v
        # called with the name of every op run on fakes (``what``); may raise Unsupported
        # (func_transforms.py refuses metadata a transformed function cannot read)
        self.op_checks: list[Callable[[str], None]] = []

    def _where(self) -> Any:
        return self.where()

    # -- inputs ---------------------------------------------------------------------------------
    def _fake(self, t: torch.Tensor, source: Source | None = None) -> torch.Tensor:
        ctx = self.shapes.context(t, source) if self.shapes is not None and source is not None else None
        try:
            if ctx is None or source is None:
                return self.fake_mode.from_tensor(t, static_shapes=True)
            self._shape_env()
            fake = self.fake_mode.from_tensor(t, static_shapes=False, source=ShapeSource(source),
                                              symbolic_context=ctx)
        except Exception as e:  # sparse, quantized, odd subclasses...
            raise Unsupported(f"cannot trace a tensor of type {type(t).__name__} ({e})",
                              "Pass plain dense tensors to the compiled function.") from e
        assert self.shapes is not None and source is not None
        self.shapes.note_input(source, fake)
        return fake

    def placeholder(self, t: torch.Tensor, source: Source) -> TensorValue:
        known = self.by_id.get(id(t))
        if known is not None:
            return known
        fake = self._fake(t, source)
        node = self._input_node(source, fake, t)
        cls = torch.nn.Parameter if isinstance(t, torch.nn.Parameter) else torch.Tensor
        v = TensorValue(node, fake, cls, source=source)
        self._remember(t, v)
        return v

    def _input_node(self, source: Source, example: Any, real: Any) -> torch.fx.Node:
        """A new placeholder after the last one (graph inputs in first-use order)."""
        name = _identifier("l_" + source_to_name(source))
        ctx = self.graph.inserting_before(None) if self._last_placeholder is None else \
            self.graph.inserting_after(self._last_placeholder)
        with ctx:
            node = self.graph.placeholder(name)
        node.meta["example_value"] = example
        node.meta["source"] = source
        self._last_placeholder = node
        self.input_sources.append(source)
        self.example_inputs.append(real)
        return node

    def _shape_env(self) -> Any:
        """The trace's ShapeEnv, made on the first symbolic input (its first construction is slow)."""
        if self.fake_mode.shape_env is None:
            self.fake_mode.shape_env = make_shape_env(self._where)
        return self.fake_mode.shape_env

    def sym_int_input(self, value: int, source: Source) -> Value:
        """A Python int argument as a graph input with a symbolic value (dynamic shapes)."""
        known = self.by_source.get(source)
        if known is not None:                 # (read again: ``stack[0]`` twice is one input)
            return known
        sym = self._shape_env().create_unspecified_symint_and_symbol(value, ShapeSource(source),
                                                                    DimDynamic.DYNAMIC)
        return self._sym_input(source, sym, value)

    def sym_float_input(self, value: float, source: Source) -> Value:
        """A float from outside as a graph input with a symbolic value (automatic dynamic)."""
        known = self.by_source.get(source)
        if known is not None:
            return known
        env = self._shape_env()
        expr = env.create_unspecified_symbol(value, ShapeSource(source), dynamic_dim=DimDynamic.DYNAMIC)
        return self._sym_input(source, env.create_symfloatnode(expr, hint=value, source=ShapeSource(source)), value)

    def _sym_input(self, source: Source, sym: Any, value: int | float) -> Value:
        if not isinstance(sym, (torch.SymInt, torch.SymFloat)):      # the ShapeEnv specialized it
            return ConstantValue(value, source=source, covered=True)
        node = self._input_node(source, sym, value)
        assert self.shapes is not None
        if isinstance(sym, torch.SymInt):
            self.shapes.note_int(source, sym)
        else:
            self.shapes.note_float(source, sym)
        v = self.by_source[source] = scalars.SymScalarValue(node, sym, source=source, covered=True)
        return v

    def get_attr(self, t: torch.Tensor, source: Source) -> TensorValue:
        known = self.by_id.get(id(t))
        if known is not None:
            return known
        base = _identifier(source_to_name(source))
        target, n = base, 1
        while target in self.root:
            target, n = f"{base}_{n}", n + 1
        self.root[target] = t
        node = self.graph.get_attr(target)
        fake = self._fake(t)
        node.meta["example_value"] = fake
        node.meta["source"] = source
        cls = torch.nn.Parameter if isinstance(t, torch.nn.Parameter) else torch.Tensor
        v = TensorValue(node, fake, cls, source=source, covered=True)
        self._remember(t, v)
        return v

    def real_tensor(self, v: TensorValue) -> torch.Tensor | None:
        """The real tensor behind an input or attribute value (None for a tensor made in the trace)."""
        for t in self._keepalive:
            if isinstance(t, torch.Tensor) and self.by_id.get(id(t)) is v:
                return t
        return None

    def _remember(self, t, v: TensorValue) -> None:
        self.by_id[id(t)] = v
        self._keepalive.append(t)

    # -- ops ------------------------------------------------------------------------------------
    def unpack(self, v: Value) -> tuple[Any, Any]:
        """(FX argument, fake argument) for a value passed to a torch op."""
        v = self.resolve(v)
        if isinstance(v, TensorValue):
            return v.node, v.fake
        if isinstance(v, ConstantValue):
            return v.value, v.value
        if isinstance(v, scalars.SymScalarValue):
            return v.node, v.sym
        if isinstance(v, scalars.SymSliceValue):
            pairs = [self.unpack(p) for p in v.parts]
            return slice(*(p for p, _ in pairs)), slice(*(f for _, f in pairs))
        if isinstance(v, TupleValue) and v.cls is not tuple and v.cls is not torch.Size:  # (a Size: a tuple)
            raise Unsupported(f"passing a {v.describe()} to a torch operator",
                              "Pass its fields (plain tensors and constants) instead.")
        if isinstance(v, (NewObjectValue, UserObjectValue)) and isinstance(v.storage, (TupleValue, ListValue)):
            v = v.storage                # a list / tuple subclass: torch reads its items directly
        if isinstance(v, (TupleValue, ListValue)):
            pairs = [self.unpack(i) for i in v.items]
            kind = list if isinstance(v, ListValue) else tuple
            return kind(p for p, _ in pairs), kind(f for _, f in pairs)
        if isinstance(v, DictValue):
            if has_value_keys(v.items):
                raise Unsupported("passing a dict keyed by tensors or modules to a torch operator")
            by_key = {k: self.unpack(i) for k, i in v.items.items()}
            return {k: p for k, (p, _) in by_key.items()}, {k: f for k, (_, f) in by_key.items()}
        raise Unsupported(f"passing {v.describe()} to a torch operator",
                          "Only tensors, Python constants and containers of these can be graph arguments.")

    def run_fake(self, fn: Callable, fargs, fkwargs, what: str):
        for check in self.op_checks:
            check(what)
        if what.rsplit(".", 1)[-1] == "squeeze_" and fargs and isinstance(fargs[0], torch.Tensor) \
                and any(isinstance(d, torch.SymInt) for d in fargs[0].shape):
            # torch's own squeeze_ kernel on a fake with symbolic sizes dies in C++ (a segfault
            # in as_strided_, torch 2.13 and 2.14): never run it at trace time
            raise Unsupported(f"{what} of a tensor with symbolic sizes",
                              "Eager runs it (torch's squeeze_ kernel cannot run on symbolic sizes).")
        if what.rsplit(".", 1)[-1] in _EMPTY_CHECKED and fargs and isinstance(fargs[0], torch.Tensor) \
                and guard_or_false(fargs[0].numel() == 0):   # unknown (a data-dependent size): no
            # max/min/argmax... of an empty tensor: eager raises, the meta kernel does not (and a
            # fused kernel would return -inf); ask eager on real stand-ins
            eager = _eager_error(fn, fargs, fkwargs)
            if eager is not None:
                raise TorchRuntimeError(f"{eager}\n\n(raised by {what} while tracing)")
        try:
            with self.fake_mode, torch.set_grad_enabled(self.grad_enabled), contextlib.ExitStack() as modes:
                for mode in self.autocast_modes:
                    modes.enter_context(mode() if callable(mode) else torch.autocast(*mode))
                return fn(*fargs, **fkwargs)
        except DynamicOutputShapeException as e:         # nonzero & co. without the knob
            raise Unsupported(f"data-dependent operator: {what} (its output shape depends on the data)",
                              _DYNAMIC_OUTPUT_HINT, str(e)) from e
        except DataDependentOutputException as e:
            raise Unsupported(f"data-dependent operator: {what}", _DATA_DEPENDENT_HINT, str(e)) from e
        except GuardOnDataDependentSymNode as e:         # it needs a captured scalar's value
            raise scalars.needs_value(what) from e
        except UnsupportedOperatorException as e:
            raise Unsupported(f"operator {what} has no fake-tensor implementation", None, str(e)) from e
        except Unsupported:
            raise
        except Exception as e:
            if self.captures_scalars and scalars.has_sym(fargs, fkwargs):
                raise scalars.needs_value(what) from e   # e.g. indexing a tensor with a captured int
            if _has_unbacked(fargs, fkwargs):               # a tensor sized by nonzero() & co.: no real
                raise Unsupported(f"{what} on a tensor with a data-dependent size",  # stand-in exists
                                  _DATA_DEPENDENT_HINT, str(e)) from e
            if "data is not allocated yet" in str(e):    # a kernel without a fake implementation read data
                raise Unsupported(f"operator {what} reads tensor data (it has no fake-tensor implementation)",
                                  "It runs eagerly; the code around it is still compiled.", str(e)) from e
            # A genuine error of the op on these inputs (shapes, dtypes...): eager fails the same way.
            # Say it in eager's words: rerun the op on real stand-ins of the fake inputs.
            eager = _eager_error(fn, fargs, fkwargs)
            if eager is None:
                # eager runs the op on stand-ins of these inputs: the fake kernel is what fails
                # (a meta kernel that cannot take symbolic sizes): a graph break, logged, where
                # the op runs eagerly, rather than the whole frame re-traced on every call
                raise Unsupported(f"{what}: its fake-tensor kernel failed on these inputs where eager runs",
                                  "It runs eagerly; the code around it is still compiled.",
                                  f"{type(e).__name__}: {e}") from e
            raise TorchRuntimeError(f"{eager}\n\n(raised by {what} while tracing)") from e

    def call(self, kind: str, target: Any, args: tuple | list, kwargs: dict | None = None,
             *, fake_fn: Callable | None = None, what: str | None = None) -> Value:
        """Add one op.  ``kind`` is "call_function" or "call_method" (target: the method name)."""
        kwargs = kwargs or {}
        unpacked = [self.unpack(a) for a in args]
        kunpacked = {k: self.unpack(a) for k, a in kwargs.items()}
        pargs = tuple(p for p, _ in unpacked)
        fargs = tuple(f for _, f in unpacked)
        pkwargs = {k: p for k, (p, _) in kunpacked.items()}
        fkwargs = {k: f for k, (_, f) in kunpacked.items()}
        if fake_fn is None:
            if kind == "call_method":
                def fake_fn(self_, *a, **k):
                    return getattr(self_, target)(*a, **k)
            else:
                fake_fn = target
        what = what or _describe_target(target)
        if self.default_device is not None and kind == "call_function" and fkwargs.get("device") is None \
                and target in _device_constructors():
            pkwargs["device"] = fkwargs["device"] = self.default_device
        if _past_int64(fargs) or _past_int64(fkwargs.values()):
            # torch converts Python ints to int64: eager raises (OverflowError, RuntimeError) where
            # a fake or a compiled kernel may not, or wraps the value around; eager runs the op
            raise Unsupported(f"{what} with a Python int outside int64", "Eager runs this call.")
        result = self.run_fake(fake_fn, fargs, fkwargs, what)
        if scalars.is_sym_result(result):              # x.size(0), x.numel(), s * 2, t.item()
            known = scalars.constant_of(result)
            if known is not None:
                return ConstantValue(known)
            node = self.graph.create_node(kind, target, pargs, pkwargs)
            node.meta["example_value"] = result
            return scalars.SymScalarValue(node, result)
        if isinstance(result, (tuple, list)) and not _has_tensor(result) and scalars.has_sym(result):
            node = self.graph.create_node(kind, target, pargs, pkwargs)   # x.shape, x.size() (symbolic)
            node.meta["example_value"] = result
            return self.sym_sequence(node, result)
        if not _has_tensor(result) and result is not None:
            if is_constant(result) or (isinstance(result, (tuple, list)) and is_constant(tuple(result))):
                return ConstantValue(result)
            raise Unsupported(f"{what} returned {type(result).__name__}, which cannot be traced")
        node = self.graph.create_node(kind, target, pargs, pkwargs)
        if isinstance(result, torch.Tensor):
            # an op that returns one of its arguments (x.add_(1), out=, a no-op x.float() or
            # x.contiguous()): eager hands back that very object, so `y is x` holds; the node
            # stays (an in-place op's effect), the value is the argument's
            for a, f in zip([*args, *kwargs.values()], [*fargs, *fkwargs.values()]):
                if f is result and type(a) is TensorValue and result_class(args, kwargs) in (None, a.cls):
                    node.meta["example_value"] = result   # (a subclass's __torch_function__ would hand
                    return a                              # back a new object of its class instead)
        return subclass_result(target, args, kwargs, self.wrap_result(node, result))   # (tensor_classes.py)

    def sym_sequence(self, node: torch.fx.Node, fake: Any) -> Value:
        """A torch.Size / tuple of ints, some symbolic: one ``getitem`` node per symbolic item."""
        items: list[Value] = []
        for i, f in enumerate(fake):
            known = scalars.constant_of(f) if scalars.is_sym_result(f) else f
            if known is not None:
                items.append(ConstantValue(known))
                continue
            item = self.graph.call_function(operator.getitem, (node, i))
            item.meta["example_value"] = f
            items.append(scalars.SymScalarValue(item, f))
        if isinstance(fake, list):
            return ListValue(items)
        return TupleValue(items, cls=torch.Size if isinstance(fake, torch.Size) else tuple)

    def wrap_result(self, node: torch.fx.Node, fake: Any) -> Value:
        node.meta["example_value"] = fake
        if isinstance(fake, torch.Tensor):
            return TensorValue(node, fake)
        if fake is None:
            return ConstantValue(None)
        if isinstance(fake, (tuple, list)):
            items: list[Value] = []
            for i, f in enumerate(fake):
                if _has_tensor(f):
                    items.append(self.wrap_result(self.graph.call_function(operator.getitem, (node, i)), f))
                elif is_constant(f):
                    items.append(ConstantValue(f))
                else:
                    raise Unsupported(f"graph op returned a {type(f).__name__} inside a sequence")
            cls = type(fake)
            if isinstance(fake, list):
                return ListValue(items)
            if cls is not tuple and not (_is_structseq(cls) or _is_namedtuple(cls)):
                cls = tuple
            return TupleValue(items, cls=cls)
        raise Unsupported(f"graph op returned {type(fake).__name__}")

    def side_effect(self, target: Callable, args: tuple) -> None:
        """A call that only changes global state (grad mode): recorded, nothing to wrap."""
        self.graph.call_function(target, args)

    # -- result ---------------------------------------------------------------------------------
    def finish(self, outputs: list) -> torch.fx.GraphModule:   # TensorValue | SymScalarValue
        for node, moved, fake, version in self.copy_back:
            if fake._version != version:
                self.graph.call_method("copy_", (node, moved))
        self.graph.output(tuple(v.node for v in outputs))
        gm = torch.fx.GraphModule(self.root, self.graph)
        # outputs that are ndarrays (numpy_values.NumpyArrayValue): the compiled call converts them
        gm.meta["numpy_outputs"] = tuple(i for i, v in enumerate(outputs) if getattr(v, "numpy_array", False))
        gm.meta["numpy_scalar_outputs"] = tuple(i for i, v in enumerate(outputs) if getattr(v, "scalar", False))
        gm.graph.lint()
        # The generated forward reads each parameter/buffer as ``self.<name>``; registered ones are
        # found only through nn.Module.__getattr__ (~0.5 us each). The same objects in the instance
        # __dict__ are found by plain attribute lookup, and stay registered for named_parameters().
        for node in gm.graph.nodes:
            if node.op == "get_attr" and "." not in node.target:
                gm.__dict__[node.target] = getattr(gm, node.target)
        return gm


def default_device() -> torch.device | None:
    """The device a ``DeviceContext`` mode (``with torch.device(d)``, ``set_default_device``)
    gives factory calls now; None without one."""
    for i in range(torch._C._len_torch_function_stack()):
        mode = torch._C._get_function_stack_at(i)
        if isinstance(mode, DeviceContext):
            return mode.device
    return None


def _has_tensor(x: Any) -> bool:
    if isinstance(x, torch.Tensor):
        return True
    if isinstance(x, (tuple, list)):
        return any(_has_tensor(i) for i in x)
    return False


def _has_unbacked(*trees: Any) -> bool:
    return any(isinstance(x, torch.Tensor) and bool(free_unbacked_symbols(x)) for t in trees for x in tree_leaves(t))


def _describe_target(target: Any) -> str:
    if isinstance(target, str):
        return f"Tensor.{target}"
    mod = getattr(target, "__module__", None) or ""
    name = getattr(target, "__qualname__", None) or getattr(target, "__name__", None) or repr(target)
    return f"{mod}.{name}" if mod else name


def _past_int64(args: Any) -> bool:
    for a in args:
        if type(a) is int and not -(2**63) <= a < 2**63:
            return True
        if type(a) in (tuple, list, torch.Size) and _past_int64(a):
            return True
    return False
