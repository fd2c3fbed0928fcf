"""Signal handlers that run during a compile see the program's state, not the tracer's.

Python runs a signal handler between two bytecodes of whatever the main thread is doing. When
that is a compile, torch's tracing state is active: fake-tensor and proxy modes on the dispatch
mode stack, functionalization in the thread's dispatch keys, the Python dispatcher, a grad mode
the tracer set. A handler that computes with tensors (a timer that logs a metric, saves a
checkpoint, or calls a compiled function) would then compute on fake tensors or record its ops
into the user's graph. So while a compile runs (``outside_compile()`` around it), each Python
signal handler is wrapped: it runs with the dispatch modes popped, the dispatch keys, Python
dispatcher and grad mode of the moment the compile began, and everything restored after.
Handlers are put back when the compile ends (unless the program replaced them meanwhile).
``gc.callbacks`` run at any allocation of the compile, fake-tensor mode active or not: each is
wrapped the same way for the compile's thread (issue #31: one that called compiled code computed
on fake tensors), and put back after; a compiled function it calls runs eagerly while the thread
compiles (convert_frame), never a compile inside the half-done one.

An exception a handler raises (KeyboardInterrupt from Ctrl-C or a timer) is held back until a
safe point: raised at the tracer's next instruction (``raise_pending``) or when the compile
ends. Raised where the signal landed, it could cross a C++ frame of torch's dispatcher that
cannot pass it on (a fake tensor's dispatch calling back into Python), and the process aborts.
"""
from __future__ import annotations

import contextlib
import gc
import signal
import threading

import torch
from torch.utils._python_dispatch import _disable_current_modes

from .warmup import ASYNC_SIGNALS


class _State:
    """The thread's torch state when the compile began."""

    __slots__ = ("include", "exclude", "grad")

    def __init__(self):
        self.include = torch._C._dispatch_tls_local_include_set()
        self.exclude = torch._C._dispatch_tls_local_exclude_set()
        self.grad = torch.is_grad_enabled()


PENDING: list[BaseException] = []          # raised by a handler during a compile, not yet re-raised


def raise_pending() -> None:
    """Raise what a signal handler raised during this compile (a safe point)."""
    if PENDING:
        e = PENDING[0]
        PENDING.clear()
        raise e


def _wrap(handler, state: _State):
    def run(sig, frame):
        grad = torch.is_grad_enabled()
        try:
            with _disable_current_modes(), torch._C._DisablePythonDispatcher(), \
                    torch._C._ForceDispatchKeyGuard(state.include, state.exclude):
                torch._C._set_grad_enabled(state.grad)
                handler(sig, frame)
        except BaseException as e:  # noqa: BLE001 - raised again at the next safe point
            PENDING.append(e)
        finally:
            torch._C._set_grad_enabled(grad)

    run.__wrapped__ = handler  # type: ignore[attr-defined]  # a plain function attribute
    return run


class _GcCallback:
    """A gc callback run, on the compiling thread, outside the compile's torch state (equal to
    the callback it wraps, so ``gc.callbacks.remove(cb)`` meanwhile still finds it)."""

    __slots__ = ("cb", "state", "thread")

    def __init__(self, cb, state: _State):
        self.cb, self.state, self.thread = cb, state, threading.get_ident()

    def __call__(self, phase, info):
        if threading.get_ident() != self.thread:
            return self.cb(phase, info)
        grad = torch.is_grad_enabled()
        try:
            with _disable_current_modes(), torch._C._DisablePythonDispatcher(), \
                    torch._C._ForceDispatchKeyGuard(self.state.include, self.state.exclude):
                torch._C._set_grad_enabled(self.state.grad)
                return self.cb(phase, info)
        finally:
            torch._C._set_grad_enabled(grad)

    def __eq__(self, other):
        return other is self or other is self.cb or (isinstance(other, _GcCallback) and other.cb is self.cb)

    def __hash__(self):
        return hash(self.cb)


@contextlib.contextmanager
def _gc_callbacks_wrapped(state: _State):
    wrapped = [_GcCallback(cb, state) for cb in gc.callbacks]
    gc.callbacks[:] = wrapped
    try:
        yield
    finally:
        gc.callbacks[:] = [cb.cb if isinstance(cb, _GcCallback) and cb in wrapped else cb for cb in gc.callbacks]


_depth = threading.local()


@contextlib.contextmanager
def outside_compile():
    """Run the block (a compile) with the main thread's Python signal handlers and the gc
    callbacks wrapped."""
    if getattr(_depth, "n", 0):
        yield                                   # nested: done
        return
    state = _State()
    if threading.current_thread() is not threading.main_thread():
        _depth.n = 1                            # handlers only run in the main thread
        try:
            with _gc_callbacks_wrapped(state):
                yield
        finally:
            _depth.n = 0
        return
    wrapped: dict = {}
    for sig in ASYNC_SIGNALS:
        old = signal.getsignal(sig)
        if callable(old):
            new = _wrap(old, state)
            wrapped[sig] = (old, new)
            signal.signal(sig, new)
    _depth.n = 1
    try:
        with _gc_callbacks_wrapped(state):
            yield
    finally:
        _depth.n = 0
        for sig, (old, new) in wrapped.items():
            if signal.getsignal(sig) is new:
                signal.signal(sig, old)
        raise_pending()                         # the compile ended: raise it now (it wins)
