"""Known failures of the random-program search, by (backend, seed) -> reason.

Each one is a bug somebody is fixing elsewhere (the reason names it and the minimized
regression test in tests/programs/test_regressions.py).  tests/programs/test_programs.py skips
them in the default run and runs each as ``xfail(strict=True)``: when the bug is fixed the
test fails ("XPASS(strict)") and the entry here is removed.
"""

_VIEW_OUTPUT_WRITTEN = ("aot (lead): an intermediate written through a view comes out of the graph as a view "
                        "made inside the CompiledFunction; an in-place write after a break raises "
                        "(test_intermediate_written_through_view_then_in_place_after_break)")
_NO_GRAD_VIEW = ("aot (lead): a view of an input made under no_grad / set_grad_enabled(False) gets autograd "
                 "history in the compiled graph: gradients reach the leaf where eager's do not "
                 "(test_view_of_input_made_under_set_grad_enabled_false, "
                 "test_view_made_under_no_grad_crossing_a_break)")

KNOWN: dict = {
    ("aot_eager", 35): _VIEW_OUTPUT_WRITTEN,
    ("inductor", 35): _VIEW_OUTPUT_WRITTEN,
    ("aot_eager", 81): _NO_GRAD_VIEW,
    ("inductor", 81): _NO_GRAD_VIEW,
}
