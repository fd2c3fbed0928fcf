"""nn.Module: inlined forward, submodules, containers, parameters as get_attr, guards."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from xcompile.frontend.exc import Unsupported

from .helpers import check, placeholders, trace


class MLP(nn.Module):
    def __init__(self, d=8, layers=3):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(d, d) for _ in range(layers)])
        self.norm = nn.LayerNorm(d)
        self.eps = 1e-3
        self.act = "gelu"
        self.register_buffer("scale", torch.ones(d) * 0.5)

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            h = layer(x)
            x = x + (F.gelu(h) if self.act == "gelu" else F.relu(h)) * self.scale
            if i == 0:
                x = x * (1 + self.eps)
        return self.norm(x)


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc = nn.Linear(d, d)

    def forward(self, x):
        return torch.relu(self.fc(x))


class Residual(Block):
    def forward(self, x):
        return x + super().forward(x)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.seq = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Dropout(0.0), nn.Linear(8, 4))
        self.heads = nn.ModuleDict({"a": nn.Linear(4, 2), "b": nn.Linear(4, 3)})
        self.res = Residual(4)
        self.sizes = [2, 3]

    def forward(self, x, which="a"):
        h = self.res(self.seq(x))
        outs = {k: head(h) for k, head in self.heads.items()}
        return outs[which], outs, self.heads[which].weight.shape, self.sizes[0]


def test_mlp_module_matches_eager():
    m = MLP()
    c = check(m, torch.randn(2, 8))
    assert placeholders(c) == ["l_x"]
    get_attrs = {n.target for n in c.gm.graph.nodes if n.op == "get_attr"}
    assert "self_layers_0_weight" in get_attrs and "self_scale" in get_attrs
    # the GraphModule holds the SAME parameter / buffer objects
    assert c.gm.self_layers_0_weight is m.layers[0].weight
    assert c.gm.self_scale is m.scale


def test_module_guards_are_one_tree_guard():
    m = MLP()
    c = trace(m, torch.randn(2, 8))
    lines = str(c.guards).splitlines()
    assert [line for line in lines if line.startswith("MODULE_TREE")] == [
        line for line in lines if "L['self']" in line]
    assert len([line for line in lines if "L['self']" in line]) == 1
    assert any(line.startswith("TENSOR_MATCH: L['x']") for line in lines)


def test_inplace_parameter_update_needs_no_retrace():
    m = MLP()
    x = torch.randn(2, 8)
    c = trace(m, x)
    with torch.no_grad():
        for p in m.parameters():
            p.mul_(0.5)
    (out,) = c.gm(x)
    torch.testing.assert_close(out, m(x))


def test_sequential_moduledict_super_and_list_attribute():
    net = Net()
    c = check(net, torch.randn(3, 4))
    guards = str(c.guards)
    # a plain list stored on the module is mutable: guarded through attribute/item sources
    assert "LENGTH_CHECK: L['self'].sizes 2" in guards
    assert "EQUALS_MATCH: L['self'].sizes[0] 2" in guards


def test_module_passed_as_argument_and_called():
    lin = nn.Linear(3, 3)

    def fn(mod, x):
        return mod(x) + mod.bias

    c = check(fn, lin, torch.randn(2, 3))
    assert "MODULE_TREE: L['mod']" in str(c.guards)


def test_global_module():
    c = check(_use_global_model, torch.randn(2, 4))
    assert "MODULE_TREE: G['GLOBAL_MODEL']" in str(c.guards)


GLOBAL_MODEL = nn.Sequential(nn.Linear(4, 4), nn.Tanh())


def _use_global_model(x):
    return GLOBAL_MODEL(x) * 2


def test_conv_batchnorm_eval_and_train():
    m = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                      nn.Flatten(), nn.Linear(4, 2))
    m.eval()
    check(m, torch.randn(2, 3, 8, 8))


def test_module_with_backward_hooks_is_unsupported():
    m = nn.Linear(2, 2)
    m.register_full_backward_hook(lambda *a: None)      # forward hooks are inlined (test_fe_hunt.py)

    def fn(x):
        return m(x)
    with pytest.raises(Unsupported, match="hooks"):
        trace(fn, torch.randn(2))


def test_parameter_requires_grad_flows():
    m = nn.Linear(3, 2)
    x = torch.randn(4, 3)
    c = check(m, x)
    (out,) = c.gm(x)
    assert out.requires_grad
    out.sum().backward()
    assert m.weight.grad is not None


def test_module_list_indexing_len_and_reversed():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList([Block(4) for _ in range(3)])

        def forward(self, x):
            x = self.blocks[-1](x)
            for b in self.blocks[:0] if False else reversed(self.blocks):
                x = b(x)
            return x * len(self.blocks)
    check(M(), torch.randn(2, 4))


def test_module_training_flag_and_dropout():
    m = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
    m.eval()
    c = check(m, torch.randn(2, 4))
    assert "MODULE_TREE" in str(c.guards)
