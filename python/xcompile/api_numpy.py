"""``wrap_numpy``: a function from ndarrays to ndarrays as a function from tensors to tensors
(``torch.compiler.wrap_numpy``'s contract).

Called eagerly, the tensors are viewed as ndarrays (``Tensor.numpy()``: CPU tensors without
grad) and NumPy runs the function. Compiled, ``x.numpy()`` is an array viewing the graph tensor
(frontend/numpy_tracing.py) and the NumPy code becomes torch ops of the same graph, on the
tensors' device and differentiable; the arrays it returns become tensors again.
"""
from __future__ import annotations

import functools
from typing import Any, Callable

import torch

try:
    import numpy as np
except ImportError:                      # without NumPy, wrap_numpy returns the function as it is
    np = None                            # type: ignore[assignment]


def _to_numpy(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return x.numpy()
    if isinstance(x, tuple):
        return tuple([_to_numpy(i) for i in x])
    if isinstance(x, list):
        return [_to_numpy(i) for i in x]
    if isinstance(x, dict):
        return {k: _to_numpy(v) for k, v in x.items()}
    return x


def _to_tensor(x: Any) -> Any:
    if isinstance(x, np.ndarray):
        return torch.as_tensor(x)
    if isinstance(x, tuple):
        return tuple([_to_tensor(i) for i in x])
    if isinstance(x, list):
        return [_to_tensor(i) for i in x]
    if isinstance(x, dict):
        return {k: _to_tensor(v) for k, v in x.items()}
    return x


def wrap_numpy(fn: Callable) -> Callable:
    """Decorator: tensors in (seen by ``fn`` as ndarrays), tensors out (its ndarrays converted)."""
    if np is None:
        return fn

    @functools.wraps(fn)
    def wrap(*args: Any, **kwargs: Any) -> Any:
        args = _to_numpy(args)
        kwargs = _to_numpy(kwargs)
        return _to_tensor(fn(*args, **kwargs))

    return wrap
