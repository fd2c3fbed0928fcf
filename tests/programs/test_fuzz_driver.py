"""The random-program search driver restarts a worker that dies and says so in its summary."""
from __future__ import annotations

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def test_worker_dying_between_programs_is_restarted_and_reported():
    env = dict(os.environ, OMP_NUM_THREADS="1", XCOMPILE_FUZZ_DIE_AFTER="0")   # dies after seed 0
    r = subprocess.run([sys.executable, os.path.join(HERE, "fuzz.py"), "-n", "3", "--backends", "eager"],
                       capture_output=True, text=True, env=env, timeout=600)
    assert "worker died between programs (exit 9) before seed 1: restarted" in r.stdout, r.stdout
    summary = [ln for ln in r.stdout.splitlines() if ln.startswith("eager ")][-1]
    assert "restarts   1" in summary, summary
    ok = int(summary.split(" ok ")[1].split()[0])
    discarded = int(summary.split("discarded")[1].split()[0])
    assert ok + discarded == 3, summary          # seeds 1 and 2 ran in the new worker
