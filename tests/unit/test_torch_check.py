"""The import-time torch check (issues #20, #30): a torch outside the supported range (2.11 to
2.14) is refused by ``import xcompile`` with an ImportError naming it and the range, before _C
loads; another torch in the range loads the same _C (one build for the range), and only
``_C_graphs``, built against one torch's C++ API, is not loaded there, for a reason naming both
versions (it is built for that torch on first use; simulated here: the running torch reports
another version)."""
from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from xcompile import _build_info
from xcompile._torch_check import SUPPORTED, mismatch, supported_range, unsupported


def test_the_build_records_a_supported_torch():
    assert unsupported(_build_info.TORCH_VERSION) is None
    assert _build_info.CXX11_ABI == bool(torch._C._GLIBCXX_USE_CXX11_ABI)


def test_same_minor_version_is_accepted():
    assert mismatch("2.13.0+cpu", True, "2.13.1+cu126", True) is None


def test_other_minor_version_or_abi_is_refused():
    why = mismatch("2.13.0+cpu", True, "2.14.1", True)
    assert "2.13.0+cpu" in why and "2.14.1" in why
    assert "_GLIBCXX_USE_CXX11_ABI=1" in mismatch("2.13.0", True, "2.13.0", False)


def test_supported_range():
    assert SUPPORTED == ((2, 11), (2, 14))
    assert supported_range() == "torch>=2.11,<2.15"


@pytest.mark.parametrize("version", ["2.11.0", "2.11.0+cu130", "2.12.1", "2.13.0+cpu", "2.14.1", "2.14.0a0+git1234"])
def test_versions_in_the_range_are_accepted(version):
    assert unsupported(version) is None


@pytest.mark.parametrize("version", ["2.10.0", "2.10.0+cpu", "2.15.0", "2.15.0.dev20261101", "2.9.1", "3.0.0",
                                     "1.14.0"])
def test_versions_outside_the_range_are_refused_naming_both(version):
    why = unsupported(version)
    assert why is not None
    assert f"torch {version} is installed" in why
    assert "torch 2.11 to 2.14" in why and "torch>=2.11,<2.15" in why


def test_unreadable_version_is_left_to_the_build_check():
    assert unsupported("unknown") is None


def _import_with_torch_version(version):
    script = ("import sys, torch\n"
              f"torch.__version__ = {version!r}\n"
              "try:\n"
              "    import xcompile\n"
              "except ImportError as e:\n"
              "    print('ImportError:', e)\n"
              "print('_C loaded:', 'xcompile._C' in sys.modules)\n")
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120).stdout


def test_import_with_an_unsupported_torch_raises_importerror_before_loading_C():
    out = _import_with_torch_version("2.99.0")
    assert "ImportError: xcompile supports torch 2.11 to 2.14 (torch>=2.11,<2.15), but torch 2.99.0 is installed" in out
    assert "_C loaded: False" in out


def _run(script):
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120).stdout


def test_import_with_another_supported_torch_loads_C_but_not_C_graphs():
    # (a torch version of the same TensorImpl layout as the running torch, other than the build's)
    from xcompile._torch_compat import C_LAYOUT, TORCH_VERSION
    built = tuple(int(p) for p in _build_info.TORCH_VERSION.split(".")[:2])
    other = next(f"{m[0]}.{m[1]}.0" for m in C_LAYOUT if C_LAYOUT[m] == C_LAYOUT[TORCH_VERSION] and m != built)
    out = _run("import sys, torch\n"
               f"torch.__version__ = {other!r}\n"
               "import xcompile._torch_compat as tc\n"
               "print('_C loaded:', 'xcompile._C' in sys.modules)\n"
               "print('_C_graphs:', tc.graphs_mismatch())\n")
    assert "_C loaded: True" in out, out
    assert f"built against torch {_build_info.TORCH_VERSION}, but torch {other} is installed" in out, out


def test_a_wrong_layout_is_an_importerror_not_a_wrong_read():
    # a torch of the other TensorImpl layout: _C is told the wrong offsets, the probes catch it
    from xcompile._torch_compat import C_LAYOUT, TORCH_VERSION
    other = next(f"{m[0]}.{m[1]}.0" for m in C_LAYOUT if C_LAYOUT[m] != C_LAYOUT[TORCH_VERSION])
    out = _run("import torch\n"
               f"torch.__version__ = {other!r}\n"
               "try:\n"
               "    import xcompile\n"
               "except ImportError as e:\n"
               "    print('ImportError:', e)\n")
    assert "xcompile._C reads torch" in out and "wrongly" in out, out
