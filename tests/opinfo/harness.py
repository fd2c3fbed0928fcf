"""Run torch's OpInfo database (``op_db``) through xcompile and compare each sample with eager.

One sample is compiled alone (``xcompile.reset()`` first) as ``lambda *a, **k: op(*a, **k)``:
its outputs (values, dtypes, shapes, significant strides, which inputs they share memory with),
the in-place variant's result and the input it writes, and with ``grad`` the gradients (values,
dtypes, shapes) of a weighted sum of the float outputs w.r.t. every float input that requires
grad. A sample eager rejects is skipped. What ran without a kernel is counted, not hidden: graphs
the backend ran eagerly ("whole graph eager" in the ``fallbacks`` log), frames that gave no graph
at all, graph breaks.
"""
from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import time
import warnings
from typing import Any, Callable, Iterator

import torch
from torch.utils._pytree import tree_flatten, tree_map

import xcompile
from xcompile import log as xlog

from .known import FALLBACK, GRAD_TOL, OTHERS, RANDOM, STRIDES

BACKENDS = ("eager", "aot_eager", "inductor", "inductor-dynamic")
DTYPES = {"float32": torch.float32, "float64": torch.float64, "int64": torch.int64, "bool": torch.bool}

# (rtol, atol); forward: assert_close's defaults, gradients: a little looser (the backward of a
# fused kernel sums in another order than eager's)
_FWD_TOL = {torch.float32: (1.3e-6, 1e-5), torch.float64: (1e-7, 1e-7)}
_GRAD_TOL = {torch.float32: (1e-5, 1e-5), torch.float64: (1e-7, 1e-7)}


def op_db() -> list:
    """The OpInfo database (imports torch.testing._internal: a few seconds, needs expecttest)."""
    from torch.testing._internal.common_methods_invocations import op_db as db
    return db


def full_name(op) -> str:
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


@dataclasses.dataclass
class Outcome:
    """What one op did on one backend and dtype."""

    name: str
    samples: int = 0                 # samples compared
    skipped: int = 0                 # samples eager rejected
    failures: list[str] = dataclasses.field(default_factory=list)
    fallbacks: list[str] = dataclasses.field(default_factory=list)   # "whole graph eager: ..." lines
    no_graph: int = 0                # samples whose frame gave no graph (ran eagerly)
    breaks: int = 0                  # graph breaks
    seconds: float = 0.0
    note: str = ""                   # why the op was not run at all

    @property
    def ok(self) -> bool:
        return not self.failures and not self.note


class _Catch(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@contextlib.contextmanager
def catching_fallbacks() -> Iterator[_Catch]:
    """The ``fallbacks`` log on, to a list instead of stderr."""
    was = xlog.enabled("fallbacks")
    logger = logging.getLogger("xcompile.fallbacks")
    catch, propagate = _Catch(), logger.propagate
    xlog.set_logs(fallbacks=True)
    logger.addHandler(catch)
    logger.propagate = False
    try:
        yield catch
    finally:
        logger.removeHandler(catch)
        logger.propagate = propagate
        xlog.set_logs(fallbacks=was)


def _breaks() -> int:
    return sum(xcompile.counters["graph_break"].values())


def _graphs() -> int:
    return xcompile.counters["stats"]["unique_graphs"]


# -- comparing ---------------------------------------------------------------------------------------------------

def _significant_strides(t: torch.Tensor) -> tuple:
    if t.numel() <= 1 or t.layout != torch.strided:
        return ()
    return tuple(s for n, s in zip(t.shape, t.stride()) if n != 1)


def compare(ref: Any, out: Any, *, structure_only: bool, tol: dict | None = None, where: str = "out",
            strides: bool = True) -> list[str]:
    """The differences between eager's ``ref`` and the compiled ``out`` (empty: they agree);
    ``tol``: (rtol, atol) per dtype (float32/float64; other dtypes: assert_close's defaults);
    ``strides``: compare the significant strides too (not for gradients: autograd's layout of a
    gradient is not part of what the op promises, and torch.compile does not keep it either)."""
    if isinstance(ref, torch.Tensor):
        if not isinstance(out, torch.Tensor):
            return [f"{where}: a {type(out).__name__}, eager gives a tensor"]
        if (ref.shape, ref.dtype) != (out.shape, out.dtype):
            return [f"{where}: {tuple(out.shape)} {out.dtype}, eager {tuple(ref.shape)} {ref.dtype}"]
        if structure_only:
            return []
        problems = []
        if strides and _significant_strides(ref) != _significant_strides(out):
            problems.append(f"{where}: strides {out.stride()}, eager {ref.stride()}")
        r, o = ref.detach().resolve_conj().resolve_neg(), out.detach().resolve_conj().resolve_neg()
        if r.layout != torch.strided:
            r, o = r.to_dense(), o.to_dense()
        rtol, atol = (tol or _FWD_TOL).get(ref.dtype, (None, None))
        try:
            torch.testing.assert_close(o, r, rtol=rtol, atol=atol, equal_nan=True, check_stride=False)
        except AssertionError as e:
            lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
            problems.append(f"{where}: values differ ({'; '.join(lines[:3])})")
        return problems
    if isinstance(ref, (list, tuple)):
        if not isinstance(out, (list, tuple)) or len(out) != len(ref):
            return [f"{where}: {type(out).__name__} of {len(out) if hasattr(out, '__len__') else '?'}, "
                    f"eager {type(ref).__name__} of {len(ref)}"]
        return [p for i, (r, o) in enumerate(zip(ref, out))
                for p in compare(r, o, structure_only=structure_only, tol=tol, where=f"{where}[{i}]", strides=strides)]
    if isinstance(ref, float) and isinstance(out, float) and math.isnan(ref) and math.isnan(out):
        return []
    if structure_only and type(ref) is type(out):
        return []
    return [] if ref == out else [f"{where}: {out!r}, eager {ref!r}"]


# -- running -----------------------------------------------------------------------------------------------------

def _fresh(sample, requires_grad: bool) -> tuple[list, dict]:
    """The sample's arguments with new leaf tensors (a clone keeps their strides)."""
    def leaf(t):
        if not isinstance(t, torch.Tensor):
            return t
        c = t.detach().clone()
        return c.requires_grad_(requires_grad and t.requires_grad and (c.is_floating_point() or c.is_complex()))
    return tree_map(leaf, [sample.input, *sample.args]), tree_map(leaf, dict(sample.kwargs))


def _grad_leaves(args: list, kwargs: dict) -> list[torch.Tensor]:
    return [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor) and t.requires_grad]


def _grads(out: Any, leaves: list[torch.Tensor], seed: int) -> list | None:
    """Gradients of sum(w_i * out_i) over the outputs that require grad (None: no such output)."""
    outs = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor) and t.requires_grad]
    if not outs or not leaves:
        return None
    gen = torch.Generator().manual_seed(seed)
    total = 0
    for t in outs:
        w = torch.randn(t.shape, generator=gen, dtype=torch.float64).to(t.dtype)
        total = total + ((t * w).real if t.is_complex() else t * w).sum()
    gs = torch.autograd.grad(total, leaves, allow_unused=True)
    return [torch.zeros_like(x) if g is None else g for g, x in zip(gs, leaves)]


def _storages(out: Any, args: list, kwargs: dict) -> list:
    """For each output tensor, the position of the input whose memory it shares (None: its own)."""
    ptrs = [t.untyped_storage().data_ptr() if isinstance(t, torch.Tensor) and t.layout == torch.strided
            and t.untyped_storage().nbytes() else None for t in tree_flatten((args, kwargs))[0]]
    found = []
    for t in tree_flatten(out)[0]:
        if isinstance(t, torch.Tensor) and t.layout == torch.strided and t.untyped_storage().nbytes():
            p = t.untyped_storage().data_ptr()
            found.append(ptrs.index(p) if p in ptrs else None)
    return found


def _first_line(e: Exception) -> str:
    text = str(e)
    return f"{type(e).__name__}: {text.splitlines()[0][:200] if text else ''}"


def compile_on(fn: Callable, backend: str) -> Callable:
    """``fn`` compiled on one of BACKENDS' names (``inductor-dynamic``: inductor, ``dynamic=True``)."""
    if backend == "inductor-dynamic":
        return xcompile.compile(fn, backend="inductor", dynamic=True)
    return xcompile.compile(fn, backend=backend)


def _compiled(fn: Callable, backend: str) -> Callable:
    return compile_on(lambda *a, **k: fn(*a, **k), backend)


class _Sample:
    """One compiled call against eager, counting what ran without a kernel."""

    def __init__(self, outcome: Outcome, catch: _Catch) -> None:
        self.outcome, self.catch = outcome, catch

    def run(self, fn: Callable, backend: str, args: list, kwargs: dict, seed: int) -> Any:
        xcompile.reset()
        graphs, breaks, seen = _graphs(), _breaks(), len(self.catch.lines)
        torch.manual_seed(seed)
        out = _compiled(fn, backend)(*args, **kwargs)
        if _graphs() == graphs:
            self.outcome.no_graph += 1
        self.outcome.breaks += _breaks() - breaks
        self.outcome.fallbacks += [ln for ln in self.catch.lines[seen:] if "whole graph eager" in ln
                                   or "running the graph eagerly" in ln]
        return out


def _eager(fn: Callable, args: list, kwargs: dict, seed: int) -> Any:
    torch.manual_seed(seed)
    return fn(*args, **kwargs)


def run_op(op, backend: str, dtype: torch.dtype, *, grad: bool = False, inplace: bool = True,
           max_samples: int | None = None, max_seconds: float | None = None) -> Outcome:
    """Every sample of ``op`` (up to ``max_samples``, or until ``max_seconds``) in ``dtype``."""
    name = full_name(op)
    outcome = Outcome(name)
    if name in OTHERS:
        outcome.note = OTHERS[name]
        return outcome
    supported = op.supported_backward_dtypes("cpu") if grad else op.supported_dtypes("cpu")
    if dtype not in supported or (grad and not op.supports_autograd):
        outcome.note = "dtype not supported"
        return outcome
    structure_only = name in RANDOM
    start = time.perf_counter()
    requires_grad = grad and (dtype.is_floating_point or dtype.is_complex)
    with warnings.catch_warnings(), catching_fallbacks() as catch:
        warnings.simplefilter("ignore")
        sample_run = _Sample(outcome, catch)
        samples = op.sample_inputs("cpu", dtype, requires_grad=requires_grad)
        for i, sample in enumerate(samples):
            if max_samples is not None and i >= max_samples:
                break
            if max_seconds is not None and time.perf_counter() - start > max_seconds:
                break
            _one_sample(op, backend, sample, i, outcome, sample_run, structure_only,
                        requires_grad=requires_grad, inplace=inplace and not grad)
    xcompile.reset()
    if name in FALLBACK and not outcome.fallbacks:
        outcome.failures.append(f"listed as a fallback ({FALLBACK[name]}) but compiled")
    outcome.seconds = time.perf_counter() - start
    return outcome


def _one_sample(op, backend, sample, i, outcome, sample_run, structure_only, *, requires_grad, inplace):
    fn = op.op
    args, kwargs = _fresh(sample, requires_grad)
    try:
        ref = _eager(fn, args, kwargs, seed=i)
        ref_shares = _storages(ref, args, kwargs)
        ref_grads = _grads(ref, _grad_leaves(args, kwargs), seed=i) if requires_grad else None
    except Exception:  # noqa: BLE001 (eager rejects the sample: nothing to compare)
        outcome.skipped += 1
        return
    outcome.samples += 1
    args, kwargs = _fresh(sample, requires_grad)
    try:
        out = sample_run.run(fn, backend, args, kwargs, seed=i)
    except Exception as e:  # noqa: BLE001
        outcome.failures.append(f"sample {i}: raises {_first_line(e)}")
        return
    problems = compare(ref, out, structure_only=structure_only, strides=outcome.name not in STRIDES)
    shares = _storages(out, args, kwargs)
    if shares != ref_shares:
        problems.append(f"outputs share memory with inputs {shares}, eager's with {ref_shares}")
    if requires_grad and not problems and not structure_only:
        try:
            grads = _grads(out, _grad_leaves(args, kwargs), seed=i)
        except Exception as e:  # noqa: BLE001
            problems.append(f"backward raises {_first_line(e)}")
        else:
            if (ref_grads is None) != (grads is None):
                problems.append(f"grad: {grads is None=}, eager {ref_grads is None=}")
            elif ref_grads is not None:
                tol = dict(_GRAD_TOL)
                if outcome.name in GRAD_TOL:
                    tol[torch.float32] = GRAD_TOL[outcome.name]
                problems += compare(ref_grads, grads, structure_only=False, tol=tol, where="grad", strides=False)
    if inplace and op.inplace_variant is not None and not problems:
        problems += _inplace(op, backend, sample, i, sample_run, structure_only)
    outcome.failures += [f"sample {i}: {p}" for p in problems]


def _inplace(op, backend, sample, i, sample_run, structure_only) -> list[str]:
    fn = op.inplace_variant
    args, kwargs = _fresh(sample, False)
    try:
        ref = _eager(fn, args, kwargs, seed=i)
    except Exception:  # noqa: BLE001 (eager rejects it, e.g. a result dtype the input cannot hold)
        return []
    ref_input = args[0]
    args, kwargs = _fresh(sample, False)
    try:
        out = sample_run.run(fn, backend, args, kwargs, seed=i)
    except Exception as e:  # noqa: BLE001
        return [f"in-place raises {_first_line(e)}"]
    problems = compare(ref_input, args[0], structure_only=structure_only, where="in-place input")
    if isinstance(out, torch.Tensor) and out is not args[0] and isinstance(ref, torch.Tensor) and ref is ref_input:
        problems.append("in-place: the result is not the input")
    return problems


def select(db: list, names: list[str] | None) -> list:
    """The ops named (``op`` matches every variant of ``op``, ``op.variant`` one of them)."""
    if not names:
        return list(db)
    wanted = set(names)
    return [op for op in db if op.name in wanted or full_name(op) in wanted]
