"""Capturing xcompile's log artifacts in a test (the helpers live in xcompile.testing)."""
from xcompile.testing import captured_logs, graph_break_logs  # noqa: F401
