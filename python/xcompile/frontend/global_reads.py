"""torch getters of global state whose answers a trace folds into constants, and the guards
that re-ask them.

A torch function called without tensors that answers a constant (``torch.get_num_threads()``,
``torch._C._get_cublas_allow_tf32()``, ``torch.get_float32_matmul_precision()``,
``torch.initial_seed()``...) is folded: the graph bakes in its answer. Unless the answer
cannot change between calls (``STABLE_ANSWER``: pure functions of their arguments, build
facts, and the state the GLOBAL_STATE guard already checks), the entry guards on it with a
``CallSource``: the C++ guard calls the getter again at every check and compares, as torch's
global-state guard re-reads its flags. Properties of module subclasses
(``torch.backends.mkldnn.enabled``) are guarded the same way, through ``getattr``.

A Python-level torch function is guarded only when running it read global state: it called a
torch builtin outside ``STABLE_ANSWER`` or read a plain data global of a torch module
(``torch.backends.mha.get_fastpath_enabled()`` returns one); pure helpers such as
``F._canonical_mask(None, ...)`` cost no guard.

Settings read only at run time (the TF32 and reduced-precision flags, cudnn/mkldnn enablement
for ops the compiled code calls) need no guard: the compiled code calls the same ATen ops,
which read them when they run.
"""
from __future__ import annotations

import contextlib
import dis
import functools
import sys
import types
from typing import TYPE_CHECKING, Any, Iterator

import torch
import torch.nn.functional

from ..guards.build import equals_matchable
from ..guards.sources import CallSource
from ..release import clear_on_reset
from .values import ConstantValue

if TYPE_CHECKING:
    from .tracer import Tracer


def _maybe(owner: Any, *names: str) -> list:
    return [getattr(owner, n) for n in names if owner is not None and hasattr(owner, n)]


STABLE_ANSWER: set[Any] = {
    torch.is_grad_enabled, torch.is_inference_mode_enabled, torch.get_default_dtype,
    torch.are_deterministic_algorithms_enabled, torch.promote_types, torch.can_cast,
    torch.result_type, torch.is_tensor, torch.is_storage, torch.is_floating_point, torch.is_complex,
    torch._C._get_privateuse1_backend_name, torch._utils._get_device_index,
    torch._C._is_tracing, torch._C._get_tracing_state,
    *_maybe(getattr(torch.nn.functional, "_Reduction", None), "get_enum", "legacy_get_enum",
            "legacy_get_string"),
    *_maybe(torch, "is_autocast_enabled", "is_autocast_cpu_enabled", "get_autocast_dtype",
            "get_autocast_gpu_dtype", "get_autocast_cpu_dtype", "is_autocast_cache_enabled"),
    *_maybe(torch._C, "_is_any_autocast_enabled", "_is_torch_function_enabled"),
    *_maybe(torch.compiler, "is_exporting", "is_dynamo_compiling"),
    *_maybe(torch.cuda, "is_available", "device_count", "is_bf16_supported"),
    *_maybe(getattr(torch.backends, "mkldnn", None), "is_available"),
    *_maybe(getattr(torch.backends, "cudnn", None), "is_available"),
    *_maybe(getattr(torch.backends, "mps", None), "is_available", "is_built"),
    *_maybe(getattr(torch, "distributed", None), "is_available"),
}

# Global values a function reads that are settings (mutable module state), not code.
_DATA = (bool, int, float, str, bytes, type(None), list, dict, set)


@clear_on_reset
@functools.lru_cache(maxsize=4096)
def _global_names(code: types.CodeType) -> tuple[str, ...]:
    return tuple({i.argval for i in dis.get_instructions(code) if i.opname == "LOAD_GLOBAL"})


def _reads_torch_data_global(frame: types.FrameType) -> bool:
    g = frame.f_globals
    if not str(g.get("__name__", "")).startswith("torch"):
        return False
    return any(type(g.get(name)) in _DATA for name in _global_names(frame.f_code) if name in g)


def _is_state_getter(fn: Any) -> bool:
    """A torch builtin (function, or method of a torch._C object such as a Generator)."""
    if not isinstance(fn, types.BuiltinFunctionType):
        return False
    owner = getattr(fn, "__self__", None)
    module = getattr(fn, "__module__", None)
    if module is None and owner is not None and not isinstance(owner, types.ModuleType):
        module = type(owner).__module__
    if not str(module or "").startswith("torch"):
        return False
    try:
        return fn not in STABLE_ANSWER
    except TypeError:                            # a method of an unhashable object
        return True


@contextlib.contextmanager
def watching() -> Iterator[list[bool]]:
    """While the body runs, note whether Python code of torch read global state. Yields a
    one-element list that holds the answer when the body is done. Under a profiler already
    running (cProfile sets its own hook, which a Python-level one would replace and could not
    hand back) nothing is watched and the answer is True: a guard too many, never one too few."""
    seen = [False]
    if sys.getprofile() is not None:
        seen[0] = True
        yield seen
        return

    def profile(frame, event, arg):
        if not seen[0]:
            if event == "call" and _reads_torch_data_global(frame):
                seen[0] = True
            elif event == "c_call" and _is_state_getter(arg):
                seen[0] = True

    sys.setprofile(profile)
    try:
        yield seen
    finally:
        sys.setprofile(None)


def constant_args(args, kwargs) -> bool:
    return all(isinstance(a, ConstantValue) and equals_matchable(a.value)
               for a in (*args, *(kwargs or {}).values()))


def guard_answer(tx: "Tracer", fn: Any, args, kwargs, answer: Any) -> None:
    """``fn(*args, **kwargs)`` (constant values) answered ``answer``, which the trace folds:
    guard on it by asking again at every check."""
    if fn in STABLE_ANSWER or not equals_matchable(answer):
        return
    src = CallSource(fn, tuple(a.value for a in args), tuple((k, a.value) for k, a in (kwargs or {}).items()))
    tx.guards.constant(src, answer)


def guard_module_property(tx: "Tracer", mod: types.ModuleType, name: str) -> Any:
    """A property of a module subclass (``torch.backends.cudnn.allow_tf32``): read it now and
    guard on its answer. Returns the answer, or MISSING-like ``NotImplemented`` when it is not
    a constant (the caller then treats it as any other attribute)."""
    value = getattr(mod, name)
    if not equals_matchable(value):
        return NotImplemented
    tx.guards.constant(CallSource(getattr, (mod, name)), value)
    return value
