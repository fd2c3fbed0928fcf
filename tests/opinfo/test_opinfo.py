"""torch's OpInfo database through xcompile (issue #31): each sample compiled alone and compared
with eager (see harness.py for what is compared).

Two entries:

- ``test_slice``: in the default run. ``SLICE`` (40 ops of every kind: pointwise, reductions,
  views and their ``*_copy`` ops, indexing, scans, matmuls, norms, convolution), their first
  ``SLICE_SAMPLES`` samples, on every backend in float32 (forward and in-place variants), with
  gradients on aot_eager and inductor, and in float64, int64 and bool on inductor where the op
  supports the dtype. Nothing may fall back or run without a graph there.
- ``test_full``: the whole database on every backend, dtype and with gradients, marked
  ``opinfo``. It is generated only when asked for, with ``-m opinfo`` (the marker named in the
  ``-m`` expression) or ``XCOMPILE_OPINFO_FULL=1``; otherwise it is one skipped test, so
  ``pytest tests`` (and ``make test``) stays fast. Ops in ``known.RANDOM`` are compared on
  structure only, ops in ``known.OTHERS`` are skipped, ops in ``known.FALLBACK`` must fall back.

Per-op failures and a summary count: ``python tests/opinfo/run.py --backend inductor --dtype float32 [--grad]``.
"""
from __future__ import annotations

import os
import warnings

import pytest

pytest.importorskip("expecttest", reason="torch.testing._internal needs expecttest (make deps installs it)")

from . import harness  # after the skip: torch.testing._internal needs expecttest
from .known import FALLBACK, NO_GRAPH

SLICE = (
    "add", "mul", "div.no_rounding_mode", "sub", "abs", "exp", "log", "sin", "tanh", "sigmoid", "pow",
    "clamp", "where", "masked_fill", "sum", "mean", "amax", "argmax", "cumsum", "softmax",
    "cat", "stack", "index_select", "gather", "scatter_add", "mm", "bmm", "addmm",
    "permute_copy", "expand_copy", "view_copy", "transpose_copy", "unfold_copy", "narrow_copy",
    "reshape", "flatten", "nn.functional.relu", "nn.functional.gelu", "nn.functional.layer_norm",
    "nn.functional.conv2d",
)
SLICE_SAMPLES = 2

_DB = {harness.full_name(op): op for op in harness.op_db()}


def _slice_cases():
    for name in SLICE:
        for backend in harness.BACKENDS:
            yield pytest.param(name, backend, "float32", False, id=f"{name}-{backend}-float32")
            if backend in ("aot_eager", "inductor"):
                yield pytest.param(name, backend, "float32", True, id=f"{name}-{backend}-float32-grad")
        for dtype in ("float64", "int64", "bool"):
            if harness.DTYPES[dtype] in _DB[name].supported_dtypes("cpu"):
                yield pytest.param(name, "inductor", dtype, False, id=f"{name}-inductor-{dtype}")


def _check(name: str, backend: str, dtype: str, grad: bool, max_samples: int | None, strict: bool) -> None:
    o = harness.run_op(_DB[name], backend, harness.DTYPES[dtype], grad=grad, max_samples=max_samples)
    if o.note:
        pytest.skip(o.note)
    assert not o.failures, f"{name} on {backend} {dtype}{' grad' if grad else ''}:\n" + "\n".join(o.failures)
    assert o.samples, f"{name}: no sample eager accepts"
    no_graph = o.no_graph and (name, backend) not in NO_GRAPH
    ran_eagerly = o.fallbacks + ([f"{o.no_graph} sample(s) gave no graph"] if no_graph else [])
    if strict:
        assert not ran_eagerly, f"{name} on {backend}: ran eagerly: {ran_eagerly}"
    elif ran_eagerly and name not in FALLBACK:
        warnings.warn(f"{name} on {backend} {dtype}: agrees, but ran eagerly: {ran_eagerly[:2]}", stacklevel=1)


@pytest.mark.parametrize(("name", "backend", "dtype", "grad"), list(_slice_cases()))
def test_slice(name, backend, dtype, grad):
    _check(name, backend, dtype, grad, SLICE_SAMPLES, strict=True)


def _full_enabled(config) -> bool:
    return os.environ.get("XCOMPILE_OPINFO_FULL") == "1" or "opinfo" in (config.getoption("markexpr") or "")


def pytest_generate_tests(metafunc):
    if metafunc.function.__name__ != "test_full":
        return
    if not _full_enabled(metafunc.config):
        metafunc.parametrize(("name", "backend", "dtype", "grad"), [pytest.param(
            None, None, None, None, marks=pytest.mark.skip(reason="the whole OpInfo database: -m opinfo "
                                                                   "or XCOMPILE_OPINFO_FULL=1"))], ids=["off"])
        return
    cases = []
    for name in sorted(_DB):
        for backend in harness.BACKENDS:
            for dtype in harness.DTYPES:
                cases.append(pytest.param(name, backend, dtype, False, id=f"{name}-{backend}-{dtype}"))
            for dtype in ("float32", "float64"):
                cases.append(pytest.param(name, backend, dtype, True, id=f"{name}-{backend}-{dtype}-grad"))
    metafunc.parametrize(("name", "backend", "dtype", "grad"), cases)


@pytest.mark.opinfo
def test_full(name, backend, dtype, grad):
    _check(name, backend, dtype, grad, None, strict=False)
