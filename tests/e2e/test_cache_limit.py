"""cache_size_limit: past it, one warning naming the function and the failing guard, results stay
correct (eager), nothing more is compiled, and entries compiled so far are still used."""
import warnings

import pytest
import torch

from .util import Calls


def scaled_by_len(x, tag):
    # ``tag`` is a string: it is always specialized (an int could become a dynamic size)
    return x * len(tag) + 1


def _s(n):
    return "s" * n


def _inputs(n):
    return lambda: ((torch.randn(3), _s(n)), {})


def test_counts_and_results_past_the_limit(cc):
    """Common to xcompile and torch.compile: exactly ``limit`` graphs, then eager, correct results."""
    cnt = cc.counter()
    with cc.cache_limit(2), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        calls = Calls(cc.compile(scaled_by_len, cnt, fullgraph=False), scaled_by_len, cnt)
        calls.check(_inputs(0), compiles=1, what="steps=0")
        calls.check(_inputs(1), compiles=2, what="steps=1")
        for steps in (2, 3, 4, 2):
            calls.check(_inputs(steps), compiles=2, what=f"steps={steps} past the limit")
        calls.check(_inputs(0), compiles=2, what="steps=0, cached entry")
        calls.check(_inputs(1), compiles=2, what="steps=1, cached entry")


def _limit_warnings(w):
    return [x for x in w if "cache_size_limit" in str(x.message)]


def test_one_warning_naming_function_and_guard(xc):
    cnt = xc.testing.CompileCounter()
    f = xc.compile(scaled_by_len, backend=cnt)
    with xc.config.patch(cache_size_limit=2), warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for steps in range(6):
            x = torch.randn(3)
            torch.testing.assert_close(f(x, _s(steps)), scaled_by_len(x, _s(steps)))
    assert cnt.frame_count == 2
    hits = _limit_warnings(w)
    assert len(hits) == 1, [str(x.message) for x in w]
    msg = str(hits[0].message)
    assert "scaled_by_len" in msg, msg
    assert "tag" in msg, f"the warning should name the failing guard (on `tag`): {msg}"


def test_limit_is_per_code_object(xc):
    cnt = xc.testing.CompileCounter()

    def other(x, tag):
        return x - len(tag)

    f = xc.compile(scaled_by_len, backend=cnt)
    g = xc.compile(other, backend=cnt)
    with xc.config.patch(cache_size_limit=1), warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for steps in range(3):
            f(torch.randn(3), _s(steps))
        assert cnt.frame_count == 1
        x = torch.randn(3)
        torch.testing.assert_close(g(x, "abc"), other(x, "abc"))
        assert cnt.frame_count == 2, "another function still compiles"
    assert len(_limit_warnings(w)) == 1


def test_fail_on_cache_limit_hit(xc):
    cnt = xc.testing.CompileCounter()
    f = xc.compile(scaled_by_len, backend=cnt)
    with xc.config.patch(cache_size_limit=1, fail_on_cache_limit_hit=True):
        f(torch.randn(3), _s(0))
        with pytest.raises(xc.exc.CacheLimitExceeded, match="scaled_by_len"):
            f(torch.randn(3), _s(1))


def test_reset_forgets_entries_and_the_limit(xc):
    cnt = xc.testing.CompileCounter()
    f = xc.compile(scaled_by_len, backend=cnt)
    with xc.config.patch(cache_size_limit=1), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f(torch.randn(3), _s(0))
        f(torch.randn(3), _s(1))
        assert cnt.frame_count == 1
        xc.reset()
        x = torch.randn(3)
        torch.testing.assert_close(f(x, _s(1)), scaled_by_len(x, _s(1)))
        assert cnt.frame_count == 2, "after reset() the function compiles again"
        f(torch.randn(3), _s(1))
        assert cnt.frame_count == 2


def test_default_limit_is_eight(xc):
    assert xc.config.cache_size_limit == 8
    cnt = xc.testing.CompileCounter()
    f = xc.compile(scaled_by_len, backend=cnt)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for steps in range(12):
            x = torch.randn(3)
            torch.testing.assert_close(f(x, _s(steps)), scaled_by_len(x, _s(steps)))
    assert cnt.frame_count == 8
    assert len(_limit_warnings(w)) == 1
