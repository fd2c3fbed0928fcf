"""CUDA-graph replay's bookkeeping (kernels/cudagraphs.py, csrc/graph_replay.cpp), tested on the
CPU stand-in device: input copies, static-input pointer checks, held outputs (copied out or
raising torch's overwritten-output error), pools, and fallbacks with their reasons. Whole models
compiled with mode="reduce-overhead": test_cudagraphs_models.py."""

import pytest
import torch
import torch.fx
import torch.nn as nn

import xcompile
from xcompile import config
from xcompile.kernels import cudagraphs as cg
from xcompile.kernels.graph_devices import GraphPool

pytestmark = pytest.mark.usefixtures("cudagraph_stand_in")


def _gm(fn):
    return torch.fx.symbolic_trace(fn)


def affine(x, w):
    return [x * 2 + w, x.sum()]


def replayed(fn=affine, n=2, pool=None, calls=None):
    def art(*args):
        if calls is not None:
            calls.append(1)
        return fn(*args)
    return cg.wrap(art, _gm(fn), n, pool=pool if pool is not None else GraphPool(), name="t")


def param(*shape):
    return nn.Parameter(torch.randn(*shape), requires_grad=False)


def test_warm_up_then_record_then_replay_in_cpp():
    w, calls = param(4), []
    g = replayed(calls=calls)
    assert g.stats["state"] == "pending"
    for i in range(5):
        x = torch.randn(4)
        out = g(x, w)
        assert isinstance(out, list) and len(out) == 2
        torch.testing.assert_close(out[0], x * 2 + w)
        torch.testing.assert_close(out[1], x.sum())
    s = g.stats
    assert s["state"] == "recorded" and s["replays"] == 4 and s["copies_in"] == 4
    assert s["direct_calls"] == 0 and s["rerecords"] == 0
    # every call runs the graph once: the warm-up, the recording (its replay skipped, as a capture
    # executes nothing and the replay after it is the call's run), then each replay
    assert len(calls) == 5


def test_outputs_share_the_recorded_memory_and_alias_as_recorded():
    def f(x):
        y = x + 1
        return (y, y.view(2, 2), x * 3)
    g = replayed(f, n=1)
    for _ in range(3):
        x = torch.randn(4)
        a, b, c = g(x)
    assert isinstance(g(x), tuple)
    a, b, c = g(x)
    assert a.data_ptr() == b.data_ptr()                  # one storage, as in eager
    assert a.untyped_storage().data_ptr() != c.untyped_storage().data_ptr()
    torch.testing.assert_close(b, (x + 1).view(2, 2))
    b.add_(1)                                            # the view writes its base, as in eager
    torch.testing.assert_close(a, x + 2)


def test_held_outputs_keep_their_values_when_copied_out():
    w = param(4)
    g = replayed()
    outs, xs = [], []
    for _ in range(6):
        xs.append(torch.randn(4))
        outs.append(g(xs[-1], w))
    for x, (y, s) in zip(xs, outs):                      # every earlier result still holds its values
        torch.testing.assert_close(y, x * 2 + w)
        torch.testing.assert_close(s, x.sum())
    assert g.stats["released_outputs"] >= 4


def test_dropped_outputs_are_not_copied():
    w = param(4)
    g = replayed()
    for _ in range(3):
        g(torch.randn(4), w)
    before = g.stats["released_outputs"]
    for _ in range(5):
        g(torch.randn(4), w)                             # the result is dropped at once
    assert g.stats["released_outputs"] == before


def test_error_mode_raises_torchs_message_on_an_overwritten_output():
    w = param(4)
    with config.patch(cudagraph_live_outputs="error"):
        g = replayed()
    for _ in range(3):
        g(torch.randn(4), w)
    x = torch.randn(4)
    old = g(x, w)
    new = g(torch.randn(4), w)
    with pytest.raises(RuntimeError, match="accessing tensor output of CUDAGraphs that has been overwritten"):
        old[0] + 1
    torch.testing.assert_close(new[0].shape, torch.Size([4]))
    cloned = g(x, w)[0].clone()                          # the hint: clone before calling again
    g(torch.randn(4), w)
    torch.testing.assert_close(cloned, x * 2 + w)


def test_bad_live_outputs_setting_is_a_clear_error():
    with config.patch(cudagraph_live_outputs="keep"), pytest.raises(ValueError, match="'copy' or 'error'"):
        replayed()


def test_the_recorded_buffer_itself_is_not_copied():
    w = param(4)
    g = replayed()
    for _ in range(3):
        g(torch.randn(4), w)
    n = g.stats["copies_in"]
    # feed the output back: it is another memory than the input buffer, so it is copied
    y = g(torch.randn(4), w)[0]
    out = g(y, w)[0]
    assert g.stats["copies_in"] == n + 2
    torch.testing.assert_close(out, y * 2 + w)


def test_a_decode_loop_feeding_outputs_back_matches_eager():
    w = param(4)
    g = replayed(lambda x, w: [torch.tanh(x * 2 + w)], n=2)
    x = torch.randn(4)
    ref = x.clone()
    history, ref_history = [], []
    for _ in range(8):
        (x,) = g(x, w)
        ref = torch.tanh(ref * 2 + w)
        history.append(x)
        ref_history.append(ref)
    for a, b in zip(history, ref_history):
        torch.testing.assert_close(a, b)


def test_a_static_input_given_new_memory_records_again():
    w = param(4)
    g = replayed()
    for _ in range(3):
        g(torch.randn(4), w)
    with torch.no_grad():
        w.mul_(2)                                        # in place: same memory, seen by the replay
    x = torch.randn(4)
    torch.testing.assert_close(g(x, w)[0], x * 2 + w)
    assert g.stats["rerecords"] == 0
    w.data = torch.randn(4)                              # new memory: recorded again
    x = torch.randn(4)
    torch.testing.assert_close(g(x, w)[0], x * 2 + w)
    assert g.stats["rerecords"] == 1 and g.stats["state"] == "recorded"


def test_a_static_input_that_keeps_moving_runs_plainly(reasons):
    w = param(4)
    with config.patch(cudagraph_max_records=2):
        g = replayed()
        for _ in range(6):
            w.data = torch.randn(4)
            x = torch.randn(4)
            torch.testing.assert_close(g(x, w)[0], x * 2 + w)
    assert g.stats["state"] == "eager"
    assert any("static input keeps moving" in m for m in reasons())


def test_other_sizes_or_strides_call_the_artifact():
    g = replayed(lambda x: [x.t() * 2], n=1)
    for _ in range(3):
        g(torch.randn(3, 4))
    x = torch.randn(4, 3).t()                            # other strides: the artifact runs as it is
    torch.testing.assert_close(g(x)[0], x.t() * 2)
    assert g.stats["direct_calls"] == 1 and g.stats["state"] == "recorded"


def test_an_output_that_is_an_input_is_the_callers_tensor():
    def f(x, w):
        return [x, x[1:], x * w]
    w = param(4)
    g = replayed(f)
    for _ in range(3):
        x = torch.randn(4)
        a, b, c = g(x, w)
        assert a is x
        assert b.data_ptr() == x[1:].data_ptr()
        torch.testing.assert_close(c, x * w)


def test_an_alias_of_an_input_is_a_new_tensor_not_the_input():
    # fuzz seed 30226: ``x.detach()`` (a graph output of x's geometry that is not x) was
    # returned as the caller's x itself, where eager returns a new tensor
    def f(x, w):
        return [torch.ops.aten.alias.default(x), x * w]
    w = param(4)
    g = replayed(f)
    for _ in range(3):
        x = torch.randn(4)
        a, b = g(x, w)
        assert a is not x and a.data_ptr() == x.data_ptr() and a.shape == x.shape
        x.add_(1)
        torch.testing.assert_close(a, x)                 # shares x's memory
        torch.testing.assert_close(b, (x - 1) * w)
    assert g.stats["state"] == "recorded" and g.stats["replays"] >= 1


def test_a_later_graph_in_the_pool_gets_its_held_outputs_copied_out():
    pool = GraphPool()
    w = param(4)
    a = replayed(pool=pool)
    b = replayed(lambda x: [x - 1], n=1, pool=pool)
    for _ in range(3):
        a(torch.randn(4), w)
        b(torch.randn(4))
    assert list(pool) == [a, b]                          # recording order
    xb = torch.randn(4)
    held = b(xb)
    before = b.stats["released_outputs"]
    a(torch.randn(4), w)                                 # a replays: b (recorded later) is copied out
    assert b.stats["released_outputs"] == before + 1
    torch.testing.assert_close(held[0], xb - 1)
    before_a = a.stats["released_outputs"]
    b(torch.randn(4))                                    # b replays: a (recorded earlier) is left alone
    assert a.stats["released_outputs"] == before_a


def test_reset_empties_the_pools():
    pool = cg.new_pool()
    g = replayed(pool=pool)
    w = param(4)
    for _ in range(3):
        g(torch.randn(4), w)
    assert len(pool) == 1
    xcompile.reset()
    assert len(pool) == 0


# -- fallbacks, each with its reason -----------------------------------------------------------

def test_cpu_tensors_without_the_stand_in_run_plainly(reasons):
    w = param(4)
    with config.patch(cudagraph_stand_in=False):
        g = replayed()
        x = torch.randn(4)
        torch.testing.assert_close(g(x, w)[0], x * 2 + w)
    assert g.stats["state"] == "eager"
    assert any("CPU tensors" in m for m in reasons())


def test_a_non_tensor_input_runs_plainly(reasons):
    g = cg.wrap(lambda x, k: [x * k], _gm(lambda x, k: [x * k]), 2, pool=GraphPool())
    torch.testing.assert_close(g(torch.ones(2), 3)[0], torch.full((2,), 3.0))
    assert g.stats["state"] == "eager" and any("not a tensor" in m for m in reasons())


def _add_one(x):
    x.add_(1)
    return [x * 2]


def test_a_written_input_that_is_new_memory_each_call_runs_plainly(reasons):
    g = replayed(_add_one, n=1)
    kept = []
    for _ in range(3):
        x = torch.zeros(4)
        kept.append(x)                                   # each call's x is new memory
        out = g(x)
        torch.testing.assert_close(x, torch.ones(4))     # the caller's tensor was written
        torch.testing.assert_close(out[0], torch.full((4,), 2.0))
    assert g.stats["state"] == "eager"
    assert any("writes into input 0, which is new memory on each call" in m for m in reasons())


def test_a_written_input_that_stays_put_is_used_in_place():
    g = replayed(_add_one, n=1)
    x = torch.zeros(4)
    for k in range(1, 6):
        out = g(x)
        torch.testing.assert_close(x, torch.full((4,), float(k)))    # written once per call
        torch.testing.assert_close(out[0], torch.full((4,), 2.0 * k))
    assert g.stats["state"] == "recorded" and g.stats["copies_in"] == 0
    y = torch.zeros(4)                                   # another tensor: recorded again
    torch.testing.assert_close(g(y)[0], torch.full((4,), 2.0))
    torch.testing.assert_close(y, torch.ones(4))
    torch.testing.assert_close(x, torch.full((4,), 5.0))             # the old one is left alone
    assert g.stats["rerecords"] == 1


def test_a_written_static_input_is_recorded():
    def f(x, buf):
        buf.add_(x)
        return [buf * 1]
    buf = torch.zeros(4)
    xcompile.mark_static_address(buf)
    g = replayed(f)
    total = torch.zeros(4)
    for _ in range(5):
        x = torch.randn(4)
        total += x
        torch.testing.assert_close(g(x, buf)[0], total)
    torch.testing.assert_close(buf, total)
    assert g.stats["state"] == "recorded"


@pytest.mark.parametrize("fn, why", [
    (lambda x: [torch.nn.functional.dropout(x, 0.5, training=True)], "random op"),
    (lambda x: [x + torch.rand_like(x)], "random op"),
])
def test_random_ops_run_plainly(fn, why, reasons):
    gm = torch.fx.experimental.proxy_tensor.make_fx(fn)(torch.randn(4))
    g = cg.wrap(gm, gm, 1, pool=GraphPool())
    assert g is gm                                       # not wrapped at all
    assert any(why in m for m in reasons())


def test_a_failed_recording_runs_plainly(reasons, monkeypatch):
    from xcompile.kernels import graph_devices

    def boom(self, run, inputs, pool):
        raise RuntimeError("operation not permitted when stream is capturing")
    monkeypatch.setattr(graph_devices.StandIn, "record", boom)
    w = param(4)
    g = replayed()
    for _ in range(3):
        x = torch.randn(4)
        torch.testing.assert_close(g(x, w)[0], x * 2 + w)
    assert g.stats["state"] == "eager"
    assert any("recording failed: RuntimeError: operation not permitted" in m for m in reasons())


def test_an_in_place_input_that_is_a_later_graphs_held_output_is_not_read_stale():
    """b's output, held by the caller, is the input a writes in place: when a replays, b's held
    output is copied out first (b was recorded after a), so a records again on the new memory."""
    pool = GraphPool()
    a = replayed(_add_one, n=1, pool=pool)
    b = replayed(lambda x: [x * 3], n=1, pool=pool)
    cache = torch.zeros(4)
    for _ in range(3):
        a(cache)                                         # a: recorded with cache in place
    (held,) = b(torch.ones(4))
    for _ in range(2):
        b(torch.ones(4))                                 # b: recorded after a
    (held,) = b(torch.ones(4))
    out = a(held)                                        # in place on b's output
    torch.testing.assert_close(held, torch.full((4,), 4.0))
    torch.testing.assert_close(out[0], torch.full((4,), 8.0))


def test_a_replay_that_drops_its_own_recording_and_last_reference_is_safe():
    """Python run by the replay (here the stand-in's artifact) drops the recording and the last
    reference to the graph: the call finishes on its own references."""
    holder = {}
    w = param(4)

    def art(x, w):
        if holder.get("drop"):
            holder["g"]._drop_recording()
            del holder["g"]
        return [x * 2 + w, x.sum()]
    holder["g"] = cg.wrap(art, _gm(affine), 2, pool=GraphPool(), name="t")
    g = holder["g"]
    for _ in range(3):
        g(torch.randn(4), w)
    del g
    holder["drop"] = True
    x = torch.randn(4)
    out = holder["g"](x, w)
    torch.testing.assert_close(out[0], x * 2 + w)
    assert "g" not in holder
