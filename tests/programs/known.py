"""Known failures of the random-program search, by (backend, seed) -> reason.

Each one is a bug somebody is fixing elsewhere (the reason names it and the minimized
regression test in tests/programs/test_regressions.py).  tests/programs/test_programs.py skips
them in the default run and runs each as ``xfail(strict=True)``: when the bug is fixed the
test fails ("XPASS(strict)") and the entry here is removed.
"""

KNOWN: dict = {
}
