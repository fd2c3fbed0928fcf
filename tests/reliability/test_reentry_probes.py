"""Issue #31 3b: code run while a compile is under way (a gc callback at an allocation of the
trace, with fake-tensor mode on the stack; a signal handler) calls compiled functions, compiled
before or never called yet: each answer is eager's, and the process stays usable. Each probe in
a fresh interpreter."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

_PROBE = textwrap.dedent("""
    import gc, signal, sys, torch, xcompile
    backend, which = sys.argv[1], sys.argv[2]

    def g(x):
        return x.sin() * 2 + 1

    cg = xcompile.compile(g, backend=backend)
    if which == "compiled_before":
        cg(torch.ones(3))
    seen, bad = [0], []

    def call_compiled(*_):
        if seen[0] >= 300:
            return
        seen[0] += 1
        try:
            x = torch.ones(3)
            r = cg(x)
            if type(r) is not torch.Tensor or not torch.equal(r, torch.ones(3).sin() * 2 + 1):
                bad.append(repr(r))
        except Exception as e:
            bad.append(repr(e)[:200])

    def f(x):
        y = x
        for i in range(20):
            y = y.cos() + i
        return y

    x = torch.randn(4)
    gc.callbacks.append(lambda phase, info: call_compiled() if phase == "start" else None)
    old = gc.get_threshold()
    gc.set_threshold(1)
    out = xcompile.compile(f, backend=backend)(x)
    gc.set_threshold(*old)
    gc.callbacks.clear()
    torch.testing.assert_close(out, f(x))
    assert seen[0] > 0 and not bad, (seen[0], bad[:3])

    seen[0] = 0
    signal.signal(signal.SIGALRM, call_compiled)
    signal.setitimer(signal.ITIMER_REAL, 0.002, 0.002)
    for k in range(3):
        f.__code__ = f.__code__.replace()          # a fresh code object: compiled again
        torch.testing.assert_close(xcompile.compile(f, backend=backend)(x), f(x))
    signal.setitimer(signal.ITIMER_REAL, 0)
    assert seen[0] > 0 and not bad, (seen[0], bad[:3])
    torch.testing.assert_close(cg(torch.ones(3)), g(torch.ones(3)))
    print("usable")
""")


@pytest.mark.parametrize("which", ["compiled_before", "first_call"])
@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_compiled_code_called_during_a_compile(backend, which):
    r = subprocess.run([sys.executable, "-c", _PROBE, backend, which], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0 and "usable" in r.stdout, f"rc {r.returncode}\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}"
