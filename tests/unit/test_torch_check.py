"""The import-time torch check (issue #20): a _C built against another torch is refused by
``import xcompile`` with an ImportError naming both versions and the rebuild command, before
_C loads (simulated here: the running torch reports another version)."""
from __future__ import annotations

import subprocess
import sys

import torch

from xcompile import _build_info
from xcompile._torch_check import mismatch


def test_the_build_records_the_running_torch():
    assert _build_info.TORCH_VERSION == torch.__version__
    assert _build_info.CXX11_ABI == bool(torch._C._GLIBCXX_USE_CXX11_ABI)


def test_same_minor_version_is_accepted():
    assert mismatch("2.13.0+cpu", True, "2.13.1+cu126", True) is None


def test_other_minor_version_or_abi_is_refused():
    why = mismatch("2.13.0+cpu", True, "2.14.1", True)
    assert "2.13.0+cpu" in why and "2.14.1" in why
    assert "_GLIBCXX_USE_CXX11_ABI=1" in mismatch("2.13.0", True, "2.13.0", False)


def test_import_with_another_torch_raises_importerror_before_loading_C():
    script = ("import sys, torch\n"
              "torch.__version__ = '2.99.0'\n"
              "try:\n"
              "    import xcompile\n"
              "except ImportError as e:\n"
              "    print('ImportError:', e)\n"
              "print('_C loaded:', 'xcompile._C' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120).stdout
    assert f"built against torch {torch.__version__}, but torch 2.99.0 is installed" in out, out
    assert "pip install --no-build-isolation" in out
    assert "_C loaded: False" in out
