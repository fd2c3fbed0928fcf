"""The one place that knows how torch versions differ (issue #30).

xcompile supports torch 2.11 to 2.14. Private torch names that moved, changed shape or went
away between those versions are read here and nowhere else; the rest of the package imports
the answers. Each name has a test in ``tests/unit/test_torch_compat.py`` that fails, naming
the symbol, when a torch version moves it again.

What differs, by torch version:

- ``torch.autograd.Function.apply``: a Python ``classmethod`` up to 2.13; from 2.14 a C
  ``classmethod_descriptor`` of ``torch._C._FunctionBase``, so ``MyFn.apply`` is a bound builtin
  method with ``__self__`` the class, and there is no ``__func__`` to mark.
- torch.fx's "symbolic tracing is on" flag: the module global ``_is_fx_tracing_flag`` up to 2.13;
  from 2.14 a thread-local read by ``torch.fx._symbolic_trace._get_is_fx_tracing()``.
- the fake-tensor rule of ``aten.select.int`` (``torch._subclasses.fake_impls``): torch 2.11's
  and 2.12's do not check the index against the size, so ``x.select(0, 99)`` on a 4-row tensor traced as
  a view at storage offset 99 instead of raising eager's IndexError. A compiled graph then read
  past the tensor (another row of its storage: a wrong answer where eager raises) or failed in
  ``as_strided`` with a RuntimeError. On those the rule is wrapped here with 2.13's check.
- the fake-tensor rules of ``aten._unique2``, ``aten.unique_dim`` and ``aten.unique_consecutive``:
  torch 2.11's make the inverse indices and the counts in the input's dtype (eager's are int64),
  so with ``config.capture_dynamic_output_shape_ops`` a compiled ``torch.unique(x,
  return_inverse=True)[1].dtype`` on a float ``x`` said float32. On 2.11 they are wrapped here.
- ShapeEnv's map from a backed symbol to its value: ``backed_var_to_val`` on 2.11 to 2.14, where
  the older ``var_to_val`` warns; read through ``shape_env_hints``.
- ``torch.clamp(x, min=nan)`` with the other bound None: torch 2.11's eager kernel ignores the nan
  bound (x unchanged); 2.12 and later give nan (``CLAMP_ONE_NAN_BOUND_IGNORED``, kernels/lowering.py).
- ``torch.cond`` and ``torch.while_loop`` called outside dynamo compile a wrapper of their
  higher-order op with ``torch.compile``. Under make_fx (xcompile's AOT trace of a graph that
  holds one) 2.13 and 2.14 skip that frame and call the op; 2.11 traces it with dynamo inside
  our trace and fails ("Mixing fake modes NYI"). A graph calls the ops themselves
  (``torch._higher_order_ops.cond.cond_op``, ``.while_loop.while_loop_op``), what those two
  functions call on every version: no dynamo in between, eagerly or traced.
"""
from __future__ import annotations

import os
import sys
import types
from typing import Any

import torch
import torch._subclasses.fake_impls as _fake_impls
import torch.fx._symbolic_trace as _fx_symbolic_trace
import torch.utils._pytree as pytree
from torch._higher_order_ops.cond import cond_op as _cond_op
from torch._higher_order_ops.while_loop import while_loop_op as _while_loop_op
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import guard_or_false, statically_known_true

from ._torch_check import mismatch

TORCH_VERSION: tuple[int, int] = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2])  # type: ignore[assignment]

# -- torch.autograd.Function.apply ------------------------------------------------------------------
_APPLY = next(vars(c)["apply"] for c in torch.autograd.Function.__mro__ if "apply" in vars(c))
# the Python function behind Function.apply (torch <= 2.13), or None where apply is C code
AUTOGRAD_FUNCTION_APPLY: Any = getattr(_APPLY, "__func__", None)


def autograd_function_of_apply(obj: Any) -> type | None:
    """The autograd.Function subclass when ``obj`` is ``SomeFunction.apply`` made by a torch
    whose ``apply`` is C code (2.14: a builtin method bound to the class), else None."""
    if AUTOGRAD_FUNCTION_APPLY is not None or not isinstance(obj, types.BuiltinMethodType):
        return None
    owner = getattr(obj, "__self__", None)
    if (isinstance(owner, type) and issubclass(owner, torch.autograd.Function)
            and getattr(obj, "__name__", None) == "apply" and getattr(owner, "apply", None) == obj):
        return owner
    return None


# -- torch.fx symbolic tracing ------------------------------------------------------------------------
_get_is_fx_tracing = getattr(_fx_symbolic_trace, "_get_is_fx_tracing", None)


def is_fx_tracing() -> bool:
    """torch.fx is tracing symbolically (symbolic_trace, make_fx), without the warning that
    torch.fx.is_fx_tracing() may print."""
    if _get_is_fx_tracing is not None:
        return bool(_get_is_fx_tracing())
    return bool(_fx_symbolic_trace._is_fx_tracing_flag)


# -- ShapeEnv: the values of backed symbols ----------------------------------------------------------
def shape_env_hints(env: Any) -> dict:
    """symbol -> the value it had when it was made (a backed symbol's hint): ShapeEnv's
    ``backed_var_to_val`` (torch 2.11 to 2.14; ``var_to_val``, its older name, warns there)."""
    hints = getattr(env, "backed_var_to_val", None)
    return hints if hints is not None else env.var_to_val


# -- aten.clamp with one bound, a nan -----------------------------------------------------------------
# torch 2.11's eager ``torch.clamp(x, min=nan)`` (the Scalar overload, the other bound None) returns x
# unchanged; 2.12 and later return nan, as they do for two bounds and for clamp_min / clamp_max
CLAMP_ONE_NAN_BOUND_IGNORED = TORCH_VERSION < (2, 12)


# -- fake tensors: aten.select.int's index range -------------------------------------------------------
# torch 2.11's and 2.12's rule (fake_impls.meta_select) reads the index without checking it (2.13 added the check)
FAKE_SELECT_CHECKS_RANGE = TORCH_VERSION >= (2, 13)


def _range_checked_select(rule: Any) -> Any:
    def select(fake_mode: Any, func: Any, self: Any, dim: int, index: Any) -> Any:
        if not self.is_sparse and self.dim() != 0:
            d = dim if dim >= 0 else dim + self.dim()
            size = self.size(d)
            if guard_or_false(index >= size) or guard_or_false(index < -size):
                torch._check_index(False, lambda: f"select(): index {index} out of range for tensor of size "
                                                  f"{list(self.size())} at dimension {d}")
        return rule(fake_mode, func, self, dim, index)
    select.__wrapped__ = rule  # type: ignore[attr-defined]
    return select


if not FAKE_SELECT_CHECKS_RANGE:
    _select = torch.ops.aten.select.int
    _fake_impls.op_implementations_dict[_select] = _range_checked_select(_fake_impls.op_implementations_dict[_select])
    FakeTensorMode.cache_clear()        # nothing traced before this import keeps the unchecked view


# -- fake tensors: unique's inverse indices and counts --------------------------------------------------
# torch 2.11's rules (fake_impls._unique) make them in the input's dtype (2.12: int64, as eager)
FAKE_UNIQUE_COUNTS_INT64 = TORCH_VERSION >= (2, 12)


def _int64_inverse_and_counts(rule: Any) -> Any:
    def unique(fake_mode: Any, func: Any, *args: Any, **kwargs: Any) -> Any:
        out = rule(fake_mode, func, *args, **kwargs)
        if out is NotImplemented:
            return out
        return (out[0], *(t if t.dtype == torch.int64 else t.new_empty(t.shape, dtype=torch.int64) for t in out[1:]))
    unique.__wrapped__ = rule  # type: ignore[attr-defined]
    return unique


if not FAKE_UNIQUE_COUNTS_INT64:
    for _op in (torch.ops.aten._unique2.default, torch.ops.aten.unique_dim.default,
                torch.ops.aten.unique_consecutive.default):
        _fake_impls.op_implementations_dict[_op] = _int64_inverse_and_counts(_fake_impls.op_implementations_dict[_op])
    FakeTensorMode.cache_clear()


# -- torch.cond / torch.while_loop in a graph -----------------------------------------------------------
def cond(pred: Any, true_fn: Any, false_fn: Any, operands: tuple) -> Any:
    """``torch.cond(pred, true_fn, false_fn, operands)`` (a tensor predicate, flat tensor operands).
    The op's branches return flat tuples (its autograd iterates them): the branches' results are
    flattened here and the op's unflattened as they were."""
    spec: list[Any] = [None]

    def flat(fn: Any) -> Any:
        def branch(*a: Any) -> tuple:
            out, spec[0] = pytree.tree_flatten(fn(*a))
            return tuple(out)
        return branch
    out = _cond_op(pred, flat(true_fn), flat(false_fn), tuple(operands))
    return pytree.tree_unflatten(list(out), spec[0])


def while_loop(cond_fn: Any, body_fn: Any, carried: tuple, additional: tuple = ()) -> Any:
    """``torch.while_loop(cond_fn, body_fn, carried)`` (flat tensor carried inputs; ``additional``:
    more inputs both functions read after the carried ones, not carried)."""
    return _while_loop_op(cond_fn, body_fn, tuple(carried), tuple(additional))


# -- xcompile._C: where this torch keeps what the C++ guards read (issue #30 step 2) ---------------
# _C is built once and runs on every torch in the range: it calls torch's stable C shim and a few
# exported functions, and reads some TensorImpl fields at offsets given here (csrc/torch_compat.h).
# Per torch minor: TensorImpl's dispatch key set, its Storage, StorageImpl's size in bytes,
# TensorImpl's SizesAndStrides, its dtype (the 8 bytes from there: dtype, device, bit fields) and
# its autograd meta. 2.13 dropped PyObjectSlot's interpreter pointer: every TensorImpl field after
# it sits 8 bytes earlier than in 2.11 and 2.12. Checked below against what torch's Python API
# says, so a wrong entry is an ImportError, not a wrong read.
C_LAYOUT: dict[tuple[int, int], tuple[int, int, int, int, int, int]] = {
    (2, 11): (176, 16, 48, 64, 168, 24), (2, 12): (176, 16, 48, 64, 168, 24),
    (2, 13): (168, 16, 48, 56, 160, 24), (2, 14): (168, 16, 48, 56, 160, 24)}
# in those 8 bytes (2.11 to 2.14): the dtype (2 bytes) and the optional<Device> (3); then in the
# bit fields, sizes_strides_policy_ (0x0c), has_symbolic_sizes_strides_ (0x10) and device_policy_
# (0x80) of byte 6: set, sizes, strides or device come from a virtual call
_DTYPE_DEVICE_MASK = 0x000000FFFFFFFFFF
_POLICY_MASK = 0x009C000000000000
# the backend bits of a DispatchKeySet (16 backend components, 2.11 to 2.14): an excluded key
# removes its functionality bit, never a backend bit (c10::DispatchKeySet::operator-)
_BACKEND_MASK = 0xFFFF
def _c_abi_probes() -> list[torch.Tensor]:
    """Tensors whose key sets differ (autograd, conjugate and negative views, inference, meta,
    sparse, a parameter, a subclass) for checking what _C reads."""
    with torch.inference_mode():
        inference = torch.ones(3)
    probes = [torch.ones(2, 3), torch.ones(2, requires_grad=True), torch.ones(2, dtype=torch.complex64).conj(),
              torch.ones(2)._neg_view(), inference, torch.empty(4, device="meta"),
              torch.ones(4)[1:], torch.nn.Parameter(torch.ones(2)), torch.ones(2).to_sparse(),
              torch.empty(0), torch.ones(2, 3, 1, 2, 1, 3).transpose(0, 5), torch.ones(3, dtype=torch.float64)]
    probes.append(probes[0].as_subclass(type("_Probe", (torch.Tensor,), {})))
    return probes


class _CustomSizes(torch.Tensor):
    """A wrapper subclass whose sizes, strides and device are virtual calls (the policy bits)."""

    @staticmethod
    def __new__(cls, policy: str | None, device: bool) -> Any:
        return torch.Tensor._make_wrapper_subclass(cls, (2, 3), dispatch_sizes_strides_policy=policy,
                                                   dispatch_device=device)

    @classmethod
    def __torch_dispatch__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:  # type: ignore[override]
        if func is torch.ops.aten.sym_size.default or func is torch.ops.aten.size.default:
            return (2, 3)
        if func is torch.ops.aten.sym_stride.default or func is torch.ops.aten.stride.default:
            return (3, 1)
        if func is torch.ops.prim.device.default:
            return torch.device("cpu")
        return NotImplemented


def init_c_abi(_C: Any) -> None:
    """Tell ``_C`` where this torch keeps a tensor's dispatch keys and storage, and the thread-local
    dispatch key sets' defaults; check what it then reads against torch's Python API. ImportError
    when they differ (a torch whose layout xcompile does not know)."""
    layout = C_LAYOUT.get(TORCH_VERSION)
    if layout is None:
        raise ImportError(f"xcompile._C does not know torch {torch.__version__}'s TensorImpl layout")
    raw_inc, raw_exc = _C._abi_tls_raw()
    inc = torch._C._dispatch_tls_local_include_set().raw_repr()
    exc = torch._C._dispatch_tls_local_exclude_set().raw_repr()
    _C._abi_configure(*layout, _DTYPE_DEVICE_MASK, _POLICY_MASK, raw_inc ^ inc, raw_exc ^ exc, _BACKEND_MASK)
    kinds: dict[int, tuple] = {}     # dtype and device bytes -> (dtype, device), and back
    kinds_back: dict[tuple, int] = {}

    def effective(keys: int) -> int:
        inc = torch._C._dispatch_tls_local_include_set().raw_repr()
        exc = torch._C._dispatch_tls_local_exclude_set().raw_repr()
        return (keys | inc) & ~(exc & ~_BACKEND_MASK)

    def check(t: torch.Tensor) -> str | None:
        impl = _C._abi_impl(t)     # (first: what is read next is read through it)
        if impl != t._cdata:
            return f"the TensorImpl of a tensor ({impl:#x}, torch says {t._cdata:#x})"
        _, storage, nbytes, keys, eff, requires_grad, requires_grad_fast = _C._abi_read(t)
        want = torch._C._dispatch_keys(t).raw_repr()
        if keys != want:
            return f"the dispatch keys of a {t.device.type} {t.layout} tensor ({keys:#x}, torch says {want:#x})"
        if eff != effective(want):
            return f"the effective dispatch keys ({eff:#x}, torch says {effective(want):#x})"
        if requires_grad != t.requires_grad or requires_grad_fast != t.requires_grad:
            return "requires_grad"
        kind, custom, dims = _C._abi_fast(t)   # (after the key set: the same layout's offsets)
        if custom and t.layout == torch.strided:
            return f"a plain {t.device.type} tensor as one whose sizes or device are virtual"
        if dims is not None and t.layout == torch.strided and dims != (tuple(t.size()), tuple(t.stride())):
            return f"sizes and strides {dims}, torch says {tuple(t.size())}, {tuple(t.stride())}"
        if kinds.setdefault(kind, (t.dtype, t.device)) != (t.dtype, t.device) or \
                kinds_back.setdefault((t.dtype, t.device), kind) != kind:
            return f"dtype and device: {t.dtype} on {t.device} ({kind:#x})"
        if t.layout == torch.strided and t.device.type != "meta":
            st = t.untyped_storage()
            if storage != st._cdata or nbytes != st.nbytes():
                return (f"the storage of a tensor ({storage:#x}, {nbytes} bytes; torch says {st._cdata:#x}, "
                        f"{st.nbytes()})")
        return None

    probes = _c_abi_probes()
    why = next(filter(None, map(check, probes)), None)
    for policy, device in (("sizes", False), ("strides", False), (None, True)):
        if why is None and not _C._abi_fast(_CustomSizes(policy, device))[1]:
            why = (f"the policy bits (a subclass with dispatch_sizes_strides_policy={policy!r}, "
                   f"dispatch_device={device})")
    if why is None:
        with torch.inference_mode(), torch._C._ExcludeDispatchKeyGuard(
                torch._C.DispatchKeySet(torch._C.DispatchKey.AutogradCPU)):
            why = next(filter(None, map(check, probes)), None)
    if why is not None:
        raise ImportError(f"xcompile._C reads torch {torch.__version__}'s tensors wrongly: {why}. This torch's "
                          "layout differs from what _torch_compat.C_LAYOUT says for it.")


_graphs: Any = None          # the module, or the ImportError that said why there is none


def graph_replay_extension() -> Any:
    """``xcompile._C_graphs`` (GraphReplay, mode="reduce-overhead"): the one C++ part that needs
    libtorch's C++ API (it makes StorageImpls and TensorImpls), so it runs only with the torch
    minor version it was built against. The wheel's own is loaded with that torch; with another
    torch of the range it is built for the running one, once, from the sources the wheel carries
    (``xcompile/_graphs_src``), with torch.utils.cpp_extension into a cache folder
    (``$XCOMPILE_CACHE_DIR`` or ``~/.cache/xcompile``, one folder per torch version). ImportError
    when neither can be had (no C++ compiler): the caller runs the graph without replay."""
    global _graphs
    if _graphs is None:
        why = graphs_mismatch()
        try:
            if why is None:
                from . import _C_graphs  # type: ignore[attr-defined]
                _graphs = _C_graphs
            else:
                _graphs = _build_graph_replay(why)
        except ImportError as e:
            _graphs = e                # (asked once: a failed build is not tried on every graph)
    if isinstance(_graphs, ImportError):
        raise _graphs
    return _graphs


def graphs_mismatch() -> str | None:
    """Why the wheel's own ``_C_graphs`` cannot run with this torch (None: it can)."""
    from ._build_info import TORCH_VERSION as built  # (written by CMake at the build)
    return mismatch(built, True, torch.__version__, True)


def _build_graph_replay(why: str) -> Any:
    src = os.path.join(os.path.dirname(__file__), "_graphs_src")
    sources = sorted(os.path.join(src, f) for f in os.listdir(src) if f.endswith(".cpp")) if os.path.isdir(src) else []
    if not sources:
        raise ImportError(f"xcompile._C_graphs (CUDA-graph replay): {why} The sources to build it for this torch "
                          "are not installed; rebuild xcompile for this torch: pip install --no-build-isolation "
                          "--force-reinstall --no-deps <xcompile source tree or sdist>")
    cache = os.environ.get("XCOMPILE_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "xcompile")
    build = os.path.join(cache, f"graphs-torch{torch.__version__}-py{sys.version_info[0]}{sys.version_info[1]}")
    os.makedirs(build, exist_ok=True)
    try:
        from torch.utils import cpp_extension
        return cpp_extension.load(name="_C_graphs", sources=sources, extra_include_paths=[src],
                                  extra_cflags=["-O2"], build_directory=build, verbose=False)
    except Exception as e:   # no compiler, no ninja, a build error: no replay, said why
        raise ImportError(f"xcompile._C_graphs (CUDA-graph replay): {why} Building it for this torch in {build} "
                          f"failed: {type(e).__name__}: {e}") from e


__all__ = ["AUTOGRAD_FUNCTION_APPLY", "FAKE_SELECT_CHECKS_RANGE", "FAKE_UNIQUE_COUNTS_INT64", "TORCH_VERSION",
           "C_LAYOUT", "autograd_function_of_apply", "cond", "graph_replay_extension", "graphs_mismatch",
           "init_c_abi", "is_fx_tracing", "statically_known_true", "while_loop"]
