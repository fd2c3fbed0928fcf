"""Capturing xcompile's log artifacts in a test."""
from __future__ import annotations

import contextlib
import logging

import xcompile
from xcompile import log


class _ListHandler(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record):
        self.messages.append(record.getMessage())


@contextlib.contextmanager
def captured_logs(*artifacts: str):
    """Yields the list of messages logged under ``artifacts`` inside the block."""
    handler = _ListHandler()
    was_on = {a: log.enabled(a) for a in artifacts}
    xcompile.set_logs(**{a: True for a in artifacts})
    loggers = [logging.getLogger(f"xcompile.{a}") for a in artifacts]
    for lg in loggers:
        lg.addHandler(handler)
    try:
        yield handler.messages
    finally:
        for lg in loggers:
            lg.removeHandler(handler)
        xcompile.set_logs(**was_on)


def graph_break_logs(messages: list[str]) -> list[str]:
    return [m for m in messages if m.startswith("Graph break")]
