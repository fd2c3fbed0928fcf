"""Random Python programs against eager, on every backend (issue #19).

The generator (tests/programs/proggen.py) writes programs that exercise the frontend: control
flow on tensor values (graph breaks without ``print``), containers, helpers and closures,
loops, in-place mutation of inputs, of views and of intermediates, aliased inputs, breaks
inside ``torch.no_grad()`` / ``set_grad_enabled`` blocks, several calls with new values, a new
shape and new Python arguments; the harness (tests/programs/harness.py) compares outputs,
aliasing, inputs after the call, grad mode and gradients with eager.

The default run checks a fixed range of seeds per backend (a few minutes in all). Wider:

    XCOMPILE_PROG_N=2000 XCOMPILE_PROG_START=0 python -m pytest -q tests/programs/test_programs.py
    make fuzz N=5000                  # every backend, in worker processes, with a summary

A failure prints the seed, what differed and the minimized program; replay a seed with
``python tests/programs/fuzz.py --show SEED --backends BACKEND [--minimize]``.  Known failures
(bugs being fixed elsewhere) are listed in tests/programs/known.py: skipped here, and each run
as ``xfail(strict=True)`` below.
"""
from __future__ import annotations

import logging
import os

import pytest

from .harness import check, minimize
from .known import KNOWN
from .proggen import make_program

N = int(os.environ.get("XCOMPILE_PROG_N", 0))
START = int(os.environ.get("XCOMPILE_PROG_START", 0))
# programs per backend in the default run (inductor builds C++ kernels: fewer)
DEFAULT = {"eager": 150, "aot_eager": 100, "inductor": 40}
BACKENDS = tuple(DEFAULT)


@pytest.fixture(autouse=True)
def _quiet_torch():
    # fake-tensor errors of a program's `try:` block are logged by torch before we handle them
    lg = logging.getLogger("torch")
    old = lg.level
    lg.setLevel(logging.CRITICAL)
    yield
    lg.setLevel(old)


@pytest.mark.parametrize("backend", BACKENDS)
def test_random_programs(backend):
    n = N or DEFAULT[backend]
    failures, counts = [], {}
    for seed in range(START, START + n):
        if (backend, seed) in KNOWN:
            continue
        prog = make_program(seed)
        r = check(prog, backend)
        counts[r.status] = counts.get(r.status, 0) + 1
        if r:
            small = minimize(prog, backend, r) if len(failures) < 3 else prog
            failures.append(f"seed {seed}: {r.status}: {r.msg}\n{small!r}")
    assert not failures, (f"{len(failures)} of {n} programs differ from eager on {backend} ({counts}):\n"
                          + "\n".join(failures[:5]))


@pytest.mark.parametrize("backend,seed", [
    pytest.param(b, s, marks=pytest.mark.xfail(strict=True, reason=why), id=f"{b}-{s}")
    for (b, s), why in sorted(KNOWN.items())])
def test_known_failure(backend, seed):
    r = check(make_program(seed), backend)
    assert not r, f"{r.status}: {r.msg}"
