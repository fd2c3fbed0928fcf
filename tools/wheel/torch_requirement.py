"""The ``[[tool.dynamic-metadata]]`` provider of ``dependencies``: the torch an xcompile
distribution can run with (scikit-build-core >= 1.0 tells it what is being built).

- A wheel (and an editable install): ``xcompile._C`` is built once for every torch of the range
  (it calls only what stays the same from 2.11 to 2.14: csrc/torch_compat.h), and
  ``_C_graphs``, the part tied to one torch's C++ API, is built for another torch of the range
  on first use; so the wheel requires the supported range too, whatever torch it is built
  against. Building against a torch outside the range is refused here, as ``import xcompile``
  would refuse it.
- An sdist: no torch is built against yet, so its metadata states the whole supported range,
  ``torch>=2.11,<2.15``, whatever torch is installed where the sdist is made, and marks
  ``Requires-Dist`` Dynamic (METADATA 2.2).

The range is ``SUPPORTED`` of ``python/xcompile/_torch_check.py`` (read from the source tree:
the package is not importable while it is being built).
"""
from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

_TORCH_CHECK = Path(__file__).resolve().parents[2] / "python" / "xcompile" / "_torch_check.py"


def _torch_check() -> ModuleType:
    spec = importlib.util.spec_from_file_location("_xcompile_build_torch_check", _TORCH_CHECK)
    assert spec is not None and spec.loader is not None, _TORCH_CHECK
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def supported_range() -> str:
    """``torch>=2.11,<2.15``: the requirement of an sdist."""
    return _torch_check().supported_range()


def torch_requirement(version: str) -> str:
    """The requirement of a wheel built against torch ``version``: the supported range (one
    build runs on every torch of it)."""
    m = re.match(r"(\d+)\.(\d+)", version)
    if m is None:
        raise RuntimeError(f"cannot read torch's version {version!r}")
    why = _torch_check().unsupported(version)
    if why:
        raise RuntimeError(f"cannot build xcompile against torch {version}: {why}")
    return supported_range()


_state = {"build": "wheel"}


def build_state(state: str) -> None:
    """scikit-build-core's hook: "sdist", "wheel", "editable", "metadata_wheel" or
    "metadata_editable", reported before each dynamic_metadata call."""
    _state["build"] = state


def dynamic_wheel(settings: dict) -> dict[str, bool]:
    """scikit-build-core's hook: the wheel's requirement may differ from the sdist's."""
    return {"dependencies": True}


def requirement(state: str) -> str:
    if state == "sdist":
        return supported_range()
    try:
        import torch
    except ImportError as e:
        raise RuntimeError(f"xcompile builds against an installed torch: pip install '{supported_range()}', then "
                           "pip install --no-build-isolation .") from e
    return torch_requirement(torch.__version__)


def dynamic_metadata(settings: dict, project: object = None) -> dict[str, list[str]]:
    return {"dependencies": [requirement(_state["build"])] + list(settings.get("extra", []))}
