"""Lists that outlive the call and are only appended to / extended / cleared: no recompile on
the next call (their length is not guarded), and the real list holds eager's items after each call."""
import types

from torch import nn

from .harness import CaseTable, rn

T = CaseTable("append_only")


def _fresh(fn, **overrides):
    g = dict(fn.__globals__)
    g.update(overrides)
    return types.FunctionType(fn.__code__, g, fn.__name__, fn.__defaults__, fn.__closure__)


LOSSES: list = []


def _log_losses(a):
    y = a.tanh()
    LOSSES.append(y.sum())
    LOSSES.extend([y.max(), y.min()])
    return y * 2


T.build("append_extend_global_list", lambda: _fresh(_log_losses, LOSSES=[]), rn(3, 4),
        state=lambda f: list(f.__globals__["LOSSES"]))


def _keep_last(a):
    LOSSES.clear()
    LOSSES.append(a.relu())
    return a - 1


T.build("clear_then_append_global_list", lambda: _fresh(_keep_last, LOSSES=[]), rn(5),
        state=lambda f: list(f.__globals__["LOSSES"]))


class _Recorder(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 3)
        self.seen = []

    def forward(self, x):
        y = self.proj(x)
        self.seen.append(y.detach().norm())
        return y.sigmoid()


T.build("module_list_attribute_append", _Recorder, rn(2, 4), state=lambda m: list(m.seen))


def _closure_log():
    log = []

    def step(a):
        log.append(a.cumsum(0))
        return a.exp()
    step.log = log
    return step


T.build("closure_list_append", _closure_log, rn(6), state=lambda f: list(f.log))
