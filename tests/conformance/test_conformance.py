"""Every program in the conformance table, compiled by xcompile with ``fullgraph=True`` and a
counting backend: one graph, results (and inputs' state, module state, grads) equal to eager,
no recompile on fresh inputs of the same shapes."""
import pytest

from .cases import ALL_CASES, CASE_IDS
from .harness import XCOMPILE, run_case


def test_table_is_large_and_unique():
    assert len(ALL_CASES) >= 150
    assert len(set(CASE_IDS)) == len(CASE_IDS)


# Programs xcompile refuses on purpose for now, each with the reason (strict: a fix must remove it).
NOT_YET: dict[str, str] = {}


@pytest.mark.parametrize("case", [
    pytest.param(c, marks=pytest.mark.xfail(strict=True, reason=NOT_YET[c.name])) if c.name in NOT_YET else c
    for c in ALL_CASES], ids=CASE_IDS)
def test_xcompile_conformance(case):
    run_case(case, XCOMPILE)
