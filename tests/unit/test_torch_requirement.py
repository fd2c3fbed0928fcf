"""tools/wheel/torch_requirement.py, the metadata provider: a wheel, built against one torch,
and an sdist, built against none, both require the supported range (issue #30: one _C for every
torch of the range)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

_PATH = Path(__file__).resolve().parents[2] / "tools" / "wheel" / "torch_requirement.py"
_spec = importlib.util.spec_from_file_location("torch_requirement_under_test", _PATH)
tr = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tr)


@pytest.mark.parametrize("version", ["2.11.0+cu130", "2.13.0+cpu", "2.14.1"])
def test_a_wheel_requires_the_whole_range_whatever_torch_it_is_built_against(version):
    assert tr.torch_requirement(version) == "torch>=2.11,<2.15"


@pytest.mark.parametrize("version", ["2.10.0", "2.15.0"])
def test_a_wheel_is_not_built_against_a_torch_outside_the_range(version):
    with pytest.raises(RuntimeError, match=f"torch {version} is installed"):
        tr.torch_requirement(version)


@pytest.mark.parametrize("state", ["wheel", "editable", "metadata_wheel", "metadata_editable"])
def test_a_wheel_build_states_the_installed_torch(state):
    tr.build_state(state)
    assert tr.dynamic_metadata({}, {}) == {"dependencies": [tr.torch_requirement(torch.__version__)]}


def test_an_sdist_states_the_supported_range_marked_dynamic():
    assert tr.supported_range() == "torch>=2.11,<2.15"
    tr.build_state("sdist")
    try:
        assert tr.dynamic_metadata({"extra": ["x"]}, {}) == {"dependencies": ["torch>=2.11,<2.15", "x"]}
    finally:
        tr.build_state("wheel")
    assert tr.dynamic_wheel({}) == {"dependencies": True}
