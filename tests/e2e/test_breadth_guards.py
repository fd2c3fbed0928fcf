"""Dict inputs are guarded by their keys (in order), not only their length; namedtuple and
structseq results come back with their own class."""
import collections

import torch

import xcompile
from xcompile.testing import CompileCounter

from .util import same


def _weighted(d):
    return sum(v * i for i, v in enumerate(d.values())), list(d)


def test_same_length_dict_with_other_keys_recompiles():
    cnt = CompileCounter()
    f = xcompile.compile(_weighted, backend=cnt, fullgraph=True)
    a, b = torch.randn(3), torch.randn(3)
    same(f({"a": a, "b": b}), _weighted({"a": a, "b": b}))
    same(f({"a": b, "b": a}), _weighted({"a": b, "b": a}))
    assert cnt.frame_count == 1
    same(f({"a": a, "c": b}), _weighted({"a": a, "c": b}))       # same length, another key
    assert cnt.frame_count == 2
    same(f({"b": a, "a": b}), _weighted({"b": a, "a": b}))       # same keys, another order
    assert cnt.frame_count == 3
    same(f({"a": a, "b": b}), _weighted({"a": a, "b": b}))       # the first entry still hits
    assert cnt.frame_count == 3


def _get(d):
    return d["x"] * 2


def test_dict_key_guard_seen_in_guard_log():
    xcompile.reset()
    f = xcompile.compile(_get, backend="eager", fullgraph=True)
    f({"x": torch.ones(2), "y": 1})
    from xcompile import _C
    dump = _C.cache_entries(_get)[0].guard.dump()
    assert "DICT_KEYS" in dump and "('x', 'y')" in dump
    xcompile.reset()


Pair = collections.namedtuple("Pair", ["lo", "hi"])


def _results(x):
    return torch.max(x, 1), x.sort(dim=0), Pair(x.min(), x.max()), torch.topk(x, 2).indices


def test_namedtuple_and_structseq_outputs():
    cnt = CompileCounter()
    f = xcompile.compile(_results, backend=cnt, fullgraph=True)
    for _ in range(2):
        x = torch.randn(4, 5)
        r, e = f(x), _results(x)
        same(r, e)
        assert r[0].values.shape == (4,) and r[2].hi.shape == ()
    assert cnt.frame_count == 1


def _passthrough_namedtuple(p):
    return Pair(p.hi, p.lo), p


def test_namedtuple_input_returned_as_is_and_rebuilt():
    f = xcompile.compile(_passthrough_namedtuple, backend="eager", fullgraph=True)
    p = Pair(torch.randn(2), torch.randn(2))
    r = f(p)
    assert type(r[0]) is Pair and r[0].lo is p.hi and r[1] is p
