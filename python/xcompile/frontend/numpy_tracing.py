"""NumPy code in the graph (``config.trace_numpy``): the rules for ndarray values.

What torch.compile does, in the frontend's tables:

    np.ndarray input        a graph input; the compiled call hands it over as ``torch.as_tensor(arr)``
                            (same memory: in-place writes reach the caller's array); guarded on its
                            type, dtype, shape and strides (numpy_io.py converts at run time)
    np.* / ndarray methods  one graph node running torch._numpy's implementation (numpy_values.py)
    operators, a[i], a[i]=v the same, with ndarray semantics (NEP 50 promotion)
    np.float32 & co.        NumPy scalars are 0-d arrays
    x.numpy()               an array viewing the tensor (``view_as``); torch.from_numpy(a) / as_tensor(a)
                            a tensor viewing the array (``as_tensor``)
    returned arrays         the graph returns the tensor; the compiled call converts it (``.numpy()``)
    at a graph break        arrays are graph outputs converted to np.ndarray; the resumed code
                            takes them as inputs again

What torch._numpy cannot do (non-numeric dtypes, ufunc methods, np.random, ndarray subclasses,
...) is a graph break naming the feature, and NumPy runs it.
"""
from __future__ import annotations

import functools
import operator
import os
from typing import TYPE_CHECKING, Any, cast

import torch

from .. import config
from ..guards.sources import AttrSource, GlobalSource
from . import hub, pyops, wrap
from .attrs import register_reader
from .calls import register_caller, register_tensor_method_rule, register_torch_op_rule
from .codegen import register_value_maker
from .exc import TorchRuntimeError, Unsupported
from .iteration import register_iterable
from .numpy_values import (
    INPLACE,
    OPERATORS,
    NumpyArrayValue,
    NumpyCallableValue,
    NumpyMethodValue,
    method_target,
    np,
    np_to_tnp,
    numpy_attr,
    numpy_function,
    operator_target,
    tensor_copy,
    tnp,
)
from .values import (
    ConstantValue,
    ListValue,
    TensorMethodValue,
    TensorValue,
    TupleValue,
    Value,
    is_constant,
    register_real_object_field,
)

if TYPE_CHECKING:
    from .tracer import Tracer

_DATA_DEPENDENT_HINT = ("The value of an array is not known while tracing: NumPy runs this part, "
                        "the code around it is still compiled.")


def enabled() -> bool:
    return np is not None and bool(config.trace_numpy)


# -- arrays from outside the frame -----------------------------------------------------------------
def _input_state(tx: "Tracer") -> dict[int, NumpyArrayValue]:
    state = tx.gb.__dict__.get("_numpy_inputs")
    if state is None:
        state = tx.gb.__dict__["_numpy_inputs"] = {}
    return cast(dict, state)


def _array_input(tx: "Tracer", arr: Any, source: Any, covered: bool) -> Value:
    """An ndarray (or NumPy scalar) the frame reads: a graph input, as torch.compile makes it."""
    if type(arr) is not np.ndarray and not isinstance(arr, np.generic):
        what = "masked arrays" if isinstance(arr, np.ma.MaskedArray) else f"ndarray subclasses ({type(arr).__name__})"
        raise Unsupported(f"NumPy {what} are not traced", "NumPy runs this part of the code.")
    if isinstance(arr, np.ndarray) and not arr.flags.writeable:
        raise Unsupported("a read-only ndarray input", "NumPy runs this part of the code.")
    if isinstance(arr, np.ndarray) and any(st < 0 for st in arr.strides):
        # a tensor cannot view it, and a copy would not carry writes back to the caller's array
        raise Unsupported("an ndarray input with negative strides (a[::-1])", "NumPy runs this part of the code.")
    try:
        t = torch.as_tensor(arr, device="cpu")    # (not the default device: it views the array)
    except (TypeError, ValueError) as e:
        raise Unsupported(f"NumPy dtype {arr.dtype} (non-numeric or unsupported dtypes are not traced)",
                          "NumPy runs this part of the code.") from e
    state = _input_state(tx)
    known = state.get(id(arr))
    if known is not None:
        if source is not None and known.source is not None and source != known.source:
            tx.guards.same_object(known.source, source)
        return known
    if source is None:                    # read by library code: a constant of the graph
        v = tx.gb.get_attr(t, _const_source(tx))
        out = NumpyArrayValue(v.node, v.fake)
        state[id(arr)] = out
        return out
    if not covered:
        tx.guards.object_type(source, arr)
        if isinstance(arr, np.ndarray):
            tx.guards.constant(AttrSource(AttrSource(source, "dtype"), "str"), arr.dtype.str)
            tx.guards.constant(AttrSource(source, "shape"), tuple(arr.shape))
            tx.guards.constant(AttrSource(source, "strides"), tuple(arr.strides))
    fake = tx.gb.fake_mode.from_tensor(t, static_shapes=True)
    node = tx.gb._input_node(source, fake, t)
    node.meta["xcompile_numpy"] = True
    tx.gb._keepalive.extend((arr, t))
    device = tx.gb.default_device
    if device is not None and device != t.device:
        node, fake = _to_default_device(tx, node, fake, device)
    out = NumpyArrayValue(node, fake, source=source, covered=True)
    state[id(arr)] = out
    return out


def _to_default_device(tx: "Tracer", node: torch.fx.Node, fake: torch.Tensor, device: torch.device):
    """Under ``with torch.device(d)`` the NumPy code runs on ``d`` (as torch.compile's FAQ says):
    the input array is copied there first, and written back at the graph's end if the code
    wrote to it (GraphBuilder.finish)."""
    moved = tx.gb.graph.call_method("to", (node, device))
    with tx.gb.fake_mode:
        moved_fake = fake.to(device)
    moved.meta["example_value"] = moved_fake
    tx.gb.copy_back.append((node, moved, moved_fake, moved_fake._version))
    return moved, moved_fake


def _const_source(tx: "Tracer") -> Any:
    return GlobalSource(f"numpy_constant_{len(tx.gb.root)}")


def _is_array(o: Any) -> bool:
    return isinstance(o, np.ndarray) or (isinstance(o, np.generic) and not isinstance(o, (str, bytes)))


def _callable_row(tx: "Tracer", obj: Any, source: Any, covered: bool) -> Value:
    if source is not None and not covered:
        tx.guards.identity(source, obj)
    row = np_to_tnp().get(id(obj))
    if row is not None and row[0] is obj:
        return NumpyCallableValue(obj, row[1], row[2], source=source, covered=True)
    mod = getattr(obj, "__module__", None) or "numpy"
    name = getattr(obj, "__name__", type(obj).__name__)
    return NumpyCallableValue(obj, None, f"{mod}.{name}".replace("numpy", "np", 1), source=source, covered=True)


def _is_numpy_callable(o: Any) -> bool:
    if isinstance(o, np.ufunc):
        return True
    if isinstance(o, type):
        return issubclass(o, np.generic)
    row = np_to_tnp().get(id(o))
    if row is not None and row[0] is o:
        return True
    mod = getattr(o, "__module__", None) or ""
    return callable(o) and (mod == "numpy" or mod.startswith("numpy.")) and not isinstance(o, type)


def _dtype_row(tx: "Tracer", obj: Any, source: Any, covered: bool) -> Value:
    if source is not None and not covered:
        tx.guards.identity(source, obj)
    return ConstantValue(obj, source=source, covered=True)


# -- calling NumPy ----------------------------------------------------------------------------------
def _graph_arg(v: Value) -> Value:
    """An argument as the graph passes it: arrays are their tensors, dtypes their names."""
    if isinstance(v, NumpyArrayValue):
        return TensorValue(v.node, v.fake)
    if isinstance(v, NumpyCallableValue) and isinstance(v.fn, type):
        return ConstantValue(v.fn.__name__)               # np.float32 -> "float32" (torch._numpy reads it)
    if isinstance(v, ConstantValue) and np is not None and isinstance(v.value, np.dtype):
        return ConstantValue(v.value.name)
    if isinstance(v, ConstantValue) and np is not None and isinstance(v.value, np.generic):
        return ConstantValue(v.value.item())
    if isinstance(v, TupleValue) and v.cls is tuple:
        return TupleValue([_graph_arg(i) for i in v.items])
    if isinstance(v, ListValue):
        return ListValue([_graph_arg(i) for i in v.items])
    return v


def _as_arrays(v: Value) -> Value:
    if isinstance(v, TensorValue):
        return NumpyArrayValue(v.node, v.fake)
    if isinstance(v, TupleValue):
        return TupleValue([_as_arrays(i) for i in v.items], cls=v.cls)
    if isinstance(v, ListValue):
        return ListValue([_as_arrays(i) for i in v.items])
    return v


def _resolved(tx: "Tracer", v: Value) -> Value:
    v = tx.resolve(v)
    if isinstance(v, (TupleValue, ListValue)):
        for i, item in enumerate(v.items):
            v.items[i] = _resolved(tx, item)
    return v


def numpy_call(tx: "Tracer", target: Any, args: list, kwargs: dict, what: str, scalar: bool = False) -> Value:
    """One graph node running NumPy code on tensors; its tensor results are arrays. ``scalar``:
    NumPy answers a 0-d result with a scalar (np.float64: ufuncs, operators, reductions,
    integer indexing), where torch._numpy gives a 0-d array."""
    gargs = [_graph_arg(_resolved(tx, a)) for a in args]
    gkwargs = {k: _graph_arg(_resolved(tx, a)) for k, a in kwargs.items()}
    try:
        result = tx.gb.call("call_function", target, gargs, gkwargs, what=what)
    except TorchRuntimeError as e:
        # torch._numpy cannot run it on these arguments (or NumPy itself would raise): NumPy runs it
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise Unsupported(f"{what}: torch._numpy cannot trace this call ({first})",
                          "NumPy runs this part of the code.") from e
    out = _as_arrays(result)
    if scalar and isinstance(out, NumpyArrayValue) and out.fake.dim() == 0 and "out" not in kwargs:
        out.scalar = True
    return out


# NumPy functions and ndarray methods that answer a 0-d result with a scalar (ufuncs do too)
_SCALAR_RESULTS = frozenset((
    "sum", "prod", "mean", "std", "var", "max", "min", "amax", "amin", "argmax", "argmin", "ptp", "any",
    "all", "median", "average", "nansum", "nanprod", "nanmean", "nanstd", "nanvar", "nanmax", "nanmin",
    "nanargmax", "nanargmin", "count_nonzero", "dot", "vdot", "inner", "trace", "cumsum", "cumprod",
    "det", "norm", "matrix_rank", "cond", "slogdet", "quantile", "percentile", "nanmedian",
    "nanquantile", "nanpercentile", "around", "round", "clip", "einsum",
))
_CONSTANT_FOLDED = ("dtype", "finfo", "iinfo", "issubdtype", "promote_types", "result_type", "can_cast")


def _call_numpy_callable(tx: "Tracer", v: NumpyCallableValue, args: list, kwargs: dict) -> Value:
    if not enabled():
        raise Unsupported(f"NumPy function {v.name} with config.trace_numpy=False",
                          "Set xcompile.config.trace_numpy = True to trace NumPy code.")
    name = getattr(v.fn, "__name__", "")
    if v.fn in tuple(getattr(np, n) for n in _CONSTANT_FOLDED):
        consts = [hub.as_constant(a) for a in [*args, *kwargs.values()]]
        if all(ok for ok, _ in consts):
            vals = [c for _, c in consts]
            return ConstantValue(v.fn(*vals[:len(args)], **dict(zip(kwargs, vals[len(args):]))))
    if (getattr(v.fn, "__module__", "") or "").startswith("numpy.random"):
        raise Unsupported(f"{v.name}: NumPy's global random stream (np.random) is not traced",
                          "NumPy runs the call, so np.random.seed keeps its meaning.")
    if v.impl is None:
        raise Unsupported(f"NumPy function {v.name} (torch._numpy does not implement it)",
                          "NumPy runs this part of the code.")
    if name == "clip":
        kwargs = {{"a_min": "min", "a_max": "max"}.get(k, k): a for k, a in kwargs.items()}
    scalar = isinstance(v.fn, np.ufunc) or name in _SCALAR_RESULTS
    return numpy_call(tx, _function_target(v.impl, v.name), args, kwargs, v.name, scalar)


@functools.lru_cache(None)
def _function_target(impl: Any, name: str) -> numpy_function:
    return numpy_function(impl, name)


def _numpy_callable_attr(tx: "Tracer", v: NumpyCallableValue, name: str) -> Value:
    if isinstance(v.fn, np.ufunc) and name in ("reduce", "accumulate", "reduceat", "outer", "at"):
        raise Unsupported(f"ufunc method {v.name}.{name} (ufunc methods are not traced)",
                          "NumPy runs this part of the code.")
    if hasattr(v.fn, name):
        value = getattr(v.fn, name)
        if is_constant(value):
            return ConstantValue(value)
    raise Unsupported(f"attribute {name!r} of {v.name}")


# -- ndarray attributes and methods -----------------------------------------------------------------
_ATTR_NODES = ("T", "real", "imag", "flat")
_UNSUPPORTED_ATTRS = ("base", "flags", "ctypes", "data", "__array_interface__", "__array_struct__",
                      "__array_function__", "__array_wrap__", "__array_priority__")


@functools.lru_cache(None)
def _np_dtype(dtype: torch.dtype) -> Any:
    return torch.empty(0, dtype=dtype).numpy().dtype


def _tensor(v: NumpyArrayValue) -> TensorValue:
    return TensorValue(v.node, v.fake)


def _plain_shape(v: Value) -> Value:
    if isinstance(v, ConstantValue) and isinstance(v.value, torch.Size):
        return ConstantValue(tuple(v.value))
    if isinstance(v, TupleValue) and v.cls is torch.Size:
        return TupleValue(v.items)
    return v


def _array_attr(tx: "Tracer", v: NumpyArrayValue, name: str) -> Value:
    t = _tensor(v)
    if name in ("shape", "ndim"):
        return _plain_shape(hub.load_attr(tx, t, name))
    if name == "size":
        return hub.call_value(tx, TensorMethodValue(t, "numel"), [], {})
    if name == "dtype":
        try:
            return ConstantValue(_np_dtype(v.fake.dtype))
        except TypeError as e:
            raise Unsupported(f"ndarray.dtype of a {v.fake.dtype} array") from e
    if name == "itemsize":
        return ConstantValue(v.fake.element_size())
    if name in ("strides", "nbytes"):
        try:
            size = v.fake.element_size()
            value = tuple(int(s) * size for s in v.fake.stride()) if name == "strides" else int(v.fake.numel()) * size
        except Exception as e:
            raise Unsupported(f"ndarray.{name} of an array with symbolic sizes") from e
        return ConstantValue(value)
    if name in _ATTR_NODES:
        return numpy_call(tx, numpy_attr, [v, ConstantValue(name)], {}, f"ndarray.{name}")
    if name in _UNSUPPORTED_ATTRS:
        raise Unsupported(f"ndarray.{name} is not traced", "NumPy runs this part of the code.")
    impl = getattr(tnp.ndarray, name, None)
    if impl is None or not callable(impl):
        if hasattr(np.ndarray, name):
            raise Unsupported(f"ndarray.{name} (torch._numpy does not implement it)",
                              "NumPy runs this part of the code.")
        raise Unsupported(f"'numpy.ndarray' object has no attribute {name!r}")
    return NumpyMethodValue(v, name)


def _is_object_dtype(v: Value) -> bool:
    ok, c = hub.as_constant(v)
    return ok and (c is object or c == "O" or (isinstance(c, np.dtype) and c.kind in "OUSVMm"))


def _call_method(tx: "Tracer", m: NumpyMethodValue, args: list, kwargs: dict) -> Value:
    name = m.name
    if name in ("item", "tolist"):
        return hub.call_value(tx, TensorMethodValue(_tensor(m.array), name), args, kwargs)
    if name == "astype":
        dtype = kwargs.get("dtype", args[0] if args else None)
        if dtype is not None and _is_object_dtype(tx.resolve(dtype)):
            raise Unsupported("ndarray.astype to a non-numeric dtype (object, strings, datetimes)",
                              "NumPy runs this part of the code.")
    if name in ("tobytes", "tostring", "tofile", "dump", "dumps"):
        raise Unsupported(f"ndarray.{name}() is not traced", "NumPy runs this part of the code.")
    if name == "clip":
        kwargs = {{"a_min": "min", "a_max": "max"}.get(k, k): a for k, a in kwargs.items()}
    return numpy_call(tx, method_target(name), [m.array, *args], kwargs, f"ndarray.{name}", name in _SCALAR_RESULTS)


# -- operators, subscripts, iteration ----------------------------------------------------------------
_OUT_OF_PLACE = {operator.iadd: operator.add, operator.isub: operator.sub, operator.imul: operator.mul,
                 operator.itruediv: operator.truediv, operator.ifloordiv: operator.floordiv,
                 operator.imod: operator.mod, operator.ipow: operator.pow, operator.imatmul: operator.matmul,
                 operator.iand: operator.and_, operator.ior: operator.or_, operator.ixor: operator.xor,
                 operator.ilshift: operator.lshift, operator.irshift: operator.rshift}


def to_tensor_value(tx: "Tracer", v: NumpyArrayValue) -> Value:
    """``torch.as_tensor(arr)``: a tensor node viewing the array's data."""
    return tx.gb.call("call_function", torch.as_tensor, [_tensor(v)], {})


def _dtype_like(v: Value) -> tuple[bool, Any]:
    if isinstance(v, NumpyCallableValue) and isinstance(v.fn, type):
        return True, v.fn
    if isinstance(v, ConstantValue) and isinstance(v.value, (np.dtype, np.generic)):
        return True, v.value
    return False, None


def _binary_rule(tx: "Tracer", op: Any, a: Value, b: Value) -> Value | None:
    if not (isinstance(a, NumpyArrayValue) or isinstance(b, NumpyArrayValue)):
        (ok_a, ca), (ok_b, cb) = _dtype_like(a), _dtype_like(b)
        if (ok_a or ok_b) and op in (operator.eq, operator.ne):     # arr.dtype == np.float32
            ok_a, ca = (ok_a, ca) if ok_a else hub.as_constant(a)
            ok_b, cb = (ok_b, cb) if ok_b else hub.as_constant(b)
            if ok_a and ok_b:
                return pyops.fold(op, ca, cb)
        return None
    if op not in OPERATORS:
        return None
    if isinstance(a, TensorValue) or isinstance(b, TensorValue):
        # a tensor and an array: the tensor's operator wins (Tensor's __array_priority__), as eager
        a2 = to_tensor_value(tx, a) if isinstance(a, NumpyArrayValue) else a
        b2 = to_tensor_value(tx, b) if isinstance(b, NumpyArrayValue) else b
        return pyops.binary_op(tx, op, a2, b2)
    inplace = op in INPLACE
    if inplace and not isinstance(a, NumpyArrayValue):
        op, inplace = _OUT_OF_PLACE[op], False
    result = numpy_call(tx, operator_target(op), [a, b], {}, f"ndarray.{op.__name__}", not inplace)
    return a if inplace else result                    # `a += b` keeps the array (its data changed)


def _unary(tx: "Tracer", op: Any, a: NumpyArrayValue) -> Value:
    return numpy_call(tx, operator_target(op), [a], {}, f"ndarray.{op.__name__}", True)


def _truth(tx: "Tracer", v: NumpyArrayValue) -> bool:
    raise Unsupported("data-dependent branching: the condition is an ndarray", _DATA_DEPENDENT_HINT)


def _getitem(tx: "Tracer", container: NumpyArrayValue, key: Value, subclass: Value) -> Value:
    ok, k = hub.as_constant(key)
    ints = ok and all(type(i) is int for i in (k if type(k) is tuple else (k,)))   # a[0], a[1, 2]
    return numpy_call(tx, operator_target(operator.getitem), [container, key], {}, "ndarray.__getitem__", ints)


def _setitem(tx: "Tracer", container: NumpyArrayValue, key: Value, value: Value) -> None:
    numpy_call(tx, operator_target(operator.setitem), [container, key, value], {}, "ndarray.__setitem__")


def _length(tx: "Tracer", v: NumpyArrayValue) -> int:
    if v.fake.dim() == 0:
        raise Unsupported("len() of a 0-d array (TypeError: len() of unsized object)")
    ok, n = hub.as_constant(hub.load_attr(tx, _tensor(v), "shape"), specialize=True)
    if not ok:
        raise Unsupported("len() of an array with a symbolic size")
    return int(n[0])


def _items(tx: "Tracer", v: NumpyArrayValue) -> list[Value]:
    return [_getitem(tx, v, ConstantValue(i), v) for i in range(_length(tx, v))]


# -- tensors <-> arrays -------------------------------------------------------------------------------
# wrap_numpy's own x.numpy() (api_numpy._to_numpy): compiled, the NumPy code is differentiable
_WRAP_NUMPY_FILE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "api_numpy.py")


def _tensor_numpy(tx: "Tracer", t: TensorValue, args: list, kwargs: dict) -> Value | None:
    """``x.numpy()``: an array viewing the tensor (``force=True``: detached, on the CPU)."""
    if not enabled():
        return None
    force = kwargs.get("force", args[0] if args else ConstantValue(False))
    ok, force_value = hub.as_constant(tx.resolve(force))
    if not ok:
        raise Unsupported("Tensor.numpy(force=<not a constant>)")
    in_wrap_numpy = tx.current is not None and tx.current.code.co_filename == _WRAP_NUMPY_FILE
    if not force_value and t.fake.requires_grad and not in_wrap_numpy:
        # eager raises "Can't call numpy() on Tensor that requires grad": the break lets it
        raise Unsupported("Tensor.numpy() on a tensor that requires grad", "Eager runs it (and raises).")
    if force_value:
        d = tx.gb.call("call_method", "detach", [t], {})
        r = tx.gb.call("call_method", "cpu", [d], {})
    else:
        r = tx.gb.call("call_method", "view_as", [t, t], {})
    assert isinstance(r, TensorValue)
    return NumpyArrayValue(r.node, r.fake)


def _first_array(tx: "Tracer", args: list) -> NumpyArrayValue | None:
    first = tx.resolve(args[0]) if args else None
    return first if isinstance(first, NumpyArrayValue) else None


def _from_numpy(tx: "Tracer", args: list, kwargs: dict) -> Value | None:
    arr = _first_array(tx, args)
    if arr is None:
        return None
    # on the CPU, as eager's, also under `with torch.device(d)` (where the array lives on d)
    return tx.gb.call("call_function", torch.as_tensor, [_tensor(arr), *args[1:]],
                      {**kwargs, "device": ConstantValue(torch.device("cpu"))})


def _as_tensor(tx: "Tracer", args: list, kwargs: dict, target: Any = torch.as_tensor) -> Value | None:
    arr = _first_array(tx, args)
    if arr is None:
        return None
    gk = {k: _graph_arg(tx.resolve(a)) for k, a in kwargs.items()}
    return tx.gb.call("call_function", target, [_tensor(arr), *args[1:]], gk)


def _torch_tensor(tx: "Tracer", args: list, kwargs: dict) -> Value | None:
    return _as_tensor(tx, args, kwargs, tensor_copy)


def _when_enabled(rule: Any) -> Any:
    def guarded(*a: Any) -> Any:
        return rule(*a) if enabled() else None
    return guarded


def _array_maker(b: Any, v: NumpyArrayValue) -> str:
    return cast(str, b.tensor_output(v))     # the compiled graph hands the output back as an ndarray


if np is not None:
    register_caller(NumpyCallableValue, _call_numpy_callable)
    register_caller(NumpyMethodValue, _call_method)
    register_reader(NumpyArrayValue, _array_attr)
    register_reader(NumpyCallableValue, _numpy_callable_attr)
    register_real_object_field(NumpyCallableValue, "fn")
    pyops.register_binary_rule("numpy", _binary_rule, before="tensor")
    pyops.register_value_kind(NumpyArrayValue, truth=_truth, getitem=_getitem, setitem=_setitem, unary=_unary)
    register_iterable(NumpyArrayValue, items=_items, length=_length)
    register_value_maker(NumpyArrayValue, _array_maker)
    register_tensor_method_rule("numpy", _tensor_numpy)
    register_torch_op_rule(torch.from_numpy, _when_enabled(_from_numpy))
    register_torch_op_rule(torch.as_tensor, _when_enabled(_as_tensor))
    register_torch_op_rule(torch.asarray, _when_enabled(_as_tensor))
    register_torch_op_rule(torch.tensor, _when_enabled(_torch_tensor))
    wrap.register_row(lambda o: enabled() and _is_array(o), _array_input)
    wrap.register_row(lambda o: enabled() and isinstance(o, np.dtype), _dtype_row)
    wrap.register_row(lambda o: enabled() and _is_numpy_callable(o), _callable_row)
