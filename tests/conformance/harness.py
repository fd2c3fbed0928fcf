"""A ``make_test``-style harness: a plain program becomes a compile-vs-eager check.

A *case* is a program (a function, or a builder that returns a function or module) plus an
input spec.  ``run_case`` builds the program twice from the same seed (one copy runs eagerly,
the other is compiled with ``fullgraph=True`` and a counting backend), then for two rounds
materializes fresh random inputs twice from the same seed and checks that

* outputs match eager: nesting/container types, non-tensor values, and for every tensor its
  dtype, shape, strides, values, requires_grad and which input it aliases;
* the inputs (and a module's state) after the call match eager, so in-place ops and
  container mutations are checked too;
* gradients match eager when the case asks for it (``grad=True``);
* exactly one graph was compiled, and the second round (new values, same shapes) did not
  recompile.

The compiler is a parameter (``XCOMPILE`` or ``TORCH_REFERENCE``) so the same table validates
that a program is legitimately capturable whole by ``torch.compile`` before it is used to
judge xcompile.
"""
from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field
from typing import Callable

import torch

# --------------------------------------------------------------------------- input specs


@dataclass(frozen=True)
class R:
    """A float tensor from ``randn``; ``nc=True`` gives a non-contiguous (transposed) one."""

    shape: tuple
    dtype: torch.dtype = torch.float32
    nc: bool = False
    grad: bool = False

    def make(self):
        if self.nc and len(self.shape) >= 2:
            t = torch.randn(*self.shape[:-2], self.shape[-1], self.shape[-2], dtype=self.dtype)
            t = t.transpose(-1, -2)
        else:
            t = torch.randn(*self.shape, dtype=self.dtype)
        return t.requires_grad_() if self.grad else t


def rn(*shape, dtype=torch.float32):
    return R(tuple(shape), dtype)


def nc(*shape, dtype=torch.float32):
    """Non-contiguous float tensor of the given (logical) shape."""
    return R(tuple(shape), dtype, nc=True)


def rg(*shape, dtype=torch.float32):
    """Leaf float tensor that requires grad."""
    return R(tuple(shape), dtype, grad=True)


@dataclass(frozen=True)
class I:  # noqa: E742
    """An integer tensor in ``[low, high)``."""

    shape: tuple
    high: int = 10
    low: int = 0
    dtype: torch.dtype = torch.int64

    def make(self):
        return torch.randint(self.low, self.high, self.shape, dtype=self.dtype)


def ri(*shape, high=10, low=0, dtype=torch.int64):
    return I(tuple(shape), high, low, dtype)


@dataclass(frozen=True)
class B:
    """A bool tensor."""

    shape: tuple

    def make(self):
        return torch.rand(*self.shape) > 0.5


def rb(*shape):
    return B(tuple(shape))


@dataclass(frozen=True)
class Pos:
    """A strictly positive float tensor (for log/sqrt/div)."""

    shape: tuple
    dtype: torch.dtype = torch.float32

    def make(self):
        return torch.rand(*self.shape, dtype=self.dtype) + 0.5


def rp(*shape, dtype=torch.float32):
    return Pos(tuple(shape), dtype)


@dataclass(frozen=True)
class Perm:
    """A random permutation of ``range(n)`` (distinct indices, safe for index_put)."""

    n: int
    k: int | None = None

    def make(self):
        p = torch.randperm(self.n)
        return p if self.k is None else p[: self.k]


@dataclass(frozen=True)
class Obj:
    """A fresh object per call: ``factory(*materialized args)`` (user classes, namedtuples...)."""

    factory: Callable
    args: tuple = ()

    def make(self):
        return self.factory(*materialize(self.args))


def obj(factory, *args):
    return Obj(factory, tuple(args))


def materialize(spec):
    """Turn a spec (possibly nested in tuples/lists/dicts) into fresh values."""
    if hasattr(spec, "make") and callable(spec.make):
        return spec.make()
    if type(spec) is tuple:
        return tuple(materialize(s) for s in spec)
    if type(spec) is list:
        return [materialize(s) for s in spec]
    if isinstance(spec, dict):                   # dict, OrderedDict (kept as its own type)
        return type(spec)((k, materialize(v)) for k, v in spec.items())
    return spec


# --------------------------------------------------------------------------- cases


@dataclass
class Case:
    name: str
    build: Callable[[], Callable]          # called twice under one seed: eager copy, compiled copy
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    grad: bool = False                     # also compare gradients of the inputs/parameters
    rtol: float | None = None
    atol: float | None = None
    # program -> the state its calls change outside the inputs (globals, closures, attributes);
    # compared between the eager and the compiled copy after every call
    state: Callable | None = None

    def __repr__(self) -> str:
        return f"Case({self.name})"


class CaseTable:
    """One family of programs.  ``@table.case(spec, ...)`` registers a plain function;
    ``table.build(name, builder, spec, ...)`` registers a builder (modules, closures)."""

    def __init__(self, family: str):
        self.family = family
        self.cases: list[Case] = []

    def _add(self, case: Case) -> None:
        assert all(c.name != case.name for c in self.cases), f"duplicate case {case.name}"
        self.cases.append(case)

    def case(self, *args, kwargs=None, grad=False, rtol=None, atol=None, name=None, state=None):
        def deco(fn):
            self._add(Case(f"{self.family}.{name or fn.__name__}", lambda: fn, args, kwargs or {},
                           grad, rtol, atol, state))
            return fn
        return deco

    def build(self, name, builder, *args, kwargs=None, grad=False, rtol=None, atol=None, state=None):
        self._add(Case(f"{self.family}.{name}", builder, args, kwargs or {}, grad, rtol, atol, state))


# --------------------------------------------------------------------------- compilers


class Compiler:
    """How to compile one program with a counting backend; the same table runs on both."""

    name = "?"

    def reset(self) -> None:
        raise NotImplementedError

    def counter(self):
        raise NotImplementedError

    def compile(self, fn, backend):
        raise NotImplementedError


class XCompile(Compiler):
    name = "xcompile"

    def reset(self):
        import xcompile
        xcompile.reset()

    def counter(self):
        import xcompile.testing
        return xcompile.testing.CompileCounter()

    def compile(self, fn, backend):
        import xcompile
        return xcompile.compile(fn, fullgraph=True, backend=backend)


class TorchReference(Compiler):
    name = "torch.compile"

    def reset(self):
        import torch._dynamo
        torch._dynamo.reset()

    def counter(self):
        import torch._dynamo.testing
        return torch._dynamo.testing.CompileCounter()

    def compile(self, fn, backend):
        return torch.compile(fn, fullgraph=True, backend=backend)


XCOMPILE = XCompile()
TORCH_REFERENCE = TorchReference()


# --------------------------------------------------------------------------- comparison


def _storages(values) -> dict[int, int]:
    """data_ptr of each input tensor's storage -> position among the flattened inputs."""
    out: dict[int, int] = {}
    for i, v in enumerate(_flat_tensors(values)):
        out.setdefault(v.untyped_storage().data_ptr(), i)
    return out


def _flat_tensors(value) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _flat_tensors(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _flat_tensors(v)]
    return []


def assert_same(actual, expected, *, path="out", rtol=None, atol=None,
                actual_inputs=None, expected_inputs=None) -> None:
    """Exact structural comparison; tensors by dtype, shape, stride, requires_grad, value and
    (when the inputs are given) by which input's storage they alias."""
    ta, te = type(actual), type(expected)
    assert ta is te, f"{path}: type {ta.__name__} != eager {te.__name__}"
    if isinstance(expected, torch.Tensor):
        assert actual.dtype == expected.dtype, f"{path}: dtype {actual.dtype} != eager {expected.dtype}"
        assert actual.shape == expected.shape, (
            f"{path}: shape {tuple(actual.shape)} != eager {tuple(expected.shape)}")
        assert actual.device == expected.device, f"{path}: device {actual.device} != eager {expected.device}"
        assert actual.stride() == expected.stride(), (
            f"{path}: stride {actual.stride()} != eager {expected.stride()}")
        assert actual.requires_grad == expected.requires_grad, (
            f"{path}: requires_grad {actual.requires_grad} != eager {expected.requires_grad}")
        torch.testing.assert_close(actual.detach(), expected.detach(), rtol=rtol, atol=atol,
                                   equal_nan=True, check_stride=True, msg=lambda m: f"{path}: {m}")
        if actual_inputs is not None and expected.numel() > 0:
            sa = _storages(actual_inputs).get(actual.untyped_storage().data_ptr())
            se = _storages(expected_inputs).get(expected.untyped_storage().data_ptr())
            assert sa == se, f"{path}: aliases input #{sa}, eager aliases input #{se}"
        return
    if isinstance(expected, (tuple, list)):
        assert len(actual) == len(expected), f"{path}: length {len(actual)} != eager {len(expected)}"
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_same(a, e, path=f"{path}[{i}]", rtol=rtol, atol=atol,
                        actual_inputs=actual_inputs, expected_inputs=expected_inputs)
        return
    if isinstance(expected, dict):
        assert list(actual.keys()) == list(expected.keys()), (
            f"{path}: keys {list(actual.keys())} != eager {list(expected.keys())}")
        for k in expected:
            assert_same(actual[k], expected[k], path=f"{path}[{k!r}]", rtol=rtol, atol=atol,
                        actual_inputs=actual_inputs, expected_inputs=expected_inputs)
        return
    if _is_program_object(expected):          # objects of the programs' own classes: by state
        assert_same(vars(actual), vars(expected), path=f"{path}.__dict__", rtol=rtol, atol=atol,
                    actual_inputs=actual_inputs, expected_inputs=expected_inputs)
        return
    if isinstance(expected, float) and math.isnan(expected):
        assert math.isnan(actual), f"{path}: {actual!r} != eager nan"
        return
    assert actual == expected, f"{path}: {actual!r} != eager {expected!r}"


def _is_program_object(obj) -> bool:
    """An instance of a class defined by a conformance program (not a module): compared by vars()."""
    cls = type(obj)
    return (cls.__module__ or "").startswith(__name__.rsplit(".", 1)[0] + ".programs_") \
        and not isinstance(obj, (torch.nn.Module, BaseException, tuple)) and hasattr(obj, "__dict__")


def _module_state(obj) -> dict:
    if isinstance(obj, torch.nn.Module):
        return dict(obj.state_dict(keep_vars=True))
    return {}


def _grads(inputs, program) -> list:
    leaves = [t for t in _flat_tensors(inputs) if t.requires_grad and t.is_leaf]
    if isinstance(program, torch.nn.Module):
        leaves += [p for p in program.parameters() if p.requires_grad]
    return [t.grad for t in leaves]


def _backward(out) -> None:
    ts = [t for t in _flat_tensors(out) if t.requires_grad and t.is_floating_point()]
    assert ts, "grad=True but no output requires grad"
    sum((t * torch.linspace(0.5, 1.5, t.numel()).reshape(t.shape)).sum() for t in ts).backward()


# --------------------------------------------------------------------------- running


@contextlib.contextmanager
def _seeded(seed: int):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


def run_case(case: Case, compiler: Compiler, *, rounds: int = 2) -> None:
    compiler.reset()
    with _seeded(1234):
        eager_prog = case.build()
    with _seeded(1234):
        compiled_target = case.build()
    cnt = compiler.counter()
    compiled = compiler.compile(compiled_target, cnt)
    tol = dict(rtol=case.rtol, atol=case.atol)
    try:
        for rnd in range(rounds):
            seed = 100 + 17 * rnd
            with _seeded(seed):
                args_e = materialize(case.args)
                kwargs_e = materialize(case.kwargs)
            with _seeded(seed):
                args_c = materialize(case.args)
                kwargs_c = materialize(case.kwargs)
            inputs_e, inputs_c = (args_e, kwargs_e), (args_c, kwargs_c)

            expected = eager_prog(*args_e, **kwargs_e)
            actual = compiled(*args_c, **kwargs_c)
            where = f"[{case.name}, call {rnd + 1}]"
            assert_same(actual, expected, path=f"{where} out", **tol,
                        actual_inputs=inputs_c, expected_inputs=inputs_e)
            assert_same(inputs_c, inputs_e, path=f"{where} inputs after call", **tol)
            assert_same(_module_state(compiled_target), _module_state(eager_prog),
                        path=f"{where} module state after call", **tol)
            if case.state is not None:
                assert_same(case.state(compiled_target), case.state(eager_prog),
                            path=f"{where} program state after call", **tol)
            if case.grad:
                _backward(expected)
                _backward(actual)
                assert_same(_grads(inputs_c, compiled_target), _grads(inputs_e, eager_prog),
                            path=f"{where} grads", **tol)
            assert cnt.frame_count == 1, (
                f"{where}: {compiler.name} compiled {cnt.frame_count} graphs, expected exactly 1"
                + (" (recompiled on fresh inputs of the same shapes)" if rnd else ""))
            assert cnt.op_count >= 1, f"{where}: the graph has no ops"
    finally:
        compiler.reset()
