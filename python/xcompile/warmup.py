"""The first compile's imports, made safe against signals and a short stack (issue #19 item 8).

The compile path imports about a thousand modules the first time it runs (the frontend, sympy,
fake tensors -- whose constructor imports parts of torch -- and the backend's AOT and kernel
generator).  A KeyboardInterrupt or a timer signal's exception raised in the middle of those
imports leaves half-initialised modules behind, and every later compile in the process fails
("module 'sympy' has no attribute 'core'", "partially initialized module").  So the imports run
here, once, with the asynchronous signals held back (they are delivered right after, and the
handler's exception is raised then, with every module whole) and with headroom on the stack
(a first call made near the recursion limit raised RecursionError from inside an import).
"""
from __future__ import annotations

import contextlib
import importlib
import signal
import sys
import threading
import types

_FRONTEND = ("xcompile.frontend.graph_break", "xcompile.guards.build", "xcompile.guards.lower",
             "sympy", "torch._subclasses.fake_tensor", "torch.fx.experimental.proxy_tensor",
             "torch.fx.experimental.symbolic_shapes")
# Signals whose Python handlers may raise: held back while modules are half-built.
ASYNC_SIGNALS = tuple(getattr(signal, n) for n in ("SIGINT", "SIGALRM", "SIGTERM", "SIGHUP", "SIGUSR1",
                                            "SIGUSR2", "SIGVTALRM", "SIGPROF") if hasattr(signal, n))
_done: set[str] = set()
_lock = threading.RLock()


@contextlib.contextmanager
def guarded():
    """Imports inside run whole: Python-level signal handlers deferred (they only ever run in the
    main thread; blocking the signal there would not do, since the OS may deliver it to one of
    torch's threads), and 2000 frames of headroom on the stack."""
    held: dict = {}
    pending: list = []
    if threading.current_thread() is threading.main_thread():
        for sig in ASYNC_SIGNALS:
            old = signal.getsignal(sig)
            if callable(old):
                held[sig] = old
                signal.signal(sig, lambda s, f: pending.append(s))
    limit = sys.getrecursionlimit()
    depth = _depth()
    if depth + 2000 > limit:
        sys.setrecursionlimit(depth + 2000)
    try:
        with _lock:
            yield
    finally:
        sys.setrecursionlimit(limit)
        for sig, old in held.items():
            signal.signal(sig, old)
        for sig in dict.fromkeys(pending):       # delivered now, to the user's own handler
            signal.raise_signal(sig)


def _depth() -> int:
    f: types.FrameType | None = sys._getframe()
    n = 0
    while f is not None:
        f, n = f.f_back, n + 1
    return n


def prepare_frontend() -> None:
    """Everything a capture imports, once per process."""
    if "frontend" in _done:
        return
    with guarded():
        for name in _FRONTEND:
            importlib.import_module(name)
        from torch._subclasses.fake_tensor import FakeTensorMode
        FakeTensorMode()                     # its constructor imports more of torch, lazily
        _done.add("frontend")


def import_guarded(name: str):
    """``importlib.import_module(name)`` with signals deferred (a backend's module tree)."""
    if name in sys.modules and name in _done:
        return sys.modules[name]
    with guarded():
        mod = importlib.import_module(name)
        _done.add(name)
    return mod


__all__ = ["guarded", "import_guarded", "prepare_frontend"]
