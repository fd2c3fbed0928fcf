"""scikit-build-core metadata provider: the torch a wheel built here can run with.

``xcompile._C`` links against the installed torch's C++ libraries, whose ABI changes between
minor releases; so the wheel requires the torch it is built against, to its minor version
(``torch>=2.13,<2.14`` for a build against 2.13.0+cpu). Built in the environment that has that
torch (``--no-build-isolation``), pip then neither installs a torch the extension cannot use
nor replaces the user's.
"""
from __future__ import annotations

import re


def torch_requirement(version: str) -> str:
    m = re.match(r"(\d+)\.(\d+)", version)
    if m is None:
        raise RuntimeError(f"cannot read torch's version {version!r}")
    major, minor = int(m.group(1)), int(m.group(2))
    return f"torch>={major}.{minor},<{major}.{minor + 1}"


def dynamic_metadata(field: str, settings: dict) -> list[str]:
    if field != "dependencies":
        raise RuntimeError(f"torch_requirement provides 'dependencies', not {field!r}")
    try:
        import torch
    except ImportError as e:
        raise RuntimeError("xcompile builds against an installed torch: pip install torch, then "
                           "pip install --no-build-isolation .") from e
    return [torch_requirement(torch.__version__)] + list(settings.get("extra", []))
