"""The torch-free runtime smoke checks, here under CPython 3.11 with the real extension.

The same checks run under CPython 3.12 on a torch-free build through check_py312_compile.sh;
that build takes minutes, so it runs here only when XC_TEST_PY312=1.
"""
import os
import shutil
import subprocess
from pathlib import Path

import pytest

import xcompile._C as C

from . import runtime_smoke

HERE = Path(__file__).parent
PY312 = os.environ.get("XC_PY312", "/root/.pyenv/versions/3.12.1/bin/python3.12")


@pytest.mark.parametrize("check", runtime_smoke._CHECKS, ids=lambda fn: fn.__name__)
def test_smoke(check):
    check(C)
    assert C.get_callback() is None and not C.hook_installed()


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("XC_TEST_PY312") != "1", reason="set XC_TEST_PY312=1 (builds for 3.12)")
@pytest.mark.skipif(not (Path(PY312).exists() and shutil.which("g++")), reason="needs python3.12 and g++")
def test_py312_build_and_smoke():
    proc = subprocess.run([str(HERE / "check_py312_compile.sh"), PY312], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert "checks passed on Python 3.12" in proc.stdout
