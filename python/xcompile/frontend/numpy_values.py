"""NumPy arrays in the trace: the values, and the graph targets that run NumPy code on tensors.

An ``np.ndarray`` in the traced code is a ``NumpyArrayValue``: a graph node whose example value
is a (fake) tensor, with NumPy semantics. A call of a NumPy function, an ndarray method or
operator on such values is one graph node whose target is one of the wrappers below: it views
its tensor arguments as ``torch._numpy.ndarray`` (torch's NumPy written with torch ops), calls
torch._numpy's implementation and hands back tensors, as torch.compile does. The backends see
torch ops when they trace the graph (an AOT backend traces through the wrapper to ATen).

A node is an array or a tensor, never both: ``x.numpy()`` and ``torch.from_numpy(a)`` make a new
node (``view_as`` / ``as_tensor``), so the graph outputs of one node convert one way.
"""
from __future__ import annotations

import functools
import operator
from dataclasses import dataclass
from typing import Any, Callable

import torch

from .values import Value

try:
    import numpy as np
    import torch._numpy as tnp
except ImportError:                      # NumPy is optional: nothing here is used without it
    np = None                            # type: ignore[assignment]
    tnp = None                           # type: ignore[assignment]


@dataclass(eq=False)
class NumpyArrayValue(Value):
    """An ``np.ndarray``: ``node`` computes its data as a tensor, ``fake`` is that tensor's
    example value. ``source`` is set for an array that is a graph input."""

    node: torch.fx.Node
    fake: torch.Tensor
    source: Any = None
    covered: bool = False
    numpy_array = True                   # graph_builder.finish: this output is handed back as an ndarray
    scalar: bool = False                 # a NumPy scalar (np.float64 ...): a 0-d result of a ufunc or reduction

    def python_type(self) -> type:
        return np.ndarray

    def describe(self) -> str:
        return f"ndarray {self.node.name}"


@dataclass(eq=False)
class NumpyMethodValue(Value):
    """``arr.name`` looked up as a method, not called yet."""

    array: NumpyArrayValue
    name: str

    def describe(self) -> str:
        return f"method ndarray.{self.name}"


@dataclass(eq=False)
class NumpyCallableValue(Value):
    """A NumPy function, ufunc or scalar type (``np.sum``, ``np.add``, ``np.float32``) and the
    torch._numpy callable that implements it (None: torch._numpy has none)."""

    fn: Any
    impl: Any
    name: str
    source: Any = None
    covered: bool = False

    def python_type(self) -> type:
        return type(self.fn)

    def describe(self) -> str:
        return f"NumPy callable {self.name}"


# -- graph targets (run on real tensors by the graph, on fakes while tracing) -------------------------
def to_tensor(value: Any) -> Any:
    """torch._numpy results -> tensors (tuples and lists kept)."""
    if isinstance(value, tnp.ndarray):
        return value.tensor
    if isinstance(value, np.ndarray):
        return torch.as_tensor(value)
    if isinstance(value, (tuple, list)):
        return type(value)(to_tensor(v) for v in value)
    return value


def _numpy_defaults(fn: Callable, *args: Any, **kwargs: Any) -> Any:
    """``fn`` with torch's default dtype float64, as NumPy's: torch._numpy leaves some results to
    it (``int32_array / 2`` is float64 in NumPy, float32 under torch's usual default)."""
    prev = torch.get_default_dtype()
    if prev is torch.float64:
        return fn(*args, **kwargs)
    torch.set_default_dtype(torch.float64)
    try:
        return fn(*args, **kwargs)
    finally:
        torch.set_default_dtype(prev)


def _true_divide_args(args: tuple) -> tuple:
    """Integer / integer is float64 in NumPy; torch's division of integers gives its default
    dtype at run time (float32 in an ATen graph run later): divide float64 copies instead."""
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    if any(t.is_floating_point() or t.is_complex() for t in tensors):
        return args
    return tuple(a.to(torch.float64) if isinstance(a, torch.Tensor) else a for a in args)


def _as_array(value: Any) -> Any:
    return tnp.ndarray(value) if isinstance(value, torch.Tensor) else value


class numpy_function:
    """``impl(*args)`` with tensors read as ndarrays by torch._numpy's normalizers."""

    def __init__(self, impl: Callable, name: str):
        self.impl = impl
        self.__name__ = "wrapped_" + name.replace(".", "_")

    def __repr__(self) -> str:
        return f"<NumPy {self.__name__[8:]} on tensors>"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.impl in _TRUE_DIVIDES:
            args = _true_divide_args(args)
        return to_tensor(_numpy_defaults(self.impl, *args, **kwargs))


class numpy_method:
    """``ndarray.<name>(*args)`` on the tensor ``args[0]``."""

    def __init__(self, name: str):
        self.name = name
        self.__name__ = "wrapped_" + name

    def __repr__(self) -> str:
        return f"<ndarray.{self.name} on tensors>"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        fn = getattr(_as_array(args[0]), self.name)
        return to_tensor(_numpy_defaults(fn, *[_as_array(a) for a in args[1:]], **kwargs))


class numpy_operator:
    """An operator (``operator.add``, ``getitem``, ``setitem``...) with ndarray semantics."""

    def __init__(self, op: Callable):
        self.op = op
        self.__name__ = "wrapped_" + op.__name__

    def __repr__(self) -> str:
        return f"<ndarray {self.op.__name__} on tensors>"

    def __call__(self, *args: Any) -> Any:
        if self.op is operator.truediv:
            args = _true_divide_args(args)
        return to_tensor(_numpy_defaults(self.op, *[_as_index(a) for a in args]))


def _as_index(value: Any) -> Any:
    if isinstance(value, tuple):
        return tuple(_as_index(v) for v in value)
    return _as_array(value)


def numpy_attr(t: torch.Tensor, name: str) -> Any:
    """``ndarray.<name>`` (T, real, imag, flat) of the tensor ``t``."""
    return to_tensor(getattr(tnp.ndarray(t), name))


def tensor_copy(t: torch.Tensor, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> torch.Tensor:
    """``torch.tensor(arr)``: a copy of the array's data."""
    out = t.to(dtype=dtype, device=device, copy=True).detach()
    return out.requires_grad_(True) if requires_grad else out


_TRUE_DIVIDES = frozenset() if tnp is None else frozenset({getattr(tnp, "true_divide"), getattr(tnp, "divide")})


@functools.lru_cache(None)
def operator_target(op: Callable) -> numpy_operator:
    return numpy_operator(op)


@functools.lru_cache(None)
def method_target(name: str) -> numpy_method:
    return numpy_method(name)


# -- NumPy callables -> torch._numpy ----------------------------------------------------------------
@functools.lru_cache(None)
def np_to_tnp() -> dict[int, tuple[Any, Any, str]]:
    """id(NumPy callable) -> (the callable, torch._numpy's implementation, its name)."""
    table: dict[int, tuple[Any, Any, str]] = {}
    if np is None:
        return table
    modules = [(np, tnp, "np"), (np.fft, tnp.fft, "np.fft"), (np.linalg, tnp.linalg, "np.linalg")]
    for np_mod, tnp_mod, prefix in modules:
        for name, impl in vars(tnp_mod).items():
            if name.startswith("_") or not callable(impl) or isinstance(impl, type(np)):
                continue
            real = getattr(np_mod, name, None)
            if real is None or not callable(real) or id(real) in table:
                continue
            table[id(real)] = (real, impl, f"{prefix}.{name}")
    return table


def numpy_module_names() -> tuple[str, ...]:
    return ("numpy",)


# The operators an ndarray implements (torch._numpy's ndarray dunders do NEP 50 promotion).
OPERATORS: tuple[Callable, ...] = (
    operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv, operator.mod,
    operator.pow, operator.matmul, operator.and_, operator.or_, operator.xor, operator.lshift,
    operator.rshift, operator.lt, operator.le, operator.eq, operator.ne, operator.gt, operator.ge,
    operator.iadd, operator.isub, operator.imul, operator.itruediv, operator.ifloordiv, operator.imod,
    operator.ipow, operator.imatmul, operator.iand, operator.ior, operator.ixor, operator.ilshift,
    operator.irshift,
)
INPLACE: frozenset[Callable] = frozenset(OPERATORS[19:])
