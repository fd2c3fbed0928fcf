"""Fault probes (issue #19): each in a fresh interpreter, each asserting that the process stays
usable and every answer equals eager's. Threads racing ``reset()``, a signal handler that calls
compiled code while a compile runs, interrupts at random points of later compiles (with graph
breaks), exceptions leaving compiled frames from inside grad-mode blocks, deep recursion through
compiled frames, and objects deleted and their ids reused between calls."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

_PRELUDE = textwrap.dedent("""
    import gc, random, signal, sys, threading, time
    import torch, xcompile
    from torch import nn

    def brk(x):                       # a function with graph breaks, fresh code object per call
        ns = {}
        exec(compile('''
    def f(x, k):
        y = x.sin() * k
        if y.sum() > -1e9:
            y = y + 1
        with torch.no_grad():
            z = y.cos()
            if z.sum() > -1e9:
                z = z * 2
        return y + z
    ''', '<probe>', 'exec'), {'torch': torch}, ns)
        return ns['f']

    def same(a, b):
        torch.testing.assert_close(a, b)
""")


def _run(body: str, *args: str, timeout: int = 300) -> str:
    script = _PRELUDE + textwrap.dedent(body)
    r = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"process broken (rc {r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}"
    assert "usable" in r.stdout, r.stdout[-2000:]
    return r.stdout


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_threads_racing_reset(backend):
    _run("""
        backend = sys.argv[1]
        eager = brk(None)
        fns = [xcompile.compile(brk(None), backend=backend) for _ in range(3)]
        lin = nn.Linear(8, 8)
        clin = xcompile.compile(lin, backend=backend)
        errors, stop = [], threading.Event()

        def work(i):
            try:
                for n in range(60):
                    x = torch.randn(4, 8)
                    same(fns[(i + n) % 3](x, 2.0), eager(x, 2.0))
                    with torch.no_grad():
                        same(clin(x), lin(x))
                    assert torch.is_grad_enabled()
            except BaseException as e:                 # noqa: BLE001
                errors.append(repr(e))

        def resetter():
            while not stop.is_set():
                xcompile.reset()
                time.sleep(0.002)

        r = threading.Thread(target=resetter)
        r.start()
        ws = [threading.Thread(target=work, args=(i,)) for i in range(3)]
        for w in ws: w.start()
        for w in ws: w.join()
        stop.set(); r.join()
        assert not errors, errors
        x = torch.randn(4, 8)
        same(fns[0](x, 3.0), eager(x, 3.0))
        print("usable")
    """, backend)


@pytest.mark.slow
def test_signal_handler_calls_compiled_code_during_a_compile():
    _run("""
        ready = xcompile.compile(lambda t: t * 3 + 1, backend="eager")
        ready(torch.ones(2))
        seen = []

        def handler(sig, frame):
            x = torch.randn(3)
            same(ready(x), x * 3 + 1)                       # compiled already
            g = xcompile.compile(lambda t: t.exp() - 1, backend="eager")
            same(g(x), x.exp() - 1)                         # compiled inside the handler
            seen.append(True)

        signal.signal(signal.SIGALRM, handler)
        random.seed(0)
        for i in range(12):
            signal.setitimer(signal.ITIMER_REAL, random.uniform(0.001, 0.05))
            f = xcompile.compile(brk(None), backend="inductor" if i % 3 == 0 else "aot_eager")
            x = torch.randn(5, requires_grad=True)
            same(f(x, 1.5), brk(None)(x, 1.5))
            signal.setitimer(signal.ITIMER_REAL, 0)
        assert seen, "the handler never ran"
        assert torch.is_grad_enabled()
        print("usable", len(seen))
    """)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_interrupts_at_random_points_of_later_compiles(backend):
    _run("""
        backend = sys.argv[1]
        warm = xcompile.compile(lambda t: t + 1, backend=backend)
        warm(torch.ones(2))                                  # the first compile is done
        def handler(sig, frame):
            raise KeyboardInterrupt
        signal.signal(signal.SIGALRM, handler)
        random.seed(1)
        interrupted = 0
        for i in range(25):
            f = xcompile.compile(brk(None), backend=backend)
            x = torch.randn(6, requires_grad=bool(i % 2))
            signal.setitimer(signal.ITIMER_REAL, random.uniform(0.0005, 0.08))
            try:
                out = f(x, 2.0)
            except KeyboardInterrupt:
                interrupted += 1
                out = None
            signal.setitimer(signal.ITIMER_REAL, 0)
            assert torch.is_grad_enabled(), "grad mode left off by an interrupt"
            if out is not None:
                same(out, brk(None)(x, 2.0))
            for _ in range(2):                               # the same function again: whole
                same(f(x, 2.0), brk(None)(x, 2.0))
            same(warm(x), x + 1)
        assert torch.is_grad_enabled()
        print("usable", interrupted)
    """, backend)


def test_exceptions_leave_grad_mode_and_autocast_as_eager():
    _run("""
        def f(x):
            with torch.no_grad():
                y = x * 2
                if y.sum() > -1e9:
                    pass
                if x.shape[0] == 3:
                    raise ValueError("in no_grad")
            return y

        def g(x):
            with torch.autocast("cpu", dtype=torch.bfloat16):
                y = x @ x.t()
                if y.sum() > -1e9:
                    raise KeyError("in autocast")
            return y

        def h(x):
            with torch.enable_grad():
                y = x * 2
                print("", end="")
                raise RuntimeError("in enable_grad")

        for backend in ("eager", "aot_eager", "inductor"):
            for fn, exc in ((f, ValueError), (g, KeyError), (h, RuntimeError)):
                cf = xcompile.compile(fn, backend=backend)
                for grad in (True, False):
                    with torch.set_grad_enabled(grad):
                        for _ in range(2):
                            try:
                                cf(torch.randn(3, 3, requires_grad=True))
                            except exc:
                                pass
                            else:
                                raise AssertionError(f"{fn.__name__}: no {exc.__name__}")
                            assert torch.is_grad_enabled() is grad, (backend, fn.__name__, grad)
                            assert not torch.is_autocast_enabled("cpu"), (backend, fn.__name__)
        print("usable")
    """)


def test_deep_recursion_through_compiled_frames():
    _run("""
        @xcompile.compile(backend="eager")
        def down(x, n):
            if n == 0:
                return x
            return down(x * 1.01, n - 1) + 1

        def eager_down(x, n):
            return x if n == 0 else eager_down(x * 1.01, n - 1) + 1

        x = torch.randn(3)
        same(down(x, 150), eager_down(x, 150))
        try:
            down(x, 100000)
        except RecursionError:
            pass
        else:
            raise AssertionError("no RecursionError")
        same(down(x, 20), eager_down(x, 20))
        print("usable")
    """)


def test_objects_deleted_and_ids_reused_between_calls():
    _run("""
        def step(m, x):
            return m(x).relu() * 2

        cstep = xcompile.compile(step, backend="eager")
        for i in range(12):
            m = nn.Linear(4, 4)                  # often at the address of the last one
            x = torch.randn(2, 4)
            same(cstep(m, x), step(m, x))
            del m
            gc.collect()
        fns = []
        for i in range(8):
            k = float(i)
            f = xcompile.compile(lambda t, k=k: t + k, backend="eager")
            same(f(torch.zeros(2)), torch.full((2,), k))
            del f
            gc.collect()
        print("usable")
    """)
