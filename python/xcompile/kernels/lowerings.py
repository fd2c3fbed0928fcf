"""The whole lowering table: every rows module, imported here and nowhere else for its rows.

``LOWERINGS[op]`` is the row for an ATen op (see ``lowering_base.py``); an op without one runs as
an extern ATen kernel.
"""
from __future__ import annotations

from . import lowering, lowering_conv, lowering_reductions, lowering_views
from .lowering_base import LOWERINGS

ROW_MODULES = (lowering, lowering_conv, lowering_reductions, lowering_views)   # each registers its rows

__all__ = ["LOWERINGS", "ROW_MODULES"]
