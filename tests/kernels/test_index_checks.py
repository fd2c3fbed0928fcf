"""Out-of-range indirect indices raise like eager (type, and a message naming the index), in
C++ and Triton (TRITON_INTERPRET=1) kernels; in-range negative indices keep wrapping."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import xcompile
from xcompile import config

from .util import BACKENDS, assert_close, compile_fn

# name -> (fn, make inputs(size along the indexed dim), bad indices, whether negatives wrap)
CASES = {
    "index": (lambda x, i: x[i] * 2, lambda n: (torch.randn(n, 3), torch.randint(0, n, (5,))), True),
    "index_2d": (lambda x, i: x[:, i] + 1, lambda n: (torch.randn(3, n), torch.randint(0, n, (2, 4))), True),
    "gather": (lambda x, i: torch.gather(x, 1, i) + 1,
               lambda n: (torch.randn(4, n), torch.randint(0, n, (4, 6))), False),
    "index_select": (lambda x, i: torch.index_select(x, 0, i) * 3,
                     lambda n: (torch.randn(n, 5), torch.randint(0, n, (7,))), False),
    "embedding": (lambda w, i: F.embedding(i, w) - 1, lambda n: (torch.randn(n, 8), torch.randint(0, n, (3, 4))),
                  False),
}


def _outcome(fn, *args):
    try:
        return fn(*args), None
    except (IndexError, RuntimeError) as e:
        return None, e


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_index_raises_like_eager(name, backend):
    fn, make, wraps = CASES[name]
    n = 6
    x, i = make(n)
    compiled = compile_fn(fn, [x, i], backend)
    x, i = make(n)                                  # fresh inputs, same shapes
    assert_close(compiled(x, i), [fn(x, i)], name)
    for bad in (n, n + 7, -n - 1, -1 if not wraps else -n - 3):
        for pos in (0, i.numel() - 1):
            j = i.clone()
            j.view(-1)[pos] = bad
            _, want = _outcome(fn, x, j)
            assert want is not None, f"eager accepts index {bad} for {name}"
            with pytest.raises(type(want)) as got:
                compiled(x, j)
            assert str(bad) in str(got.value), f"{name}: {got.value!r} does not name index {bad}"
            assert str(n) in str(got.value)


@pytest.mark.parametrize("backend", BACKENDS)
def test_negative_indices_in_range_wrap(backend):
    fn = CASES["index"][0]
    x, i = torch.randn(5, 3), torch.tensor([-1, -5, 0, 4, -3])
    compiled = compile_fn(fn, [x, i], backend)
    assert_close(compiled(x, i), [fn(x, i)])
    x2 = torch.randn(5, 3)
    assert_close(compiled(x2, i.flip(0)), [fn(x2, i.flip(0))])


@pytest.mark.parametrize("backend", BACKENDS)
def test_check_inside_reduction_and_computed_index(backend):
    """The index read inside a reduction loop (vector lanes), and an index computed in the kernel."""
    def fn(x, i):
        return torch.gather(x, 1, i + 1).sum(1), torch.gather(x, 1, i).amax(1)
    x, i = torch.randn(8, 40), torch.randint(0, 39, (8, 37))
    compiled = compile_fn(fn, [x, i], backend)
    assert_close(compiled(x, i), fn(x, i))
    j = i.clone()
    j[3, 20] = 39                                   # in range for the second, not for i + 1
    _, want = _outcome(fn, x, j)
    with pytest.raises(type(want), match="index 40 is out of bounds"):
        compiled(x, j)


@pytest.mark.parametrize("threads", [1, 2])
def test_parallel_kernel_finds_one_bad_index(threads):
    """Big enough for the OpenMP outer loop: the index ranges reduce across threads (and come
    back from the one call of the loop when OpenMP has one thread)."""
    w, i = torch.randn(100, 64), torch.randint(0, 100, (2048,))
    compiled = compile_fn(lambda w, i: F.embedding(i, w) * 2, [w, i], "cpp")
    assert "omp parallel" in compiled.kernels[0].source
    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        assert_close(compiled(w, i), [F.embedding(i, w) * 2])
        for pos in (0, 1000, 2047):
            j = i.clone()
            j[pos] = 100
            with pytest.raises(IndexError, match="index 100 is out"):
                compiled(w, j)
            j[pos] = -101
            with pytest.raises(IndexError, match="index -101 is out"):
                compiled(w, j)
    finally:
        torch.set_num_threads(old)


def test_frontend_inductor_raises_and_recovers():
    def f(x, i):
        return x[i] * 2
    cf = xcompile.compile(f, backend="inductor")
    x = torch.randn(4, 3)
    with torch.no_grad():
        i = torch.tensor([0, 3, -4])
        assert torch.equal(cf(x, i), f(x, i))
        with pytest.raises(IndexError, match="index 10 is out of bounds"):
            cf(x, torch.tensor([0, 10, 1]))
        i = torch.tensor([2, -1, 1])
        assert torch.equal(cf(x, i), f(x, i))


def test_checks_can_be_turned_off():
    """The benchmarking knob: no check code at all in the kernel."""
    old = config.kernel_index_checks
    config.kernel_index_checks = False
    try:
        compiled = compile_fn(lambda w, i: F.embedding(i, w), [torch.randn(10, 4), torch.tensor([1, 2])], "cpp")
    finally:
        config.kernel_index_checks = old
    assert "xc_hi" not in compiled.kernels[0].source and not compiled.kernels[0].checks
