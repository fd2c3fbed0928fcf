"""Validates the conformance table itself: each program is captured whole (one graph, no
recompile on fresh inputs) by ``torch.compile`` with a counting backend, and matches eager.

Slow (dynamo compiles ~240 programs), so it runs only with ``XCOMPILE_TEST_REFERENCE=1``:

    XCOMPILE_TEST_REFERENCE=1 pytest tests/conformance/test_reference.py tests/e2e -k "reference or torch"

(``-k`` keeps xcompile out of the process: the reference only judges the programs.)"""
import os

import pytest

from .cases import ALL_CASES, CASE_IDS
from .harness import TORCH_REFERENCE, run_case

pytestmark = pytest.mark.skipif(os.environ.get("XCOMPILE_TEST_REFERENCE") != "1",
                                reason="reference validation runs only with XCOMPILE_TEST_REFERENCE=1")


def test_table_is_large_and_unique():
    assert len(ALL_CASES) >= 150
    assert len(set(CASE_IDS)) == len(CASE_IDS)


# Programs on which torch.compile itself is wrong, or cannot capture whole (found by this validation);
# xcompile must get them right.
REFERENCE_BUGS = {
    "control.range_object_properties": "torch.compile (2.13) returns `8 in range(...)` as an int, not a bool",
    "exc.exception_from_inlined_callee": "torch.compile (2.13) cannot trace super().__init__() of an "
                                         "Exception subclass",
    "exc.user_exception_with_fields": "torch.compile (2.13) cannot trace super().__init__() of an "
                                      "Exception subclass",
    "exc.assert_false_caught": "torch.compile (2.13) graph-breaks on an assert that fails while tracing",
    "builtins.int_methods": "torch.compile (2.13) cannot trace int.to_bytes",
    "control.yield_from_return_value": "torch.compile (2.13) gives None for the value of `yield from`",
    "effects.global_defined_by_the_function": "torch.compile (2.13) cannot read back a global that the "
                                              "function itself defines (\"failed to find name in frame builtins\")",
    "generator_protocol.send_after_exhaustion_stop_iteration": "torch.compile (2.13): Unsupported python_type() call",
    "generator_protocol.throw_caught_changes_state": "torch.compile (2.13): throw(ValueError) is an Observed exception",
    "generator_protocol.yield_from_send_and_return_value": "torch.compile (2.13): Unreachable sub-generator code",
    "generator_protocol.yield_from_throw_inner_then_outer": "torch.compile (2.13): Observed exception",
    "generator_protocol.yield_from_close_inner_first": "torch.compile (2.13) gives a log of length 1, eager 2",
    "append_only.append_extend_global_list": "torch.compile (2.13) guards an append-only list's length: recompiles",
    "append_only.clear_then_append_global_list": "torch.compile (2.13) guards an append-only list's length: recompiles",
    "append_only.module_list_attribute_append": "torch.compile (2.13) guards an append-only list's length: recompiles",
    "append_only.closure_list_append": "torch.compile (2.13) guards an append-only list's length: recompiles",
    "dict_subclasses.outside_set_add_discard": "torch.compile (2.13) guards a written-only set's contents: recompiles",
    "dict_subclasses.module_set_attribute_update": "torch.compile (2.13) guards a written-only set's contents: "
                                            "recompiles",
    "stdlib.groupby_group_left_behind_is_empty": "torch.compile (2.13) keeps a groupby group's items after the "
                                                 "groupby advanced past it (eager: the group is empty)",
    "stdlib.iterator_types_checked": "torch.compile (2.13) gives type(iter(())) is type(iter([]))",
    "stdlib.deque_argument_with_maxlen_extend": "torch.compile (2.13) reads the maxlen of a deque argument as None",
    "classes.list_subclass_method_returns_new_instance": "torch.compile (2.13) fails building a list subclass "
                                                         "from a generator (no attribute 'remaining_items')",
    "classes.list_subclass_to_torch_ops": "torch.compile (2.13) cannot pass a list subclass to torch.stack",
    "classes.list_subclass_inplace_add_keeps_class": "torch.compile (2.13) turns `b += [...]` on a list subclass "
                                                     "into a plain list",
    "classes.input_tensor_attribute_deleted": "torch.compile (2.13) cannot `del` an attribute it set on a tensor",
    "classes.inplace_result_attribute_is_the_inputs": "torch.compile (2.13) does not see an attribute set through "
                                                      "the result of an in-place op on the input (AttributeError)",
}


@pytest.mark.parametrize("case", [
    pytest.param(c, marks=pytest.mark.xfail(strict=True, reason=REFERENCE_BUGS[c.name]))
    if c.name in REFERENCE_BUGS else c for c in ALL_CASES], ids=CASE_IDS)
def test_reference_captures_whole(case):
    run_case(case, TORCH_REFERENCE)
