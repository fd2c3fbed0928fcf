"""End-to-end guard, cache, nesting, exception, hook and API tests.

Scenarios that take the ``cc`` fixture also run on torch.compile with XCOMPILE_TEST_REFERENCE=1.
"""
