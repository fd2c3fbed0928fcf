# Type stub for the C++ extension (csrc/, pybind11 and plain CPython types). Its names are
# typed as Any until each gets a signature here.
from typing import Any

NORMAL: int
SKIP: int
NO_NEW: int
SKIP_ALL: int

def __getattr__(name: str) -> Any: ...
