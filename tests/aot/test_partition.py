"""The min-cut partitioner: fewer bytes saved than save-all, never recomputes expensive ops."""
import pytest
import torch

import xcompile
from xcompile.aot.ops import is_compute_intensive, is_random
from xcompile.aot.saved_bytes import SavedBytes

from .models import MODELS
from .util import make_input, make_pair


def saved_bytes(fn, name, shape, seed=0):
    x = make_input(name, shape, torch.float32, seed)
    with SavedBytes() as saved:
        outs = fn(x)
    assert any(o.requires_grad for o in outs)
    return saved.bytes


def artifact(fn):
    (art,) = fn._training.values()
    return art


@pytest.mark.parametrize("name", sorted(MODELS))
def test_min_cut_saves_no_more_than_save_all(name):
    with xcompile.config.patch(fallback_random=True):
        _, min_cut, _, shape = make_pair(name, partition="min_cut")
        _, save_all, _, _ = make_pair(name, partition="save_all")
        mc, sa = saved_bytes(min_cut, name, shape), saved_bytes(save_all, name, shape)
    assert 0 < mc <= sa, (mc, sa)
    if name in ("gelu_mlp", "transformer"):
        assert mc < sa, (mc, sa)
    # the runtime saves what the partition chose, and the estimate agrees with the measure
    part = artifact(min_cut).partition
    assert part.saved_bytes == pytest.approx(mc, rel=0.01) or part.saved_bytes >= mc


def _depends_on_tangent(node, tangents):
    seen, stack = set(), [node]
    while stack:
        n = stack.pop()
        if n in tangents:
            return True
        if n not in seen:
            seen.add(n)
            stack.extend(n.all_input_nodes)
    return False


@pytest.mark.parametrize("name", sorted(MODELS))
def test_no_expensive_or_random_op_recomputed(name):
    with xcompile.config.patch(verify=True):        # also runs aot/verify.py's checks
        _, fn, _, _ = make_pair(name)
    art = artifact(fn)
    bw = art.partition.bw_gm.graph
    tangents = {n for n in bw.nodes if n.op == "placeholder" and n.name.startswith("tangents")}
    assert len(tangents) == len(art.diff_outs)
    for n in bw.nodes:
        if n.op == "call_function" and (is_compute_intensive(n) or is_random(n)):
            assert _depends_on_tangent(n, tangents), f"{n.name} ({n.target}) recomputed in backward"
    joint_ops = {n.name: n for n in art.joint.gm.graph.nodes}
    for name_ in art.partition.recomputed:
        n = joint_ops[name_]
        assert not is_compute_intensive(n) and not is_random(n), name_


def test_gelu_mlp_recomputes_gelu_instead_of_saving_it():
    _, fn, _, _ = make_pair("gelu_mlp")
    part = artifact(fn).partition
    assert any(n.startswith("gelu") for n in part.recomputed)
    assert not any(n.startswith("gelu") for n in part.saved)


def test_describe_lists_saved_values():
    _, fn, _, _ = make_pair("gelu_mlp")
    text = artifact(fn).partition.describe()
    assert "partition[min_cut]" in text and "saved" in text


def test_verify_catches_a_recomputed_matmul():
    from xcompile.aot.verify import check_partition
    _, fn, _, _ = make_pair("gelu_mlp")
    art = artifact(fn)
    part = art.partition
    bw = part.bw_gm.graph
    first_saved = next(n for n in bw.nodes if n.op == "placeholder")
    fw_mm = next(n for n in part.fw_gm.graph.nodes if n.op == "call_function" and "mm" in n.name)
    with bw.inserting_after(first_saved):
        extra = bw.call_function(torch.ops.aten.mm.default, (first_saved, first_saved), name=fw_mm.name)
    out = bw.output_node()
    out.args = (tuple(out.args[0]) + (extra,),)
    with pytest.raises(AssertionError, match="recomputes"):
        check_partition(part, art.joint.num_primals, art.joint.num_tangents)


@pytest.mark.parametrize("name", ["gelu_mlp", "transformer"])
def test_recomputation_runs_just_before_its_use(name):
    """The backward recomputes a forward value where the backward first needs it (as the
    autograd engine would), not all of it up front: no backward work (a node that depends on a
    tangent) runs between a recomputed node and its first user."""
    _, fn, _, _ = make_pair(name)
    part = artifact(fn).partition
    assert part.recomputed
    bw = part.bw_gm.graph
    tangents = {n for n in bw.nodes if n.op == "placeholder" and n.name.startswith("tangents")}
    order = {n: i for i, n in enumerate(bw.nodes)}
    backward = [n for n in bw.nodes if n.op == "call_function" and _depends_on_tangent(n, tangents)]
    for n in bw.nodes:
        if n.op != "call_function" or _depends_on_tangent(n, tangents):
            continue
        first = min(order[u] for u in n.users)
        between = [b.name for b in backward if order[n] < order[b] < first]
        assert not between, f"{n.name} is recomputed before {between}, which do not need it"
