"""Faults during the first compile of a process (issue #19 item 8), each in a fresh interpreter:
a timer signal whose handler raises KeyboardInterrupt at points spread over the first compile,
and a first call made with little stack left.  Whatever the interrupt hit, the process must stay
usable: a later compile works and gives eager's answer."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

_INTERRUPT = textwrap.dedent("""
    import signal, sys, torch, xcompile
    def handler(sig, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, float(sys.argv[1]))
    try:
        f = xcompile.compile(lambda t: (t.sin() + 1) * 2, backend=sys.argv[2])
        f(torch.randn(8))
        print("finished before the signal")
    except KeyboardInterrupt:
        print("interrupted")
    signal.setitimer(signal.ITIMER_REAL, 0)
    xcompile.reset()
    g = xcompile.compile(lambda t: t.cos() - 1, backend=sys.argv[2])
    x = torch.randn(8)
    torch.testing.assert_close(g(x), x.cos() - 1)
    print("usable")
""")

_SHORT_STACK = textwrap.dedent("""
    import sys, torch, xcompile
    f = xcompile.compile(lambda t: t * 2 + 1, backend="eager")
    def dive(n):
        if n == 0:
            return f(torch.ones(3))
        return dive(n - 1)
    here = 0
    fr = sys._getframe()
    while fr is not None:
        fr, here = fr.f_back, here + 1
    out = dive(sys.getrecursionlimit() - here - 60)     # about 60 frames left
    torch.testing.assert_close(out, torch.full((3,), 3.0))
    print("usable")
""")


def _run(script: str, *args: str) -> str:
    r = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"process broken (rc {r.returncode}):\\n{r.stdout}\\n{r.stderr[-3000:]}"
    return r.stdout


@pytest.mark.slow
@pytest.mark.parametrize("delay", ["0.02", "0.2", "0.5", "1.0", "1.6"])
def test_interrupt_during_first_compile_leaves_the_process_usable(delay):
    assert "usable" in _run(_INTERRUPT, delay, "eager")


@pytest.mark.slow
@pytest.mark.parametrize("delay", ["0.3", "1.2", "2.5"])
def test_interrupt_during_first_inductor_compile(delay):
    assert "usable" in _run(_INTERRUPT, delay, "inductor")


def test_first_call_with_little_stack_left():
    assert "usable" in _run(_SHORT_STACK)
