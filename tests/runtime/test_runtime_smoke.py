"""The torch-free runtime smoke checks, here under CPython 3.11 with the real extension.

The same checks run under CPython 3.12 on a torch-free build through check_py312_compile.sh;
that build takes a minute or two; it runs wherever a python3.12 and g++ are found (so CI covers
3.12's runtime too), unless XC_TEST_PY312=0.
"""
import os
import shutil
import subprocess
from pathlib import Path

import pytest

import xcompile._C as C

from . import runtime_smoke

HERE = Path(__file__).parent


def _find_py312() -> str:
    """XC_PY312, else a pyenv 3.12, else python3.12 on PATH: the first that really runs 3.12."""
    import glob
    cands = [os.environ.get("XC_PY312")] + sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.12*/bin/python3.12")))  # noqa: E501
    cands.append(shutil.which("python3.12"))
    for c in cands:
        if not c:
            continue
        try:
            ok = subprocess.run([c, "-c", "import sys; assert sys.version_info[:2] == (3, 12)"],
                                capture_output=True, timeout=30).returncode == 0
        except (OSError, subprocess.SubprocessError):
            ok = False
        if ok:
            return c
    return "/nonexistent/python3.12"


PY312 = _find_py312()


@pytest.mark.parametrize("check", runtime_smoke._CHECKS, ids=lambda fn: fn.__name__)
def test_smoke(check):
    check(C)
    assert C.get_callback() is None and not C.hook_installed()


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("XC_TEST_PY312", "1") != "1", reason="XC_TEST_PY312=0")
@pytest.mark.skipif(not (Path(PY312).exists() and shutil.which("g++")), reason="needs python3.12 and g++")
def test_py312_build_and_smoke():
    proc = subprocess.run([str(HERE / "check_py312_compile.sh"), PY312], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert "checks passed on Python 3.12" in proc.stdout
