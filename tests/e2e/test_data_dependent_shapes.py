"""Data-dependent output shapes (issue #11): ``config.capture_dynamic_output_shape_ops`` makes
``nonzero``, ``masked_select``, ``x[mask]`` and ``unique`` graph ops whose result sizes are
unbacked symbols (u0, ...), and ``config.capture_scalar_outputs`` lets an ``item()`` value size a
tensor. Every program runs compiled and eagerly on fresh inputs (values, dtypes, masks whose
counts change, empty results), and its graph count is compared with torch.compile's on the same
calls, with the same knobs on both sides."""
import contextlib
import warnings

import pytest
import torch
import torch._dynamo
from torch._dynamo.testing import CompileCounter as TorchCounter
from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

import xcompile
from xcompile.testing import CompileCounter, CompileCounterWithBackend, captured_logs

BACKENDS = ["eager", "aot_eager", "inductor"]


pytestmark = pytest.mark.usefixtures("fresh_compilers")


@contextlib.contextmanager
def _knobs(**kw):
    """The same knobs for xcompile and for torch.compile (the reference)."""
    with xcompile.config.patch(**kw), torch._dynamo.config.patch(**kw):
        yield


def _same(got, want) -> bool:
    if isinstance(want, (tuple, list)):
        return type(got) is type(want) and len(got) == len(want) and all(map(_same, got, want))
    if isinstance(want, torch.Tensor):
        return isinstance(got, torch.Tensor) and got.shape == want.shape and got.dtype == want.dtype \
            and torch.allclose(got, want, equal_nan=True)
    return type(got) is type(want) and got == want


class _TorchCounter(TorchCounter):
    """torch's CompileCounter, keeping the graphs."""

    def __init__(self):
        super().__init__()
        self.graphs: list[torch.fx.GraphModule] = []

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        return super().__call__(gm, example_inputs)


def _graphs_with_ops(graphs) -> int:
    return sum(1 for g in graphs if any(n.op.startswith("call_") for n in g.graph.nodes))


def _run(fn, calls, backend="eager", **kw):
    """Run ``fn`` compiled by xcompile and by torch.compile on each argument tuple of ``calls``;
    xcompile's results must equal eager's. Returns (our counter, torch's counter)."""
    cnt = CompileCounter() if backend == "eager" else CompileCounterWithBackend(backend)
    tcnt = _TorchCounter()
    xf = xcompile.compile(fn, backend=cnt, **kw)
    tf = torch.compile(fn, backend=tcnt, **kw)
    for args in calls:
        want = fn(*args)
        got = xf(*args)
        assert _same(got, want), (fn.__name__, got, want)
        assert _same(tf(*args), want)
    return cnt, tcnt


# -- programs: (x, m) -> ..., x a float tensor, m a bool mask of x's shape ---------------------------
def nonzero_fn(x, m):
    return torch.nonzero(m) + 1


def nonzero_method(x, m):
    return m.nonzero().squeeze(1) * 2


def masked_select(x, m):
    return torch.masked_select(x, m) * 3


def mask_index_sum(x, m):
    return x[m].sum() * 2


def mask_index_rows(x, m):
    y = x[m]
    return y * y.shape[0] - 1


def unique(x, m):
    return torch.unique((x * 2).round()) + 1


def nonzero_count(x, m):
    return m.nonzero().shape[0] + 1          # an int computed in the graph


def gather_by_nonzero(x, m):
    idx = m.nonzero().squeeze(1)
    return x[idx] * 2, idx.shape[0]


PROGRAMS = [nonzero_fn, nonzero_method, masked_select, mask_index_sum, mask_index_rows, unique,
            nonzero_count, gather_by_nonzero]
# the ops torch breaks at with the knob off, and so do we
BREAKING = [nonzero_fn, nonzero_method, masked_select, mask_index_sum, unique]

_COUNTS = [3, 5, 0, 8, 1, 4]                 # how many of 8 elements each call's mask keeps


def _mask(k: int, n: int = 8) -> torch.Tensor:
    m = torch.zeros(n, dtype=torch.bool)
    m[torch.randperm(n)[:k]] = True
    return m


def _calls(dtype=torch.float32, counts=_COUNTS, n=8):
    return [(torch.randn(n, dtype=dtype), _mask(k, n)) for k in counts]


# -- the knob off: a graph break, eager's answer ---------------------------------------------------
@pytest.mark.parametrize("fn", PROGRAMS, ids=lambda f: f.__name__)
def test_knob_off_breaks_with_eagers_answer(fn):
    with _knobs(capture_dynamic_output_shape_ops=False):
        cnt, tcnt = _run(fn, _calls())
    # torch's count includes an empty graph it makes before a break at the first op
    assert _graphs_with_ops(cnt.graphs) == _graphs_with_ops(tcnt.graphs)
    assert not any(free_unbacked_symbols(n.meta.get("example_value")) for g in cnt.graphs
                   for n in g.graph.nodes if isinstance(n.meta.get("example_value"), torch.Tensor))


@pytest.mark.parametrize("fn", BREAKING, ids=lambda f: f.__name__)
def test_knob_off_break_names_the_knob(fn):
    with _knobs(capture_dynamic_output_shape_ops=False):
        e = xcompile.explain(fn)(*_calls()[0])
        assert e.graph_break_count == 1
        assert "capture_dynamic_output_shape_ops" in str(e.break_reasons[0].hint)
        with pytest.raises(xcompile.exc.Unsupported, match="data-dependent operator"):
            xcompile.compile(fn, backend="eager", fullgraph=True)(*_calls()[0])


# -- the knob on: one graph for every mask --------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", PROGRAMS, ids=lambda f: f.__name__)
def test_knob_on_one_graph_for_every_count(fn, backend):
    """Counts change from call to call (none, one, all included): no recompile, as torch."""
    with _knobs(capture_dynamic_output_shape_ops=True):
        cnt, tcnt = _run(fn, _calls() + _calls(torch.float64, [2, 7]), backend, fullgraph=True)
    assert cnt.frame_count == tcnt.frame_count <= 2          # one per dtype of x (where x is used)
    g = cnt.graphs[0]
    assert any(free_unbacked_symbols(n.meta["example_value"]) for n in g.graph.nodes
               if isinstance(n.meta.get("example_value"), (torch.Tensor, torch.SymInt)))


@pytest.mark.parametrize("backend", BACKENDS)
def test_empty_results(backend):
    """A mask with nothing set (u0 == 0 at run time), on the first call and later ones."""
    def f(x, m):
        y = x[m]
        return y.sum() + y.numel(), m.nonzero() * 2, torch.masked_select(x, m).mean()

    with _knobs(capture_dynamic_output_shape_ops=True):
        cnt, tcnt = _run(f, _calls(counts=[0, 0, 3, 0]), backend)
    assert cnt.frame_count == tcnt.frame_count == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_changing_input_sizes(backend):
    """Symbolic input sizes (automatic dynamic) and unbacked sizes in one graph: guards on the
    input sizes only."""
    calls = [(torch.randn(n), _mask(k, n)) for n, k in [(8, 3), (11, 0), (5, 5), (20, 7), (9, 1)]]
    with _knobs(capture_dynamic_output_shape_ops=True):
        cnt, tcnt = _run(gather_by_nonzero, calls, backend)
    assert cnt.frame_count == tcnt.frame_count == 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_unique_and_nonzero_variants(backend):
    def f(x, m):
        vals, inverse, counts = torch.unique(m.int() + (x > 0).int(), return_inverse=True, return_counts=True)
        rows, cols = torch.nonzero(m.view(2, 4), as_tuple=True)
        return vals * 2, inverse, counts, rows + cols

    with _knobs(capture_dynamic_output_shape_ops=True):
        cnt, tcnt = _run(f, _calls(), backend)
    assert cnt.frame_count == tcnt.frame_count == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_mask_assignment(backend):
    def f(x, m):
        x = x.clone()
        x[m] = 0.5
        return x * 2, x[m].shape[0]

    with _knobs(capture_dynamic_output_shape_ops=True):
        cnt, tcnt = _run(f, _calls(), backend)
    assert cnt.frame_count == tcnt.frame_count == 1


def test_branching_on_a_data_dependent_size_breaks():
    def f(x, m):
        if m.nonzero().shape[0] > 2:
            return x + 1
        return x - 1

    with _knobs(capture_dynamic_output_shape_ops=True):
        cnt, tcnt = _run(f, _calls())
        assert cnt.frame_count == tcnt.frame_count
        with pytest.raises(xcompile.exc.Unsupported):
            xcompile.compile(f, backend="eager", fullgraph=True)(*_calls()[0])


def test_iterating_over_a_data_dependent_size_breaks():
    def f(x, m):
        return [row * 2 for row in m.nonzero()]

    with _knobs(capture_dynamic_output_shape_ops=True):
        cnt, _ = _run(f, _calls())
    assert cnt.frame_count == 1                  # nonzero in the graph, the loop after the break


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_training_through_a_mask(backend):
    def f(x, w, m):
        y = x[m] * w
        return (y * y).sum() + torch.masked_select(w.expand_as(x), m[:, None]).sum()

    with _knobs(capture_dynamic_output_shape_ops=True):
        cnt = CompileCounter() if backend == "eager" else CompileCounterWithBackend(backend)
        cf = xcompile.compile(f, backend=cnt)
        for k in [3, 0, 8, 5]:
            x, m = torch.randn(8, 3), _mask(k)
            w = torch.randn(3, requires_grad=True)
            x1, w1 = x.clone().requires_grad_(True), w.detach().clone().requires_grad_(True)
            x2, w2 = x.clone().requires_grad_(True), w.detach().clone().requires_grad_(True)
            got, want = cf(x1, w1, m), f(x2, w2, m)
            assert torch.allclose(got, want)
            got.backward()
            want.backward()
            assert torch.allclose(x1.grad, x2.grad) and torch.allclose(w1.grad, w2.grad)
        assert cnt.frame_count == 1


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_backends_run_such_graphs_as_they_are(backend):
    with _knobs(capture_dynamic_output_shape_ops=True), captured_logs("fallbacks") as messages:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            _run(mask_index_sum, _calls(), backend)
    assert any("data-dependent" in m for m in messages)


# -- item() sizing a tensor (capture_scalar_outputs) -------------------------------------------------
def zeros_of_item(x, m):
    n = m.sum().item()
    return torch.zeros(n) + x.sum()


def slice_by_item(x, m):
    n = m.sum().item()
    return x[:n] * 2, x[n:].sum()


def arange_of_item(x, m):
    n = m.int().sum().item()
    return torch.arange(n) * 2 + 1


def checked_item(x, m):
    n = m.sum().item()
    torch._check(n >= 0)
    return torch.ones(n, 2) * x.mean()


ITEM_SIZED = [zeros_of_item, slice_by_item, arange_of_item, checked_item]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", ITEM_SIZED, ids=lambda f: f.__name__)
def test_item_sizes_a_tensor(fn, backend):
    with _knobs(capture_scalar_outputs=True):
        cnt, tcnt = _run(fn, _calls(), backend, fullgraph=True)
    assert cnt.frame_count == tcnt.frame_count == 1


def test_item_sized_tensor_with_a_negative_size_raises_like_eager():
    def f(x):
        return torch.zeros(x.sum().item()) + 1

    x = torch.tensor([-3, 1])
    with pytest.raises(RuntimeError) as eager:
        f(x)
    with _knobs(capture_scalar_outputs=True):
        cf = xcompile.compile(f, backend="eager")
        assert _same(cf(torch.tensor([2, 1])), f(torch.tensor([2, 1])))
        with pytest.raises(RuntimeError) as ours:
            cf(x)
    assert str(ours.value) == str(eager.value)


def test_both_knobs_nonzero_count_sizes_a_tensor():
    def f(x, m):
        n = m.nonzero().shape[0]
        k = (x > 0).sum().item()
        return torch.ones(n) * k, x[:k] + n

    with _knobs(capture_dynamic_output_shape_ops=True, capture_scalar_outputs=True):
        cnt, tcnt = _run(f, _calls())
    assert cnt.frame_count == tcnt.frame_count == 1
