"""Shared fixtures for the runtime tests: every test leaves no callback, no hook, no cache."""
import pytest

import xcompile._C as C


@pytest.fixture(autouse=True)
def _clean_runtime():
    assert C.get_callback() is None, "a previous test leaked a callback"
    yield
    leaked = C.set_callback(None)
    C.cache_clear_all()
    assert leaked is None, "test left a compile callback set"
    assert not C.hook_installed()

