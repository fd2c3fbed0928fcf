"""xcompile: a low-overhead JIT compiler for PyTorch programs, in the shape of torch.compile."""
from . import config  # noqa: F401
from .api import (  # noqa: F401
    OptimizedModule,
    compile,
    disable,
    optimize,
    optimize_assert,
    reset,
    run,
)
from .api_tracing import (  # noqa: F401
    allow_in_graph,
    disallow_in_graph,
    error_on_graph_break,
    forbid_in_graph,
    graph_break,
    nonstrict_trace,
)
from .debug.explain import explain  # noqa: F401
from .backends.registry import list_backends, register_backend  # noqa: F401
from .log import set_logs  # noqa: F401

__version__ = "0.1.0"
