"""What to do with a real callable or object: one table per decision.

    torch op        -> one graph node (``is_torch_op``)
    fold            -> evaluated at trace time, result is a constant (``FOLD_AT_TRACE``)
    forbidden       -> Unsupported with a reason (``FORBIDDEN``: global side effects)
    grad-mode class -> a context value (``GRAD_MODE_CLASSES``)
    python function -> inlined
    trusted code    -> inlined without guards on its globals (``is_trusted_code``)
"""
from __future__ import annotations

import os
import sys
import types
from typing import Any

import torch
import torch.overrides

TORCH_TENSOR_CLASSES = (torch._C.TensorBase, torch.Tensor)

# Functions that answer a question about the tracing context: their trace-time answer is the
# compiled program's answer.
FOLD_AT_TRACE: dict[Any, Any] = {
    torch.overrides.has_torch_function: False,
    torch.overrides.has_torch_function_unary: False,
    torch.overrides.has_torch_function_variadic: False,
    torch._C._has_torch_function: False,
    torch._C._has_torch_function_unary: False,
    torch._C._has_torch_function_variadic: False,
    torch.jit.is_scripting: False,
    torch.jit.is_tracing: False,
    torch._C._get_tracing_state: None,
    torch.compiler.is_compiling: True,
    # the user's torch-dispatch mode stack (our FakeTensorMode is active while tracing; eager
    # code outside any mode sees an empty stack: nn.MultiheadAttention's fast-path check)
    torch._C._len_torch_dispatch_stack: 0,
}



def is_torch_is_compiling(fn: Any) -> bool:
    """torch's other ``is_compiling()`` flags (torch._utils', the compiler's deprecated external
    one that HF's ``is_torchdynamo_compiling()`` falls back to): True in compiled code, as under
    torch.compile (was: called in the graph, answering False)."""
    return (isinstance(fn, types.FunctionType) and fn.__name__ == "is_compiling"
            and (fn.__module__ or "").startswith("torch."))


# torch callables with global side effects or host synchronization: never in a graph.
FORBIDDEN: dict[Any, str] = {
    torch.manual_seed: "torch.manual_seed changes global RNG state",
    torch.seed: "torch.seed changes global RNG state",
    torch.set_rng_state: "torch.set_rng_state changes global RNG state",
    torch.get_rng_state: "torch.get_rng_state reads global RNG state",
    torch.set_default_dtype: "torch.set_default_dtype changes global state",
    torch.set_default_device: "torch.set_default_device changes global state",
    torch.set_printoptions: "torch.set_printoptions changes global state",
    torch.use_deterministic_algorithms: "torch.use_deterministic_algorithms changes global state",
    torch.set_num_threads: "torch.set_num_threads changes global state",
    torch.autograd.grad: "torch.autograd.grad inside a compiled region",
    torch.autograd.backward: "torch.autograd.backward inside a compiled region",
    torch.save: "torch.save does I/O",
    torch.load: "torch.load does I/O",
    torch._C._set_grad_enabled: "direct calls to torch._C._set_grad_enabled",
    torch.Tensor.resize_: "Tensor.resize_ changes a tensor's storage",
    torch.Tensor.resize_as_: "Tensor.resize_as_ changes a tensor's storage",
    torch.resize_as_: "torch.resize_as_ changes a tensor's storage",
}
# Function transforms change interpreter-global state (the functorch layer stack) when called,
# so they are never called at trace time: each is a graph break and runs eagerly.
for _name in ("vmap", "grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian", "linearize"):
    for _mod in (torch, getattr(torch, "func", None)):
        _fn = getattr(_mod, _name, None) if _mod is not None else None
        if callable(_fn) and _fn not in FORBIDDEN:
            FORBIDDEN[_fn] = f"torch.func.{_name} (a function transform) inside a compiled region"
del _name, _mod, _fn

# Tensor methods whose result needs tensor data on the host (or hands out raw memory).
TENSOR_METHODS_FORBIDDEN = {
    "item": "Tensor.item() needs the tensor's value at trace time",
    "tolist": "Tensor.tolist() needs the tensor's values at trace time",
    "numpy": "Tensor.numpy() leaves the graph",
    "data_ptr": "Tensor.data_ptr() depends on memory addresses",
    "__bool__": "bool(tensor) needs the tensor's value at trace time",
    "__int__": "int(tensor) needs the tensor's value at trace time",
    "__float__": "float(tensor) needs the tensor's value at trace time",
    "__index__": "using a tensor as an index needs its value at trace time",
    "backward": "Tensor.backward() inside a compiled region",
    "register_hook": "Tensor.register_hook() inside a compiled region",
    "untyped_storage": "Tensor storages cannot be traced",
    "storage": "Tensor storages cannot be traced",
    # an input's storage cannot grow inside a functional graph (AOT raised "setStorage ... out of
    # bounds"): eager runs it, as for every tensor (one rule, right everywhere)
    "resize_": "Tensor.resize_ changes a tensor's storage",
    "resize_as_": "Tensor.resize_as_ changes a tensor's storage",
}

_CAPTURE_HINT = ("Set xcompile.config.capture_scalar_outputs = True to capture it in the graph, "
                 "or keep it outside the compiled region.")
TENSOR_METHODS_HINTS = {"item": _CAPTURE_HINT, "tolist": _CAPTURE_HINT}

# Tensor attributes that are themselves tensors (become graph nodes); everything else that is not
# a method is metadata (a constant read from the fake tensor).
TENSOR_ATTRS_AS_OPS = {"T", "mT", "H", "mH", "real", "imag"}
TENSOR_ATTRS_FORBIDDEN = {"grad": "reading Tensor.grad", "_base": "reading Tensor._base",
                          "grad_fn": "reading Tensor.grad_fn", "_version": "reading Tensor._version"}

GRAD_MODE_CLASSES = {torch.no_grad: False, torch.enable_grad: True}

# Python modules whose code we inline without guarding what it reads from its globals
# (it does not change between calls), and whose attributes we read without guards.
_TRUSTED_PREFIXES = ("torch", "math", "operator", "functools", "itertools", "collections", "typing",
                     "builtins", "numbers", "abc", "enum", "dataclasses", "warnings", "inspect")


def is_trusted_module_name(name: str | None) -> bool:
    if not name:
        return False
    return any(name == p or name.startswith(p + ".") for p in _TRUSTED_PREFIXES)


def is_trusted_code(fn: types.FunctionType) -> bool:
    return is_trusted_module_name(getattr(fn, "__module__", None))


_FUNCTORCH_DIR = os.path.join(os.path.dirname(torch.__file__), "_functorch") + os.sep


def is_function_transform_code(code: types.CodeType) -> bool:
    """Code of torch.func's transforms (and the wrappers they return, which carry the user's
    function's name and module): it drives the functorch layer stack, so it never runs at trace time."""
    return code.co_filename.startswith(_FUNCTORCH_DIR)


def is_torch_op(obj: Any) -> bool:
    """A torch callable that becomes one graph node when called."""
    if isinstance(obj, (torch._ops.OpOverloadPacket, torch._ops.OpOverload)):
        return True
    if isinstance(obj, (types.MethodDescriptorType, types.WrapperDescriptorType)):
        return getattr(obj, "__objclass__", None) in TORCH_TENSOR_CLASSES
    if isinstance(obj, types.BuiltinFunctionType):
        mod = getattr(obj, "__module__", None) or ""
        if mod.startswith("torch._C._functorch"):      # interpreter-stack state, never a graph op
            return False
        return mod == "torch" or mod.startswith("torch.")
    if isinstance(obj, types.FunctionType):
        mod = obj.__module__ or ""
        if is_function_transform_code(obj.__code__):
            return False
        # (torch.testing: test helpers, inlined as torch.compile does, as torch.optim; OpInfo's wrapper_set_seed
        # seeds the global generator around its op, which in one graph node AOT's trace ran once)
        if mod.startswith(("torch.nn.modules", "torch.nn.utils", "torch.fx", "torch.utils", "torch.testing",
                           "torch.optim")):
            return False
        # (torch._dynamo: its functions have rules of their own, marks._torch_dynamo_rule; its
        # is_compiling answers True, as the other is_compiling flags: calls._torch_op)
        if mod.startswith("torch._dynamo") and not is_torch_is_compiling(obj):
            return False
        return (mod == "torch" or mod.startswith("torch.")) and _fx_can_name(obj)
    return False


def _fx_can_name(fn: types.FunctionType) -> bool:
    """Whether FX's generated code can name ``fn``: it writes a torch function as
    ``<module>.<__name__>`` (a lambda by the name its source line assigns), which a lambda or a
    nested function does not resolve to unless the module holds it under that name (as
    ``boolean_dispatch`` makes ``F.max_pool2d``). Others are inlined, not graph nodes."""
    if fn.__name__ == "<lambda>":
        return False
    if "<locals>" not in fn.__qualname__:
        return True
    return getattr(sys.modules.get(fn.__module__ or ""), fn.__name__, None) is fn
