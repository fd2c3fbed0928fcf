"""Make ``xcompile.frontend`` importable for these tests even before the C++ extension is built.

The frontend does not need ``xcompile._C``; when the package's ``__init__`` cannot import it
(a checkout without ``make build``), load the package shell only, so the frontend tests still run.
"""
import importlib
import os
import sys
import types

_PY = os.path.join(os.path.dirname(__file__), "..", "..", "python")

try:
    importlib.import_module("xcompile")
except ImportError:
    sys.modules.pop("xcompile", None)
    pkg = types.ModuleType("xcompile")
    pkg.__path__ = [os.path.abspath(os.path.join(_PY, "xcompile"))]
    sys.modules["xcompile"] = pkg
