"""The public API, with torch.compile's names and meanings.

``compile`` wraps a function in the C++ ``CompiledFunction`` (the fast path) and a module
in ``OptimizedModule``; ``optimize`` / ``run`` / ``disable`` set this thread's callback for
a scope, which the eval-frame hook consults for every frame that starts inside it.
"""
from __future__ import annotations

import functools
import inspect
import types
import warnings

import torch

from . import _C, release, shape_state, stance
from .backends.ddp import is_ddp
from .backends.registry import INDUCTOR_FLAG_OPTIONS, INDUCTOR_OPTIONS
from .code_states import DIED_YOUNG, EAGER_FRAMES, EXPLICIT_CODES, NONRECURSIVE_SKIPS, NORMAL, SKIP
from .convert_frame import ConvertFrame, RunOnly
from .debug import timing
from .frontend import tracing_rules
from .frontend.break_log import reset_break_log
from .kernels import cudagraphs

_MODES = (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
DEFAULT_BACKEND = "inductor"


def compile(model=None, *, fullgraph: bool = False, dynamic=None, backend=DEFAULT_BACKEND,
            mode=None, options=None, disable: bool = False):
    """Compile ``model`` (a function, method or ``nn.Module``); a decorator with or without arguments.

    ``mode`` takes torch.compile's names and compiles the same kernels for each (no autotuning);
    ``"reduce-overhead"`` and ``"max-autotune"`` (and ``options={"triton.cudagraphs": True}``)
    replay CUDA graphs (kernels/cudagraphs.py). The mode is part of the cache key. ``options``
    reach the inductor backend; unknown keys raise."""
    if model is None:
        return lambda m: compile(m, fullgraph=fullgraph, dynamic=dynamic, backend=backend,
                                 mode=mode, options=options, disable=disable)
    if mode is not None and options is not None:
        raise RuntimeError("Either mode or options can be specified, but both can't be specified at the same time.")
    if mode not in _MODES:
        raise RuntimeError(f"Unrecognized mode={mode!r}, should be one of: {', '.join(m for m in _MODES if m)}")
    if options is not None and not isinstance(options, dict):
        raise RuntimeError(f"options must be a dict, got {type(options).__name__}")
    if not callable(model):
        raise TypeError(f"xcompile.compile expects a callable or an nn.Module, got {type(model).__name__}")
    if disable:
        return model
    opts = dict(options or {})
    _check_options(backend, opts)
    if mode is not None:
        opts["mode"] = mode
    return _wrap(model, ConvertFrame(backend, fullgraph=fullgraph, dynamic=dynamic, options=opts))


def _check_options(backend, opts: dict) -> None:
    if not opts:
        return
    if backend == "inductor":
        for key in opts:
            if key not in INDUCTOR_OPTIONS and key not in INDUCTOR_FLAG_OPTIONS:
                raise RuntimeError(f"Unexpected optimization option {key}, known options are "
                                   f"{list(INDUCTOR_OPTIONS + INDUCTOR_FLAG_OPTIONS)}")
    elif isinstance(backend, str):
        warnings.warn(f"xcompile: backend {backend!r} takes no options; ignoring {sorted(opts)}", stacklevel=3)


def _recompile_module(mod, kwargs):
    return compile(mod, **kwargs)


def _wrap(obj, callback):
    if isinstance(obj, torch.nn.Module):
        return OptimizedModule(obj, callback)
    if isinstance(obj, types.MethodType) and isinstance(obj.__func__, types.FunctionType):
        return _compiled_function(obj.__func__, callback, bound_self=obj.__self__, like=obj)
    if isinstance(obj, types.FunctionType) and not (
            inspect.isgeneratorfunction(obj) or inspect.iscoroutinefunction(obj)
            or inspect.isasyncgenfunction(obj)):
        return _compiled_function(obj, callback, like=obj)
    # Builtins, callable objects, generator and coroutine functions: the object's own frame
    # (if any) runs eagerly, and every Python frame it starts is compiled through the hook.
    return _with_callback(obj, callback)


def _compiled_function(fn, callback, *, bound_self=None, like=None, hooks_module=None):
    cf = _C.CompiledFunction(fn, callback, bound_self, hooks_module)
    try:
        functools.update_wrapper(cf, like if like is not None else fn)
    except (AttributeError, TypeError):
        pass
    cf._xcompile_callback = callback
    if hasattr(callback, "explicit_codes"):
        callback.explicit_codes.add(fn.__code__)
        EXPLICIT_CODES.add(fn.__code__)
        if fn.__code__ not in NONRECURSIVE_SKIPS and _C.get_code_state(fn.__code__) == SKIP:
            _C.set_code_state(fn.__code__, NORMAL)   # skipped as library code before: compiled now
    return cf


def _compile_explicitly(code, callback) -> None:
    """``code`` is compiled by ``callback`` even if it is library code (nn.Sequential.forward)."""
    if code is None or not hasattr(callback, "explicit_codes"):
        return
    callback.explicit_codes.add(code)
    EXPLICIT_CODES.add(code)
    if code not in NONRECURSIVE_SKIPS and _C.get_code_state(code) == SKIP:
        _C.set_code_state(code, NORMAL)


def _with_callback(fn, callback):
    @functools.wraps(fn)
    def xcompile_wrapper(*args, **kwargs):
        prev = _C.set_callback(callback)
        try:
            return fn(*args, **kwargs)
        finally:
            _C.set_callback(prev)

    xcompile_wrapper._xcompile_callback = callback
    return xcompile_wrapper


class _CallbackContext:
    """A context manager and decorator that sets this thread's callback for its scope."""

    def __init__(self, callback, *, wrap_fn=None):
        self.callback = callback
        self._prev: list = []
        self._wrap_fn = wrap_fn or (lambda fn: _with_callback(fn, self.callback))

    def __enter__(self):
        self._prev.append(_C.set_callback(self.callback))
        return self

    def __exit__(self, *exc):
        _C.set_callback(self._prev.pop())
        return False

    def __call__(self, fn):
        if not callable(fn):
            raise TypeError(f"expected a callable to decorate, got {type(fn).__name__}")
        return self._wrap_fn(fn)


def optimize(backend=DEFAULT_BACKEND, *, nopython: bool = False, guard_export_fn=None,
             guard_fail_fn=None, disable: bool = False, dynamic=None):
    """torch._dynamo.optimize: a context manager / decorator that compiles frames started inside it."""
    if disable:
        return _CallbackContext(_C.get_callback(), wrap_fn=lambda fn: fn)
    cb = ConvertFrame(backend, fullgraph=nopython, dynamic=dynamic, guard_export_fn=guard_export_fn,
                      guard_fail_fn=guard_fail_fn)
    return _CallbackContext(cb, wrap_fn=lambda fn: _wrap(fn, cb))


def optimize_assert(backend=DEFAULT_BACKEND, *, hooks=None, export=False, export_constraints=None,
                    dynamic=None):
    """``optimize(backend, nopython=True)``; ``hooks`` carries guard_export_fn / guard_fail_fn."""
    if export or export_constraints is not None:
        raise NotImplementedError("optimize_assert(export=True / export_constraints=...): xcompile has no "
                                  "export yet; compile the function with xcompile.compile(fn, fullgraph=True)")
    return optimize(backend, nopython=True, dynamic=dynamic,
                    guard_export_fn=getattr(hooks, "guard_export_fn", None),
                    guard_fail_fn=getattr(hooks, "guard_fail_fn", None))


def run(fn=None):
    """Don't compile anything new; use the entries compiled so far."""
    ctx = _CallbackContext(RunOnly())
    return ctx(fn) if fn is not None else ctx


def disable(fn=None, recursive: bool = True):
    """Run ``fn`` (or the ``with`` block) without compiling.

    ``recursive=False`` skips only ``fn``'s own frame; the frames it calls are still compiled.
    """
    if fn is None:
        return _CallbackContext(None)
    if not callable(fn):
        raise TypeError(f"xcompile.disable expects a callable, got {type(fn).__name__}")
    if not recursive:
        code = getattr(getattr(fn, "__func__", fn), "__code__", None)
        if code is not None:
            NONRECURSIVE_SKIPS.add(code)   # re-marked after reset()
            _C.set_code_state(code, SKIP)
        return fn
    wrapped = _with_callback(fn, None)
    wrapped._xcompile_disable = True
    return wrapped


def reset() -> None:
    """Forget every compiled entry and every per-code decision (skips, cache limits)."""
    _C.cache_clear_all()
    cudagraphs.reset()                       # recorded graphs and their memory
    stance.reset()                           # eager_then_compile's first calls seen
    timing.reset()                           # compile_times() starts again, as torch's reset does
    reset_break_log()                        # the next graph break at a known place logs in full again
    shape_state.clear()                      # sizes seen: the next compiles start static again
    release.release_all()                    # caches that kept old compiles alive (release.py)
    DIED_YOUNG.clear()
    for code in list(EAGER_FRAMES):          # frames that ran eagerly after a graph break: traced again
        _C.set_code_state(code, NORMAL)
    EAGER_FRAMES.clear()
    for code in NONRECURSIVE_SKIPS:
        _C.set_code_state(code, SKIP)


class OptimizedModule(torch.nn.Module):
    """What ``xcompile.compile(module)`` returns: calls go to the compiled ``forward``.

    ``_orig_mod`` is the wrapped module; ``state_dict()``/``load_state_dict()`` use its keys
    unchanged.  Without hooks, a call goes from C++ straight to the cached graph; with hooks,
    through ``_orig_mod.__call__`` so they run as in eager.
    """

    _xc_call = None

    def __init__(self, mod: torch.nn.Module, callback):
        super().__init__()
        self._orig_mod = mod
        inst = mod.__dict__.get("forward", None)
        fwd = type(mod).forward
        if type(mod).__call__ is not torch.nn.Module.__call__:
            fast = _with_callback(mod, callback)       # its own __call__ (maybe no forward at all)
        elif is_ddp(mod):
            # DistributedDataParallel: its forward (hooks, reducer, _DDPSink) runs eagerly, the
            # module it wraps is compiled, split at the bucket boundaries (backends/ddp.py)
            fast = _with_callback(mod, callback)
            _compile_explicitly(getattr(getattr(type(mod.module), "forward", None), "__code__", None), callback)
        elif isinstance(inst, types.MethodType) and isinstance(inst.__func__, types.FunctionType):
            # m.forward = obj.method: bound to obj, which need not be the module
            fast = _compiled_function(inst.__func__, callback, bound_self=inst.__self__, hooks_module=mod,
                                      like=inst)
        elif isinstance(inst, types.FunctionType):     # m.forward = lambda x: ...: called without self
            fast = _compiled_function(inst, callback, hooks_module=mod, like=inst)
        elif inst is None and isinstance(fwd, types.FunctionType):
            fast = _compiled_function(fwd, callback, bound_self=mod, hooks_module=mod, like=fwd)
        else:
            fast = _with_callback(mod, callback)
        self.__dict__["_xc_call"] = fast
        self.__dict__["_xcompile_callback"] = callback

    __call__ = _C.module_call_trampoline

    def forward(self, *args, **kwargs):
        return self._xc_call(*args, **kwargs)

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            if name == "_orig_mod":
                raise
            return getattr(self._orig_mod, name)

    def state_dict(self, *args, **kwargs):
        return self._orig_mod.state_dict(*args, **kwargs)

    def __reduce__(self):
        """copy.deepcopy, pickle and torch.save hand over the original module and the compile
        arguments; the copy is compiled again (torch's OptimizedModule does the same)."""
        return (_recompile_module, (self._orig_mod, self._xcompile_callback.compile_kwargs()))

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        return self._orig_mod.load_state_dict(state_dict, strict=strict, assign=assign)

    def __repr__(self):
        return f"OptimizedModule({self._orig_mod!r})"


tracing_rules.register_optimized_module_class(OptimizedModule)   # traced as the module it wraps
