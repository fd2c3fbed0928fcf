"""MODULE_TREE on deep trees: every change to module state anywhere in the tree fails the guard
(the last and the deepest module as much as the root), in-place tensor updates do not, and the
guard reads no freed memory when parts of the tree are replaced and collected."""
import gc
from collections import OrderedDict

import pytest
import torch
import torch.nn as nn
import torch.nn.modules.module as nn_module

import xcompile._C as C

from .runtime_helpers import check


class Block(nn.Module):
    def __init__(self, d=4):
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))
        self.gate = nn.Parameter(torch.ones(d))
        self.register_buffer("scale", torch.ones(d))
        self.heads = 2


class Deep(nn.Module):
    def __init__(self, n=6):
        super().__init__()
        self.blocks = nn.ModuleList(Block() for _ in range(n))
        self.head = nn.Linear(4, 4)


def tree_guard(m, *, lazy=True):
    root = C.RootGuard(0)
    root.local(0, "m").add_module_tree(m, "MODULE m", lazy_hooks=lazy)
    return root


def deepest(m):
    return m.blocks[-1].mlp[2]


def _set_param_via_dict(m):
    deepest(m)._parameters["weight"] = nn.Parameter(torch.randn(4, 8))


def _replace_dunder_dict(m):
    lin = deepest(m)
    lin.__dict__ = dict(lin.__dict__)


def _hook_kwargs(m):
    deepest(m).register_forward_hook(lambda mod, a, kw, out: None, with_kwargs=True)


def _pre_hook_kwargs(m):
    deepest(m).register_forward_pre_hook(lambda mod, a, kw: None, with_kwargs=True)


MUTATIONS = [
    pytest.param(lambda m: setattr(deepest(m), "weight", nn.Parameter(torch.randn(4, 8))), id="param-replaced"),
    pytest.param(_set_param_via_dict, id="param-replaced-through-_parameters"),
    pytest.param(lambda m: setattr(deepest(m), "bias", None), id="param-set-none"),
    pytest.param(lambda m: delattr(m.blocks[-1], "gate"), id="param-deleted"),
    pytest.param(lambda m: m.blocks[-1].register_parameter("extra", nn.Parameter(torch.ones(1))), id="param-added"),
    pytest.param(lambda m: setattr(m.blocks[-1], "scale", torch.zeros(4)), id="buffer-rebound"),
    pytest.param(lambda m: m.blocks[-1].register_buffer("scale", torch.zeros(4)), id="buffer-re-registered"),
    pytest.param(lambda m: m.blocks[-1]._buffers.__setitem__("scale", torch.zeros(4)), id="buffer-through-_buffers"),
    pytest.param(lambda m: m.blocks.__setitem__(3, Block()), id="block-swapped"),
    pytest.param(lambda m: m.blocks[-1].mlp.__setitem__(0, nn.Linear(4, 8)), id="deep-submodule-swapped"),
    pytest.param(lambda m: m.blocks[-1]._modules.__setitem__("ln", nn.LayerNorm(4)), id="submodule-through-_modules"),
    pytest.param(lambda m: m.blocks.append(Block()), id="block-appended"),
    pytest.param(lambda m: delattr(m.blocks[-1], "ln"), id="submodule-deleted"),
    pytest.param(lambda m: deepest(m).register_forward_hook(lambda *a: None), id="forward-hook"),
    pytest.param(_hook_kwargs, id="forward-hook-with-kwargs"),
    pytest.param(lambda m: deepest(m).register_forward_hook(lambda *a: None, always_call=True),
                 id="forward-hook-always-called"),
    pytest.param(lambda m: deepest(m).register_forward_pre_hook(lambda *a: None), id="forward-pre-hook"),
    pytest.param(_pre_hook_kwargs, id="forward-pre-hook-with-kwargs"),
    pytest.param(lambda m: deepest(m).register_full_backward_hook(lambda *a: None), id="full-backward-hook"),
    pytest.param(lambda m: deepest(m).register_full_backward_pre_hook(lambda *a: None), id="backward-pre-hook"),
    pytest.param(lambda m: deepest(m).register_backward_hook(lambda *a: None), id="old-backward-hook"),
    pytest.param(lambda m: deepest(m).train(False), id="deepest-eval"),
    pytest.param(lambda m: m.train(False), id="eval"),
    pytest.param(lambda m: setattr(m.blocks[-1], "heads", 4), id="attribute-reassigned"),
    pytest.param(lambda m: setattr(deepest(m), "new_attr", 1), id="attribute-added"),
    pytest.param(lambda m: delattr(m.blocks[-1], "heads"), id="attribute-deleted"),
    pytest.param(lambda m: setattr(deepest(m), "forward", lambda x: x), id="forward-replaced"),
    pytest.param(_replace_dunder_dict, id="dunder-dict-replaced"),
    pytest.param(lambda m: m.blocks[-1].mlp._forward_hooks.__setitem__(99, lambda *a: None),
                 id="hook-dict-written-directly"),
]


@pytest.mark.parametrize("lazy", [True, False], ids=["lazy", "all-dicts"])
@pytest.mark.parametrize("mutate", MUTATIONS)
def test_any_change_anywhere_fails(mutate, lazy):
    m = Deep()
    root = tree_guard(m, lazy=lazy)
    assert check(root, m)
    assert check(root, m)
    mutate(m)
    assert not check(root, m)
    assert root.last_failure() == "MODULE m"
    assert not check(root, m)                   # and keeps failing


@pytest.mark.parametrize("register", [
    nn_module.register_module_forward_hook,
    nn_module.register_module_forward_pre_hook,
    nn_module.register_module_full_backward_hook,
    nn_module.register_module_full_backward_pre_hook,
])
def test_global_hooks_fail_and_removal_restores(register):
    m = Deep()
    root = tree_guard(m)
    handle = register(lambda *a: None)
    try:
        assert not check(root, m)
    finally:
        handle.remove()
    assert check(root, m)


def test_in_place_updates_and_no_op_rewrites_pass():
    m = Deep()
    root = tree_guard(m)
    with torch.no_grad():
        for p in m.parameters():
            p.mul_(2)
        m.blocks[-1].scale.fill_(3)
    m.blocks[-1].heads = 2            # the same value again: the version moves, the contents do not
    m.eval()
    m.train()                         # back to training: every __dict__ version moved
    assert check(root, m)
    h = deepest(m).register_forward_hook(lambda *a: None)
    assert not check(root, m)
    h.remove()
    assert check(root, m)


def test_hook_tables_used_only_through_a_registered_hook():
    """With a forward hook registered when the guard was made, its with_kwargs / always_called
    tables are watched too; written directly, they fail the guard."""
    m = Deep()
    h = deepest(m).register_forward_hook(lambda *a: None)
    root = tree_guard(m)
    assert check(root, m)
    deepest(m)._forward_hooks_with_kwargs[h.id] = True
    assert not check(root, m)
    del deepest(m)._forward_hooks_with_kwargs[h.id]
    assert check(root, m)
    deepest(m)._forward_hooks_always_called[h.id] = True
    assert not check(root, m)


def test_lazy_tree_skips_state_dict_hooks_only():
    """state_dict / load_state_dict hooks never run in forward: a lazy tree does not watch their
    tables (the frontend asks for every table when a trace read them); a full tree does."""
    m = Deep()
    lazy, full = tree_guard(m), tree_guard(m, lazy=False)
    handles = [deepest(m).register_state_dict_pre_hook(lambda *a, **k: None),
               deepest(m)._register_state_dict_hook(lambda *a, **k: None),
               deepest(m).register_load_state_dict_post_hook(lambda *a, **k: None)]
    assert check(lazy, m)
    assert not check(full, m)
    for h in handles:
        h.remove()
    assert check(full, m)


@pytest.mark.parametrize("victim", ["block", "deepest", "hooks"])
def test_replaced_parts_collected_and_memory_reused(victim):
    """The part of the tree the guard watched is replaced and freed, and its memory reused by
    new dicts and modules: the guard fails (and reads nothing freed) every time."""
    m = Deep()
    root = tree_guard(m)
    if victim == "block":
        m.blocks[2] = Block()
    elif victim == "deepest":
        m.blocks[-1].mlp[2] = nn.Linear(8, 4)
    else:
        deepest(m).__dict__["_forward_hooks"] = OrderedDict()
    gc.collect()
    junk = [({}, OrderedDict(), Block()) for _ in range(200)]
    for _ in range(3):
        assert not check(root, m)
    del junk


def test_module_dying_under_the_guard():
    m = Deep()
    root = tree_guard(m)
    del m
    gc.collect()
    junk = [Deep(2) for _ in range(20)]
    assert all(not check(root, j) for j in junk)


def test_rewatch_takes_new_plain_attributes_and_watches_new_dicts():
    m = Deep()
    root = tree_guard(m)
    blk = m.blocks[-1]
    blk.state = {"pos": 0}            # a plain dict attribute (as a KV cache's bookkeeping)
    assert not check(root, m)
    root.rewatch()
    assert check(root, m)
    blk.state["pos"] = 1              # the new dict is watched
    assert not check(root, m)
    root.rewatch()
    assert check(root, m)
    old = blk.state
    blk.state = {"pos": 2}            # replaced: the old one may die
    del old
    gc.collect()
    assert not check(root, m)
    root.rewatch()
    assert check(root, m)
    blk.state["pos"] = 3
    assert not check(root, m)
    root.rewatch()
    deepest(m).register_forward_hook(lambda *a: None)   # after a rewatch, still every table
    assert not check(root, m)
    root.rewatch()                    # (the frontend never rewatches hooks; the guard copes)
    assert check(root, m)
    m.blocks[0] = Block()
    assert not check(root, m)


def test_rewatch_keeps_watching_a_dict_shared_by_two_modules():
    m = Deep()
    shared = {"k": 1}
    m.blocks[0].table = shared
    m.blocks[1].table = shared
    root = tree_guard(m)
    assert check(root, m)
    m.blocks[0].table = {"k": 1}      # block 0 lets go of it, block 1 still has it
    root.rewatch()
    assert check(root, m)
    shared["k"] = 2
    assert not check(root, m)
