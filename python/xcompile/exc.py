"""The exceptions users see."""
from __future__ import annotations

from .frontend.exc import TorchRuntimeError, Unsupported  # noqa: F401  (re-exported)


class BackendCompilerFailed(RuntimeError):
    """A backend raised, or returned something that is not callable, while compiling a graph."""

    def __init__(self, backend_name: str, inner: BaseException | str, code=None):
        where = f" while compiling {code.co_name} ({code.co_filename}:{code.co_firstlineno})" if code else ""
        cause = inner if isinstance(inner, str) else f"{type(inner).__name__}: {inner}"
        super().__init__(f"backend={backend_name!r} raised{where}:\n{cause}\n\n"
                         "Hint: set xcompile.config.suppress_errors = True to fall back to eager instead.")
        self.backend_name = backend_name
        self.inner = inner


class CacheLimitExceeded(RuntimeError):
    """Raised instead of a warning when config.fail_on_cache_limit_hit is set."""


class RecompileError(RuntimeError):
    """A compile was needed while ``set_stance("fail_on_recompile")`` was in force."""
