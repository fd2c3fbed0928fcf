"""xcompile: a low-overhead JIT compiler for PyTorch programs, in the shape of torch.compile."""
# ruff: noqa: E402
from ._torch_check import check as _check_torch

_check_torch()      # before _C loads: a torch outside the range gets an ImportError that says what to do

from . import _C, _torch_compat

_torch_compat.init_c_abi(_C)   # where this torch keeps what _C reads, checked (csrc/torch_compat.h)

# True while xcompile (or torch.compile) traces the calling code, False when it runs eagerly.
from torch.compiler import is_compiling  # noqa: F401

from . import (
    config,  # noqa: F401
    utils,  # noqa: F401
)
from .api import (  # noqa: F401
    OptimizedModule,
    compile,
    disable,
    optimize,
    optimize_assert,
    reset,
    run,
)
from .api_cache import load_cache_artifacts, save_cache_artifacts  # noqa: F401
from .api_export import ExportError, ExportResult, export  # noqa: F401
from .api_numpy import wrap_numpy  # noqa: F401
from .api_shapes import mark_dynamic, mark_static, mark_static_address, maybe_mark_dynamic  # noqa: F401
from .api_tracing import (  # noqa: F401
    allow_in_graph,
    assume_constant_result,
    disallow_in_graph,
    error_on_graph_break,
    forbid_in_graph,
    graph_break,
    nonstrict_trace,
)
from .backends.registry import (  # noqa: F401
    list_backends,
    lookup_backend,
    register_backend,
)
from .debug.explain import explain  # noqa: F401
from .log import set_logs  # noqa: F401
from .stance import set_stance  # noqa: F401
from .stats import counters  # noqa: F401

__version__ = "0.1.0"
