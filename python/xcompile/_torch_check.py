"""Is the running torch one xcompile supports, and the one ``xcompile._C`` was built against?
Asked before ``_C`` loads.

xcompile supports torch 2.11 to 2.14 (``SUPPORTED``; the private torch names it reads are known
for those, ``_torch_compat``); another torch raises an ImportError naming it and the range. The
wheel's ``Requires-Dist`` and the sdist's state the same range (tools/wheel/torch_requirement.py
reads it from here).

``_C`` links torch's C++ libraries; after a torch upgrade (or with another torch first on the
path) loading it fails in the dynamic loader with an undefined symbol, or worse, loads and
misbehaves. ``_build_info.py``, written by CMake next to ``_C``, records the torch version and
C++ ABI flag of the build; a different minor version or ABI flag raises an ImportError that
names both and the command that rebuilds xcompile for the torch installed now.
"""
from __future__ import annotations

import re

REBUILD = "pip install --no-build-isolation --force-reinstall --no-deps <xcompile source tree or sdist>"
# the torch minor versions xcompile supports, first and last
SUPPORTED = ((2, 11), (2, 14))


def supported_range() -> str:
    """The supported torch versions as a requirement: ``torch>=2.11,<2.15``."""
    (lo_major, lo_minor), (hi_major, hi_minor) = SUPPORTED
    return f"torch>={lo_major}.{lo_minor},<{hi_major}.{hi_minor + 1}"


def _minor(version: str) -> tuple[int, int] | None:
    m = re.match(r"(\d+)\.(\d+)", version)
    return (int(m.group(1)), int(m.group(2))) if m else None


def unsupported(running: str) -> str | None:
    """Why xcompile cannot run with torch ``running`` (None: it is in the supported range, or its
    version does not read as major.minor)."""
    minor = _minor(running)
    if minor is None or SUPPORTED[0] <= minor <= SUPPORTED[1]:
        return None
    (lo_major, lo_minor), (hi_major, hi_minor) = SUPPORTED
    return (f"xcompile supports torch {lo_major}.{lo_minor} to {hi_major}.{hi_minor} ({supported_range()}), but "
            f"torch {running} is installed. Install a supported torch: pip install '{supported_range()}'.")


def mismatch(built: str, built_abi: bool, running: str, running_abi: bool) -> str | None:
    """Why a _C built against torch ``built`` cannot run with torch ``running`` (None: it can)."""
    if _minor(built) != _minor(running):
        return (f"xcompile's C++ extension was built against torch {built}, but torch {running} is "
                f"installed (they must share a minor version).")
    if bool(built_abi) != bool(running_abi):
        return (f"xcompile's C++ extension was built with _GLIBCXX_USE_CXX11_ABI={int(built_abi)}, "
                f"but the installed torch {running} uses {int(running_abi)}.")
    return None


def check() -> None:
    """Raise ImportError when the installed torch is outside the supported range, or not the one
    _C was built against."""
    import torch
    why = unsupported(torch.__version__)
    if why:
        raise ImportError(why)
    try:
        from ._build_info import CXX11_ABI, TORCH_VERSION
    except ImportError:
        return                      # a build older than the record: _C's own import speaks
    why = mismatch(TORCH_VERSION, CXX11_ABI, torch.__version__, torch._C._GLIBCXX_USE_CXX11_ABI)
    if why:
        raise ImportError(f"{why} Rebuild xcompile for the torch you have: {REBUILD} "
                          f"(or install torch=={TORCH_VERSION.split('+')[0]}).")
