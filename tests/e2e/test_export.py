"""xcompile.export: one graph per function, called like the function, with the trace's guards.

Each exported graph is compared with eager on fresh inputs, and its op count with
``torch._dynamo.export``'s on the same function (the reference; tests only).
"""
import collections
import dataclasses
import subprocess
import sys
import textwrap

import pytest
import torch
from torch._decomp import core_aten_decompositions, get_decompositions
from torch.fx.experimental.symbolic_shapes import ConstraintViolationError

import xcompile
from xcompile.frontend.exc import Unsupported


def _ops(gm) -> int:
    return sum(1 for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module"))


def _torch_ops(fn, *args, **kwargs) -> int:
    torch._dynamo.reset()
    gm, _ = torch._dynamo.export(fn, tracing_mode="real")(*args, **kwargs)
    return _ops(gm)


def _same(a, b):
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor)
        assert (a.dtype, a.shape, a.stride()) == (b.dtype, b.shape, b.stride())
        torch.testing.assert_close(a, b)
        return
    assert type(a) is type(b), (type(a), type(b))
    if isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
    elif isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            _same(a[k], b[k])
    else:
        assert a == b


def flat(x, y):
    return torch.relu(x @ y) + 1


def nested(inputs, scale=2.0, *, bias):
    a, (b, c) = inputs["pair"], inputs["rest"]
    return {"sum": (a + b) * scale + bias, "list": [c.sin(), a.shape[0]], "none": None}


def returns_input(x, y):
    return x, y * 2, x


Point = collections.namedtuple("Point", "x y")


def named(x):
    v, i = x.max(dim=0)
    return Point(v, i), torch.max(x, dim=1)


@pytest.mark.parametrize("fn, make", [
    (flat, lambda: ((torch.randn(3, 4), torch.randn(4, 5)), {})),
    (nested, lambda: (({"pair": torch.randn(3), "rest": (torch.randn(3), torch.randn(2, 2))},),
                      {"bias": torch.randn(3)})),
    (returns_input, lambda: ((torch.randn(3), torch.randn(3)), {})),
    (named, lambda: ((torch.randn(4, 5),), {})),
])
def test_functions_export_to_one_graph_called_like_the_function(fn, make):
    args, kwargs = make()
    gm, guards = xcompile.export(fn, *args, **kwargs)
    for _ in range(2):
        args, kwargs = make()
        _same(gm(*args, **kwargs), fn(*args, **kwargs))
    assert _ops(gm) <= _torch_ops(fn, *make()[0], **make()[1])
    assert any(g.kind == "TENSOR_MATCH" for g in guards)


def test_sizes_stay_torch_size_static_and_symbolic():
    def f(x):
        return x.shape, x.size(), x.shape[0]

    gm, _ = xcompile.export(f, torch.randn(2, 3))
    _same(gm(torch.randn(2, 3)), f(torch.randn(2, 3)))
    x = torch.randn(4, 3)
    gm, _ = xcompile.export(f, x, dynamic_shapes=({0: "batch"},))
    y = torch.randn(7, 3)
    _same(gm(y), f(y))


class Holder:
    def __init__(self, w):
        self.w = w


def test_a_tensor_inside_an_argument_object_is_an_error_not_a_constant():
    def f(h, x):
        return x * h.w

    with pytest.raises(xcompile.ExportError, match=r"L\['h'\]\.w.*not a leaf"):
        xcompile.export(f, Holder(torch.randn(3)), torch.randn(3))


@dataclasses.dataclass
class Out:
    value: torch.Tensor
    extra: int


torch.utils._pytree.register_dataclass(Out)


class Flags:
    busy = False


FLAGS = Flags()


def test_results_built_in_python_and_harmless_state_changes():
    def f(x, **kwargs):
        scale = kwargs.pop("scale")              # the frame's own **kwargs: made per call
        FLAGS.busy = True                        # set and put back, as libraries do
        y = x * scale
        FLAGS.busy = False
        return Out(y, 3), {"x": x}

    gm, _ = xcompile.export(f, torch.randn(3), scale=2.0)
    x = torch.randn(3)
    out, d = gm(x, scale=2.0)
    assert isinstance(out, Out) and out.extra == 3 and d["x"] is x
    torch.testing.assert_close(out.value, x * 2)
    assert FLAGS.busy is False

    def leaves_it_set(x):
        FLAGS.busy = True
        return x + 1

    with pytest.raises(xcompile.ExportError, match="changes Python state"):
        xcompile.export(leaves_it_set, torch.randn(3))
    assert FLAGS.busy is False


def test_unflattenable_results_and_subclasses_are_errors():
    class Bag:
        def __init__(self, t):
            self.t = t

    class Mine(torch.Tensor):
        pass

    with pytest.raises(xcompile.ExportError, match="returns a .*Bag holding tensors"):
        xcompile.export(lambda x: Bag(x + 1), torch.randn(3))
    with pytest.raises(xcompile.ExportError, match="tensor subclass instances .Mine"):
        xcompile.export(lambda x: (x * 2).as_subclass(Mine), torch.randn(3))


def test_both_call_forms_and_the_result_unpacks():
    x, y = torch.randn(3, 4), torch.randn(4, 5)
    result = xcompile.export(flat)(x, y)
    assert isinstance(result, xcompile.ExportResult)
    gm, guards = result
    assert gm is result.graph_module and guards is result.guards
    torch.testing.assert_close(xcompile.export(flat, x, y).graph_module(x, y), flat(x, y))


def test_an_input_returned_is_the_same_object_and_duplicates_are_one_input():
    gm, _ = xcompile.export(returns_input, torch.randn(3), torch.randn(3))
    x, y = torch.randn(3), torch.randn(3)
    a, b, c = gm(x, y)
    assert a is x and c is x
    t = torch.randn(3)

    def twice(p, q):
        return p + q, p is q

    gm2, _ = xcompile.export(twice, t, t)
    out, same = gm2(t, t)
    torch.testing.assert_close(out, t * 2)
    assert same is True


def test_constant_and_unused_inputs():
    def f(x, n, unused, flag=True):
        return x * n if flag else x

    gm, guards = xcompile.export(f, torch.randn(3), 3, torch.randn(2))
    x = torch.randn(3)
    torch.testing.assert_close(gm(x, 3, torch.randn(2)), x * 3)
    assert any(g.kind == "EQUALS_MATCH" and g.name == "L['n']" for g in guards)


class WithBuffers(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)
        self.bn = torch.nn.BatchNorm1d(3)

    def forward(self, x):
        return self.bn(self.lin(x)).relu()


@pytest.mark.parametrize("aten_graph", [False, True])
def test_module_parameters_and_buffer_updates(aten_graph):
    torch.manual_seed(0)
    m, ref = WithBuffers(), WithBuffers()
    ref.load_state_dict(m.state_dict())
    gm, _ = xcompile.export(m, torch.randn(5, 4), aten_graph=aten_graph)
    names = {n for n, _ in gm.named_parameters()} | {n for n, _ in gm.named_buffers()}
    assert len(names) == len(dict(m.named_parameters())) + len(dict(m.named_buffers()))
    for _ in range(2):
        x = torch.randn(5, 4)
        _same(gm(x), ref(x))
    # the exported module updates the model's own running stats, as calling the model would
    torch.testing.assert_close(m.bn.running_mean, ref.bn.running_mean)
    assert int(m.bn.num_batches_tracked) == 2


@pytest.mark.parametrize("aten_graph", [False, True])
def test_input_mutation_is_kept(aten_graph):
    def f(x, y):
        x.add_(1)
        y[0] = 5.0
        return x * y

    gm, _ = xcompile.export(f, torch.randn(3), torch.randn(3), aten_graph=aten_graph)
    x, y = torch.randn(3), torch.randn(3)
    x2, y2 = x.clone(), y.clone()
    _same(gm(x, y), f(x2, y2))
    _same((x, y), (x2, y2))
    if aten_graph:
        targets = [n.target for n in gm.graph.nodes if n.op == "call_function"]
        assert torch.ops.aten.copy_.default in targets
        assert not any(str(t).endswith("_.Tensor") for t in targets)      # functional but the copies


def test_a_graph_break_is_an_error_naming_reason_hint_and_line():
    def f(x):
        print("side effect")
        return x + 1

    with pytest.raises(Unsupported) as info:
        xcompile.export(f, torch.randn(2))
    text = str(info.value)
    assert "print" in text and "Hint:" in text and "test_export.py" in text


def test_side_effects_on_python_state_are_an_error():
    seen = []

    def f(x):
        seen.append(1)
        return x + 1

    with pytest.raises(xcompile.ExportError, match="list contents"):
        xcompile.export(f, torch.randn(2))
    assert seen == []                          # nothing ran


def test_aten_graph_with_a_decomposition_table():
    def f(x, w):
        return torch.nn.functional.gelu(x @ w).softmax(-1)

    x, w = torch.randn(4, 8), torch.randn(8, 8)
    table = get_decompositions([torch.ops.aten.gelu, torch.ops.aten._softmax])
    gm, _ = xcompile.export(f, x, w, aten_graph=True, decomposition_table=table)
    targets = {n.target for n in gm.graph.nodes if n.op == "call_function"}
    assert not targets & {torch.ops.aten.gelu.default, torch.ops.aten._softmax.default}
    torch.testing.assert_close(gm(x, w), f(x, w))
    plain, _ = xcompile.export(f, x, w, aten_graph=True)
    assert torch.ops.aten.gelu.default in {n.target for n in plain.graph.nodes}
    core, _ = xcompile.export(f, x, w, aten_graph=True, decomposition_table=core_aten_decompositions())
    torch.testing.assert_close(core(x, w), f(x, w))


def test_tracing_mode_needs_aten_graph():
    with pytest.raises(AssertionError, match="aten_graph=True"):
        xcompile.export(flat, torch.randn(2, 2), torch.randn(2, 2), tracing_mode="symbolic")
    with pytest.raises(AssertionError, match="aten_graph=True"):
        xcompile.export(flat, torch.randn(2, 2), torch.randn(2, 2), decomposition_table={})


def test_symbolic_aten_graph_and_marked_dims_stay_symbolic():
    def f(x):
        return x.sum(0) * x.shape[0]

    x = torch.randn(5, 3)
    gm, _ = xcompile.export(f, x, aten_graph=True, tracing_mode="symbolic", dynamic_shapes=({0: "batch"},))
    for n in (2, 7):
        y = torch.randn(n, 3)
        torch.testing.assert_close(gm(y), f(y))
    py, guards = xcompile.export(f, torch.randn(5, 3), dynamic_shapes={"x": {0: "batch"}})
    y = torch.randn(9, 3)
    torch.testing.assert_close(py(y), f(y))
    assert any(g.kind == "SHAPE" for g in guards)


def test_a_constrained_dynamic_dim_is_an_error_naming_the_relation():
    def specializes(x):
        return x + 1 if x.shape[0] == 5 else x - 1

    def halves(x):
        return x.view(2, -1)

    with pytest.raises(ConstraintViolationError, match="specialized it to 5"):
        xcompile.export(specializes, torch.randn(5, 3), dynamic_shapes=({0: "b"},))
    with pytest.raises(ConstraintViolationError, match=r"Mod\(3\*s\d+, 2\).*fails for \[3, 5"):
        xcompile.export(halves, torch.randn(6, 3), dynamic_shapes=({0: "b"},))
    gm, _ = xcompile.export(halves, torch.randn(6, 3))                 # static: fine
    torch.testing.assert_close(gm(torch.ones(6, 3)), torch.ones(2, 9))
    x = torch.randn(6, 3)
    _, guards = xcompile.export(lambda t: t[1:].sum(0) * t.shape[0], x, constraints=[(x, 0)])
    assert any(g.kind == "SHAPE" and g.name == "L['t'].size()[0]" for g in guards), [str(g) for g in guards]


def test_cond_stays_in_the_exported_graph():
    def f(x):
        return torch.cond(x.sum() > 0, lambda a: a.sin(), lambda a: a.cos(), (x,))

    gm, _ = xcompile.export(f, torch.randn(3))
    aten, _ = xcompile.export(f, torch.randn(3), aten_graph=True)
    assert torch.ops.higher_order.cond in {n.target for n in aten.graph.nodes}
    for x in (torch.ones(3), -torch.ones(3)):
        torch.testing.assert_close(gm(x), f(x))
        torch.testing.assert_close(aten(x), f(x))


def test_guards_of_a_module_print_with_their_sources():
    _, guards = xcompile.export(WithBuffers(), torch.randn(5, 4))
    kinds = {g.kind for g in guards}
    assert {"TENSOR_MATCH", "GLOBAL_STATE"} <= kinds
    assert any(g.name == "L['x']" for g in guards)
    assert all(str(g).startswith(g.kind + ": ") for g in guards)


def test_saved_and_run_in_a_fresh_process(tmp_path):
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2)).eval()
    gm, _ = xcompile.export(m, torch.randn(3, 4))
    path = tmp_path / "exported.pt"
    torch.save(gm, path)
    x = torch.randn(3, 4)
    torch.save(x, tmp_path / "x.pt")
    want = m(x)
    code = textwrap.dedent(f"""
        import torch
        gm = torch.load({str(path)!r}, weights_only=False)
        x = torch.load({str(tmp_path / 'x.pt')!r})
        torch.save(gm(x), {str(tmp_path / 'out.pt')!r})
    """)
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, timeout=300)
    torch.testing.assert_close(torch.load(tmp_path / "out.pt"), want)


def test_bad_input_is_a_clear_error():
    with pytest.raises(TypeError, match="expected a function or nn.Module"):
        xcompile.export(3, torch.randn(2))
    with pytest.raises(ValueError, match="tracing_mode"):
        xcompile.export(flat, torch.randn(2, 2), torch.randn(2, 2), aten_graph=True, tracing_mode="bogus")
