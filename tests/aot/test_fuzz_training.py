"""Seeded random training programs vs eager (generator: tests/aot/fuzz_training_gen.py).

A fixed set of seeds per backend runs in the suite (~30 s). Long runs:
    XCOMPILE_FUZZ_N=5000 [XCOMPILE_FUZZ_START=0] python -m pytest -q tests/aot/test_fuzz_training.py
runs N seeds per backend. A failure prints the seed and the minimised program; replay one with
    python -c "from tests.aot.fuzz_training_gen import *; p = make_program(SEED); \
               print(p.source(), check(p, 'aot_eager'))"
"""
import os
import warnings

import pytest

from .fuzz_training_gen import check, make_program, minimise

N = int(os.environ.get("XCOMPILE_FUZZ_N", 0))
START = int(os.environ.get("XCOMPILE_FUZZ_START", 0))
# seeds per backend in the default run: aot_eager is cheap; inductor builds C++ kernels
DEFAULT = {"aot_eager": 160, "save_all": 40, "inductor": 16}


@pytest.mark.parametrize("backend", ["aot_eager", "save_all", "inductor"])
def test_fuzz_training_against_eager(backend):
    n = N or DEFAULT[backend]
    failures = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for seed in range(START, START + n):
            prog = make_program(seed)
            msg = check(prog, backend)
            if msg:
                small = minimise(prog, backend)
                failures.append(f"seed {seed}: {msg}\n{small.source()}inputs: {small.inputs}")
                if len(failures) >= 5:
                    break
    assert not failures, f"{len(failures)} of {n} programs differ from eager:\n" + "\n".join(failures)
