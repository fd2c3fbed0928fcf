"""Is the running torch one xcompile supports? Asked before ``_C`` loads.

xcompile supports torch 2.11 to 2.14 (``SUPPORTED``; the private torch names it reads are known
for those, ``_torch_compat``); another torch raises an ImportError naming it and the range. The
wheel's ``Requires-Dist`` and the sdist's state the same range (tools/wheel/torch_requirement.py
reads it from here).

``_C`` is built once for every torch in the range (it calls only what torch keeps stable across
them, csrc/torch_compat.h; ``_torch_compat.init_c_abi`` checks the rest at import). The one part
built against libtorch's C++ API, ``_C_graphs`` (CUDA-graph replay), is tied to the torch minor
version it was built against: ``_build_info.py``, written by CMake next to it, records that
torch and its C++ ABI flag, and ``mismatch`` says why another cannot load it
(``_torch_compat.graph_replay_extension``).
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
    """Raise ImportError when the installed torch is outside the supported range."""
    import torch
    why = unsupported(torch.__version__)
    if why:
        raise ImportError(why)
