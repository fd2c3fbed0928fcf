"""The Python side of a cache miss: frame -> frontend -> backend -> new cache entry.

The C++ runtime calls a ``ConvertFrame`` (the thread's callback) with the frame's code and
starting values when no cache entry's guards pass.  It returns the new entry (and has
added it to the code's cache) or None, meaning "run this frame eagerly".
"""
from __future__ import annotations

import contextlib
import itertools
import threading
import types
import warnings
import weakref
from typing import NamedTuple

import torch
from torch.utils._device import DeviceContext
from torch.utils._python_dispatch import is_in_torch_dispatch_mode

from . import _C, config, log, numpy_io, stance
from ._torch_compat import is_fx_tracing
from .backends.ddp import maybe_split
from .backends.registry import INDUCTOR_OPTIONS, lookup_backend, wants_cudagraphs
from .code_states import DIED_YOUNG, EAGER_FRAMES, EXPLICIT_CODES, NO_NEW, SKIP, skip_code, skip_module
from .debug import dump, timing
from .effects import with_side_effects
from .exc import BackendCompilerFailed, CacheLimitExceeded
from .frontend import tensor_classes
from .frontend.capture import FrameState
from .frontend.exc import TorchRuntimeError, Unsupported
from .guards.lower import lower_guards, lower_output_spec
from .handlers import outside_compile
from .kernels import cudagraphs
from .stats import counters
from .warmup import prepare_frontend


def _where(code: types.CodeType) -> str:
    return f"'{code.co_name}' ({code.co_filename}:{code.co_firstlineno})"


_COMPILE_LOCK = threading.RLock()
_COMPILING = threading.local()          # .now: this thread is inside ConvertFrame's compile


class BackendKey:
    """What a cache entry was compiled for: a backend and its options.

    Entries are only used under a callback with the same key (``_xc_backend_key``; the C++
    cache walk compares identities), so compiling one function with two backends compiles it
    twice, as torch.compile does.  ``fullgraph`` is not part of the key (torch shares entries
    across it too).
    """

    __slots__ = ("backend", "options", "name", "__weakref__")

    def __init__(self, backend, options: tuple, name: str):
        self.backend = backend      # held, so id(backend) in the interning key cannot be reused
        self.options = options
        self.name = name

    def __repr__(self):
        opts = ", ".join(f"{k}={v!r}" for k, v in self.options)
        return f"backend={self.name!r}" + (f" ({opts})" if opts else "")


_BACKEND_KEYS: "weakref.WeakValueDictionary" = weakref.WeakValueDictionary()


def backend_key(backend, options: dict, name: str) -> BackendKey:
    opts = tuple(sorted((str(k), repr(v)) for k, v in options.items()))
    k = (id(backend), opts)
    key = _BACKEND_KEYS.get(k)
    if key is None:
        key = _BACKEND_KEYS[k] = BackendKey(backend, opts, name)
    return key


class GuardFail(NamedTuple):
    """What ``optimize(guard_fail_fn=...)`` receives on a recompile (torch._dynamo's fields)."""
    reason: str
    orig_code: types.CodeType


class ConvertFrame:
    """One compile configuration (backend, fullgraph): the thread's callback."""

    def __init__(self, backend, *, fullgraph: bool = False, dynamic=None, options=None,
                 guard_export_fn=None, guard_fail_fn=None):
        self.backend_arg = backend
        self.backend = lookup_backend(backend)
        self.backend_name = backend if isinstance(backend, str) else getattr(
            backend, "__name__", type(backend).__name__)
        self.fullgraph = fullgraph
        self.dynamic = dynamic
        self.options = options or {}
        self._xc_backend_key = backend_key(self.backend, self.options, self.backend_name)
        self._warned_limit: weakref.WeakSet = weakref.WeakSet()
        # Codes the user handed to compile() directly: compiled even where _skip_code says
        # otherwise (e.g. torch.nn.Sequential.forward of a compiled Sequential).
        self.explicit_codes: weakref.WeakSet = weakref.WeakSet()
        # optimize()'s hooks: each new entry's guards (a list of lines, as XCOMPILE_LOGS=guards
        # prints them) and each recompile's failed guard (GuardFail), as torch._dynamo calls them
        for name, fn in (("guard_export_fn", guard_export_fn), ("guard_fail_fn", guard_fail_fn)):
            if fn is not None and not callable(fn):
                raise TypeError(f"{name} must be callable, got {type(fn).__name__}")
        self.guard_export_fn = guard_export_fn
        self.guard_fail_fn = guard_fail_fn
        # the memory pool the CUDA graphs of this compiled function share (kernels/cudagraphs.py)
        self.graph_pool = cudagraphs.new_pool()

    def compile_kwargs(self) -> dict:
        """The arguments of the ``compile`` call that made this callback (a copy compiles so)."""
        options = {k: v for k, v in self.options.items() if k != "mode"}
        return dict(backend=self.backend_arg, fullgraph=self.fullgraph, dynamic=self.dynamic,
                    mode=self.options.get("mode"), options=options or None)

    def __call__(self, code, f_locals, f_globals, f_builtins, closure):
        if code not in self.explicit_codes and (skip_code(code) or skip_module(f_globals)):
            if code not in EXPLICIT_CODES:    # library code someone compiles explicitly stays NORMAL
                _C.set_code_state(code, SKIP)
            return None
        if torch._C._functorch.maybe_current_level() is not None:
            return None       # inside a torch.func transform (vmap/grad...): run this call eagerly
        if _fx_tracing():
            return None       # under torch.fx.symbolic_trace / make_fx the function runs as written
            # (torch.compile's behaviour with torch._dynamo.config.error_on_nested_fx_trace=False)
        if _foreign_function_modes():
            return None       # a user TorchFunctionMode is active: this call runs eagerly (its
            # __torch_function__ sees every op); the guards check the mode stack, so entries
            # compiled without it are not used meanwhile
        if torch._C._len_torch_dispatch_stack() or is_in_torch_dispatch_mode(include_infra_modes=False):
            return None       # a TorchDispatchMode is active (or its __torch_dispatch__ runs, with
            # it popped): eager's ops go through it, as under torch.compile, which also never
            # compiles __torch_dispatch__; the guards check the dispatch stack's length (issue #31)
        if (stance.current().stance != "default" or stance.current().backend is not None) \
                and not getattr(self, "ignores_stance", False):
            decided, answer = stance.intercept(self, code, f_locals, f_globals, f_builtins, closure)
            if decided:
                return answer
        if getattr(_COMPILING, "now", False):
            return None       # this thread is compiling: a frame run meanwhile (a signal handler,
            # a gc callback, a __del__) runs eagerly instead of starting a compile inside the
            # half-done one (issue #31; its imports, its tracer, its lock are all mid-way)
        _COMPILING.now = True
        try:
            prepare_frontend()    # the first compile's imports, whole even if a signal arrives
            # One compilation at a time (the GIL is dropped while kernels build): a thread that
            # waited first looks at the entries the others added meanwhile.
            n_seen = len(_C.cache_entries(code))
            with _COMPILE_LOCK:
                if len(_C.cache_entries(code)) > n_seen:
                    entry = self._added_meanwhile(code, n_seen, f_locals, f_globals, f_builtins, closure)
                    if entry is not None:
                        return entry
                counters["frames"]["total"] += 1
                # outside_compile: signal handlers and gc callbacks run meanwhile see no tracing
                # state; dump.frame: the debug dump's folder for this frame (XCOMPILE_DEBUG /
                # config.debug_dir; one check when off)
                with outside_compile(), dump.frame(code, self.backend_name):
                    entry = self._convert(code, f_locals, f_globals, f_builtins, closure)
                counters["frames"]["ok"] += 1
                return entry
        finally:
            _COMPILING.now = False

    def _owns(self, entry) -> bool:
        """Entries this callback may use (the rule is the C++ cache's: CacheEntry.usable_by)."""
        return entry.usable_by(self._xc_backend_key)

    def _added_meanwhile(self, code, n_seen, f_locals, f_globals, f_builtins, closure):
        entries = _C.cache_entries(code)
        args = [f_locals.get(n) for n in code.co_varnames[:len(f_locals)]]
        for e in entries[:len(entries) - n_seen]:         # new entries go to the front
            if self._owns(e) and e.guard.check(args, f_globals, f_builtins, closure):
                return e
        return None

    def _convert(self, code, f_locals, f_globals, f_builtins, closure):
        all_entries = _C.cache_entries(code)
        entries = [e for e in all_entries if self._owns(e)]
        churn = DIED_YOUNG.get(code, 0)
        if all_entries or churn:
            if entries:
                reason = entries[0].guard.last_failure()
            elif all_entries:
                reason = (f"compiled for {all_entries[0].owner!r}, now called with "
                          f"{self._xc_backend_key!r}")
            else:
                reason = f"{churn} entries were dropped after at most one call (an object they guard died)"
            for o in log.observers():
                if hasattr(o, "on_recompile"):
                    o.on_recompile(code, reason or "(unknown)")
            if self.guard_fail_fn is not None:
                self.guard_fail_fn(GuardFail(reason or "(unknown)", code))
            if len(all_entries) >= config.accumulated_cache_size_limit:
                return self._cache_limit_hit(code, reason)
            inst = _instance_of(code, f_locals)
            mine = entries if inst is None else [e for e in entries if e.tag == inst]
            # entries dropped young count too: an object made per call (a fresh lambda argument)
            # would otherwise be compiled for on every call, its entry gone when it died
            if len(mine) + (churn if inst is None else 0) >= config.cache_size_limit:
                # a method's limit counts per instance: another nn.Module of the same class is
                # still compiled (its guards differ in the module's identity)
                return self._cache_limit_hit(code, reason, freeze=inst is None)
            log.log("recompiles", "Recompiling function %s\n    triggered by the following guard failure(s):\n"
                    "    - %s", _where(code), reason or "(unknown)")
        frame = FrameState(code, f_locals, f_globals, f_builtins, closure)
        from .frontend import graph_break

        try:
            with _user_hooks_deferred(), timing.compiling(code.co_qualname), timing.timed("frontend.trace"):
                result = graph_break.capture(frame, fullgraph=self.fullgraph, dynamic=self.dynamic)
        except Unsupported:
            raise                                 # fullgraph=True or error_on_graph_break
        except TorchRuntimeError:
            # an op fails on these inputs: this call runs eagerly, where the op raises eager's
            # own error inside the frame, so its `with` exits and `except` clauses run (a resume
            # function raising here would skip the `with` block it continues: grad mode left off)
            return None
        except Exception as e:
            if not config.suppress_errors:
                raise
            warnings.warn(f"xcompile: failed to capture {_where(code)}, running it eagerly: "
                          f"{type(e).__name__}: {e}", stacklevel=2)
            _C.set_code_state(code, SKIP)
            return None
        with timing.compiling(code.co_qualname):
            if isinstance(result, graph_break.WholeFrame):
                return _tagged(self._install(code, result.captured), code, f_locals)
            if isinstance(result, graph_break.BrokenFrame):
                return _tagged(self._install_broken(code, result), code, f_locals)
        _C.set_code_state(code, SKIP)             # EagerFrame: the frames it calls are still compiled
        EAGER_FRAMES.add(code)
        return None

    def _install(self, code, captured):
        with timing.timed("backend"):
            compiled = self._compile_graph(code, captured)
        compiled = numpy_io.wrap_compiled(_keeping_grad_mode(compiled, captured), captured.gm)
        compiled = tensor_classes.wrap_compiled(compiled, captured.gm)     # tensor subclass inputs / outputs
        n_inputs = len(captured.input_sources)
        if captured.guards.refresh is not None:
            captured.guards.refresh()             # what the backend added to the shape guards
        with timing.timed("guards.build"):
            guard = lower_guards(captured.guards, captured.input_sources, captured.passthrough_sources)
        log.log("guards", "GUARDS for %s:\n%s", _where(code), guard.dump())
        dump.guards(guard)
        compiled, n_call = with_side_effects(captured, compiled, n_inputs, guard)   # mutations applied after it
        entry = _C.CacheEntry.graph(guard, compiled, n_call, lower_output_spec(captured.output, n_inputs))
        entry.owner = self._xc_backend_key
        _add_entry(code, entry, self.guard_export_fn)
        return entry

    def _install_broken(self, code, broken):
        """A frame with a graph break: the cache entry runs the replacement code (a runner)."""
        with timing.timed("backend"):
            graph = self._compile_graph(code, broken.captured) if broken.has_graph else None
        compiled = numpy_io.wrap_compiled(
            _keeping_grad_mode(graph, broken.captured) if graph is not None else None, broken.captured.gm)
        compiled = tensor_classes.wrap_compiled(compiled, broken.captured.gm)
        if compiled is not None:
            # the runner runs with the callback set (its resume functions are compiled), the
            # graph never: what it runs (FX forwards, kernel wrappers, AOT) is not user code
            compiled = _C.untraced(compiled)
        runner = broken.make_runner(compiled)
        _C.set_code_state(runner.__code__, SKIP)
        log.log("output_code", "REPLACEMENT CODE for %s (graph break at %s)\n%s", _where(code),
                broken.record.where, broken.source_text)
        dump.runner(broken, runner)
        if broken.captured.guards.refresh is not None:
            broken.captured.guards.refresh()
        with timing.timed("guards.build"):
            guard = lower_guards(broken.captured.guards, [], [])
        log.log("guards", "GUARDS for %s:\n%s", _where(code), guard.dump())
        dump.guards(guard)
        entry = _C.CacheEntry.code(guard, runner)
        entry.owner = self._xc_backend_key
        _add_entry(code, entry, self.guard_export_fn)
        return entry

    def _compile_graph(self, code, captured):
        gm = captured.gm
        if config.verify:
            gm.graph.lint()
        log.log("graph_code", "TRACED GRAPH %s\n%s", _where(code), gm.print_readable(print_output=False)
                if log.enabled("graph_code") else "")
        dump.graph(gm, captured)
        if not any(n.op in ("call_function", "call_method", "call_module") and not _size_read(n)
                   for n in gm.graph.nodes) and (not self.fullgraph or not gm.graph.output_node().args[0]):
            # no ops (its outputs are its inputs, or sizes read from them): the backend is not
            # asked, as torch.compile does, except that fullgraph=True compiles a frame that
            # returns its inputs
            return gm.forward
        for o in log.observers():
            o.on_graph(code, gm, captured.guards)
        grad_on = contextlib.nullcontext()
        if _starts_grad_off(gm):
            # entered under no_grad, enabling grad inside (the resume function of a break in a
            # `with torch.no_grad():` block): the graph sets the entry mode itself and is compiled
            # and run with grad on, so an AOT backend builds the autograd path for what it
            # computes with grad (it picks inference or training by the mode it is called in)
            with gm.graph.inserting_before(next(n for n in gm.graph.nodes if n.op != "placeholder")):
                gm.graph.call_function(torch._C._set_grad_enabled, (False,))
            gm.recompile()
            captured.run_grad_on = True
            grad_on = torch.enable_grad()
        if self.backend_name == "inductor" and _on_meta(gm, captured.example_inputs):
            # meta tensors have no data for kernels (which would look for a GPU driver): the
            # graph runs as it is, with meta semantics, as eager does
            log.log("fallbacks", "whole graph eager: meta tensors in %s", _where(code))
            return gm.forward
        knobs = {k: v for k, v in self.options.items() if k in INDUCTOR_OPTIONS} \
            if self.backend_name == "inductor" else {}
        if self.backend_name == "inductor" and wants_cudagraphs(self.options):
            knobs["cudagraphs"] = True
        backend = self.backend
        if config.repro_after is not None:        # the minifier (debug/minifier.py) checks this compile
            from .debug.minifier import repro_backend
            backend = repro_backend(backend, self.backend_name, knobs)
        if config.optimize_ddp:                   # under DDP: one subgraph per bucket (backends/ddp.py)
            backend = maybe_split(backend, code, lambda: (grad_on, config.patch(**knobs), _user_hooks_deferred()),
                                  lambda e, g: self._subgraph_failed(code, e, g))
        try:
            with grad_on, config.patch(**knobs), _user_hooks_deferred(), cudagraphs.pool_scope(self.graph_pool):
                compiled = backend(gm, list(captured.example_inputs))
        except Exception as e:
            if config.suppress_errors:
                warnings.warn(f"xcompile: backend {self.backend_name!r} failed on {_where(code)}; "
                              f"running the graph eagerly: {type(e).__name__}: {e}", stacklevel=2)
                compiled = gm.forward
            else:
                raise BackendCompilerFailed(self.backend_name, e, code) from e
        if not callable(compiled):
            raise BackendCompilerFailed(
                self.backend_name,
                f"the backend returned {type(compiled).__name__}, which is not callable "
                "(a backend must return a callable that runs the graph)", code)
        return compiled

    def _subgraph_failed(self, code, e, gm):
        """A DDP subgraph's backend compile failed (at its first call): as a whole graph's would."""
        if config.suppress_errors:
            warnings.warn(f"xcompile: backend {self.backend_name!r} failed on a DDP subgraph of {_where(code)}; "
                          f"running it eagerly: {type(e).__name__}: {e}", stacklevel=2)
            return gm.forward
        raise BackendCompilerFailed(self.backend_name, e, code) from e

    def _cache_limit_hit(self, code, reason, freeze: bool = True):
        # a module attribute the frame reads and rebinds (self.steps = self.steps + 1): name it,
        # its line and the remedy (from the newest entry's side-effect plan)
        from .frontend.side_effects import static_attr_report
        detail = static_attr_report(code, _C.cache_entries(code))
        msg = "\n".join([f"xcompile hit config.cache_size_limit ({config.cache_size_limit})",
                         f"   function: {_where(code)}",
                         f"   last reason: {reason or '(unknown)'}",
                         *detail,
                         'To log all recompilation reasons, use XCOMPILE_LOGS="recompiles".'])
        if config.fail_on_cache_limit_hit:
            raise CacheLimitExceeded(msg)
        if code not in self._warned_limit:
            self._warned_limit.add(code)
            warnings.warn(msg, stacklevel=2)
        if freeze:                                # else only this instance runs eagerly
            _C.set_code_state(code, NO_NEW)
        return None


@contextlib.contextmanager
def _user_hooks_deferred():
    """The user's ``saved_tensors_hooks`` are for the tensors the program saves when it runs, not
    for the fake ones tracing saves: off while a frame is traced and compiled (the compiled
    forward's saved tensors still go through them at run time)."""
    prior = torch._C._autograd._saved_tensors_hooks_set_tracing(True)
    try:
        yield
    finally:
        torch._C._autograd._saved_tensors_hooks_set_tracing(prior)


def _add_entry(code, entry, guard_export_fn=None) -> None:
    """Adds ``entry`` to ``code``'s cache, to be dropped when an object its guard holds weakly dies.

    Guards hold the user objects they compare by identity (modules, functions, classes, globals
    read as constants) through weak references, as torch's do: a compiled module or function
    does not outlive its user, and when one of them dies, the entries whose guards name it are
    removed (with the graphs and parameters they keep), so they neither pile up nor ever match a
    new object that reuses the dead one's address.
    """
    _C.cache_add(code, entry)
    if guard_export_fn is not None:
        guard_export_fn(entry.guard.dump().splitlines())
    objs = entry.guard.weak_objects()
    if not objs:
        return
    code_ref, entry_ref = weakref.ref(code), weakref.ref(entry)

    def drop_entry(_ref, code_ref=code_ref, entry_ref=entry_ref):
        c, e = code_ref(), entry_ref()
        remove = getattr(_C, "cache_remove", None)    # (None at interpreter exit: modules are torn down)
        if c is not None and e is not None and remove is not None and DIED_YOUNG is not None:
            if remove(c, e) and e.hits < 2 and e.tag is None:
                DIED_YOUNG[c] = DIED_YOUNG.get(c, 0) + 1

    refs, seen = [], set()
    for o in objs:
        if id(o) not in seen:
            seen.add(id(o))
            refs.append(weakref.ref(o, drop_entry))
    entry.deps = refs


def _fx_tracing() -> bool:
    """torch.fx is tracing symbolically (symbolic_trace, make_fx) outside any compile."""
    return is_fx_tracing() and not torch.compiler.is_compiling()


def _foreign_function_modes() -> bool:
    """Whether a torch-function mode other than the default device's is active."""
    n = torch._C._len_torch_function_stack()
    return n > 0 and any(not isinstance(torch._C._get_function_stack_at(i), DeviceContext) for i in range(n))


def _keeping_grad_mode(compiled, captured):
    """A graph that switches grad mode inside (a ``with torch.no_grad():`` block) runs with the
    caller's mode restored on every way out, normal or exceptional, and then set to the mode
    the frame leaves behind. The eager backend runs the graph's own set_grad_enabled nodes;
    AOT backends consume them while tracing, so without this a break inside the block left
    grad mode off in the caller (issue #19)."""
    after = captured.grad_mode_after
    if after is None and not any(n.target is torch._C._set_grad_enabled for n in captured.gm.graph.nodes):
        return compiled
    set_grad = torch._C._set_grad_enabled
    grad_on = getattr(captured, "run_grad_on", False)

    def keeping_grad_mode(*args):
        prev = torch.is_grad_enabled()
        try:
            if grad_on:
                set_grad(True)
            out = compiled(*args)
        finally:
            set_grad(prev if after is None else after)
        return out
    keeping_grad_mode.__qualname__ = f"grad_mode({getattr(compiled, '__qualname__', 'graph')})"
    return keeping_grad_mode


_SIZE_VALUES = (torch.Size, torch.SymInt, torch.SymBool, torch.SymFloat)


def _size_read(node) -> bool:
    """A node that reads a symbolic size or computes with sizes (dynamic shapes), no tensor."""
    return isinstance(node.meta.get("example_value"), _SIZE_VALUES)


def _on_meta(gm, example_inputs) -> bool:
    """Whether a graph input or a tensor the graph reads as an attribute is a meta tensor."""
    def attr(target):
        obj = gm
        for part in target.split("."):
            obj = getattr(obj, part, None)
        return obj
    consts = (attr(n.target) for n in gm.graph.nodes if n.op == "get_attr")
    return any(isinstance(t, torch.Tensor) and t.device.type == "meta"
               for t in itertools.chain(example_inputs, consts))


def _starts_grad_off(gm) -> bool:
    """Called with grad off, and the graph turns it on somewhere."""
    return not torch.is_grad_enabled() and any(
        n.target is torch._C._set_grad_enabled and n.args and n.args[0] is True for n in gm.graph.nodes)


def _instance_of(code: types.CodeType, f_locals: dict):
    """id() of the object a method runs on (its first argument, named ``self``), or None."""
    if code.co_argcount and code.co_varnames[0] == "self" and "self" in f_locals:
        return id(f_locals["self"])
    return None


def _tagged(entry, code, f_locals):
    entry.tag = _instance_of(code, f_locals)
    return entry


class RunOnly:
    """Callback for ``xcompile.run()``: use existing entries (of any backend), never compile."""

    _xc_backend_key = None

    def __call__(self, code, f_locals, f_globals, f_builtins, closure):
        return None




__all__ = ["ConvertFrame", "RunOnly"]
