"""Imports every module that fills the value hub (``frontend/hub.py``), so that a capture finds
all operations registered. The capture driver (``graph_break.py``) imports this module."""
from __future__ import annotations

from . import (  # noqa: F401  (each registers its operations in the hub)
    attrs,
    builtins_more,
    builtins_rules,
    calls,
    container_methods,
    contexts,
    exceptions,
    frame_hooks,
    func_transforms,
    generators,
    grad_contexts,
    introspection,
    iteration,
    modules,
    new_modules,
    numpy_tracing,
    optim_ops,
    pyops,
    scalars,
    seq_subclass_inputs,
    seq_subclasses,
    stdlib_deque,
    stdlib_iterators,
    stdlib_misc,
    tensor_subclasses,
    user_objects,
)
