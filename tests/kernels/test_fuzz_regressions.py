"""Regressions found by the kernel fuzzer (test_fuzz.py), minimised; compared with eager."""
from __future__ import annotations

import pytest
import torch

from .util import BACKENDS, check


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("e", [True, False])
def test_pow_bool_bool_stays_bool(backend, e):
    # the meta kernel says int64; eager's result_type(bool tensor, bool scalar) is bool
    x = torch.rand(3, 4).t() > 0.5
    check(lambda a: (torch.pow(a, e), torch.pow(a, e) + 1), [x], backend)
