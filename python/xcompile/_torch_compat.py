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
"""
from __future__ import annotations

import types
from typing import Any

import torch
import torch.fx._symbolic_trace as _fx_symbolic_trace

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


__all__ = ["AUTOGRAD_FUNCTION_APPLY", "TORCH_VERSION", "autograd_function_of_apply", "is_fx_tracing"]
