"""Program-level conformance suite (see harness.py).

    pytest tests/conformance                                    # xcompile on every program
    XCOMPILE_TEST_REFERENCE=1 pytest tests/conformance/test_reference.py   # validate the table
"""
