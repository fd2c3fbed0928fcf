"""Is the running torch the one ``xcompile._C`` was built against?  Asked before ``_C`` loads.

``_C`` links torch's C++ libraries; after a torch upgrade (or with another torch first on the
path) loading it fails in the dynamic loader with an undefined symbol, or worse, loads and
misbehaves. ``_build_info.py``, written by CMake next to ``_C``, records the torch version and
C++ ABI flag of the build; a different minor version or ABI flag raises an ImportError that
names both and the command that rebuilds xcompile for the torch installed now.
"""
from __future__ import annotations

import re

REBUILD = "pip install --no-build-isolation --force-reinstall --no-deps <xcompile source tree or sdist>"


def _minor(version: str) -> tuple[int, int] | None:
    m = re.match(r"(\d+)\.(\d+)", version)
    return (int(m.group(1)), int(m.group(2))) if m else None


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
    """Raise ImportError when the installed torch is not the one _C was built against."""
    try:
        from ._build_info import CXX11_ABI, TORCH_VERSION
    except ImportError:
        return                      # a build older than the record: _C's own import speaks
    import torch
    why = mismatch(TORCH_VERSION, CXX11_ABI, torch.__version__, torch._C._GLIBCXX_USE_CXX11_ABI)
    if why:
        raise ImportError(f"{why} Rebuild xcompile for the torch you have: {REBUILD} "
                          f"(or install torch=={TORCH_VERSION.split('+')[0]}).")
