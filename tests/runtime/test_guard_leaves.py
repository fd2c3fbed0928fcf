"""Every guard leaf passes when it should and fails when it must."""
import pytest
import torch
import torch.nn as nn
import torch.nn.modules.module as nn_module

import xcompile._C as C

from .runtime_helpers import check


def one_leaf(add, n_slots=0):
    root = C.RootGuard(n_slots)
    add(root.local(0, "v"))
    return root


# ---- type / id / length ---------------------------------------------------------------------

def test_type_match():
    root = one_leaf(lambda n: n.add_type_match(int, "TYPE int"))
    assert check(root, 3)
    assert not check(root, True)  # exact type: bool is not int
    assert not check(root, "3")
    assert root.last_failure() == "TYPE int"
    with pytest.raises(TypeError):
        one_leaf(lambda n: n.add_type_match(3, "not a type"))


def test_id_match_keeps_object_alive():
    obj = object()
    root = one_leaf(lambda n: n.add_id_match(obj, "ID obj"))  # noqa: F821
    assert check(root, obj)
    assert not check(root, object())
    assert root.weak_objects() == []  # no weak references to it: held strongly
    del obj  # the leaf holds a strong reference: no address reuse can fool it
    assert not check(root, object())


def test_id_match_and_type_match_hold_objects_weakly():
    import gc
    import weakref

    class Thing:
        pass

    def make():
        def fn():
            pass
        return fn

    fn, thing = make(), Thing()
    root = one_leaf(lambda n: n.add_id_match(fn, "ID fn"))  # noqa: F821
    troot = one_leaf(lambda n: n.add_type_match(Thing, "TYPE Thing"))  # noqa: F821
    assert check(root, fn) and check(troot, thing)
    assert root.weak_objects() == [fn] and troot.weak_objects() == [Thing]
    refs, old_id = [weakref.ref(fn), weakref.ref(Thing)], id(fn)
    del fn, thing, Thing
    gc.collect()
    assert all(r() is None for r in refs)
    assert root.weak_objects() == [] and troot.weak_objects() == []
    # a dead object never matches, even a new one that took its address
    reused = False
    for _ in range(50):
        new = make()
        reused |= id(new) == old_id
        assert not check(root, new)
    if not reused:     # (allocation order decides it: then the loop above proved less, say so)
        pytest.skip("CPython did not reuse the dead function's address in 50 allocations")


@pytest.mark.parametrize("value,n,ok", [
    ([1, 2], 2, True), ([1], 2, False), ((1, 2, 3), 3, True), ((), 1, False),
    ({"a": 1}, 1, True), ({}, 1, False), ("abc", 3, True), (range(4), 4, True),
])
def test_length_check(value, n, ok):
    root = one_leaf(lambda node: node.add_length_check(n, f"LEN {n}"))
    assert check(root, value) is ok


def test_length_check_on_objects_without_or_with_raising_len():
    class Bad:
        def __len__(self):
            raise RuntimeError("no")

    root = one_leaf(lambda n: n.add_length_check(0, "LEN 0"))
    assert not check(root, Bad())
    assert not check(root, 5)


# ---- equals ---------------------------------------------------------------------------------

EQUALS_CASES = [
    # (constant, equal value of the same type, values that must fail)
    (None, None, [0, False, ""]),
    (True, True, [False, 1]),
    (False, False, [True, 0, None]),
    (7, 7, [8, 7.0, True]),
    (2**70, 2**70, [2**70 + 1]),
    (1.5, 1.5, [1.25, "1.5"]),
    (0.0, 0.0, [-0.0, 0]),
    (float("inf"), float("inf"), [float("-inf")]),
    (float("nan"), float("nan"), [1.0]),
    ("abc", "ab" + "c", ["abd", b"abc"]),
    (b"xy", b"x" + b"y", [b"xz", "xy"]),
    (torch.float32, torch.float32, [torch.float64, torch.int32, "torch.float32"]),
    (torch.device("cpu"), torch.device("cpu"), [torch.device("meta"), "cpu"]),
    (torch.device("cuda", 0), torch.device("cuda:0"), [torch.device("cuda", 1), torch.device("cuda")]),
    ((1, "a", (2.0, None)), (1, "a", (2.0, None)), [(1, "a", (2.0, 0)), (1, "a"), [1, "a", (2.0, None)]]),
    ((), (), [(1,), []]),
]


@pytest.mark.parametrize("const,same,others", EQUALS_CASES, ids=[repr(c[0]) for c in EQUALS_CASES])
def test_equals_match(const, same, others):
    root = one_leaf(lambda n: n.add_equals_match(const, f"EQ {const!r}"))
    assert check(root, const)
    assert check(root, same)
    for other in others:
        assert not check(root, other), other
    assert root.last_failure() == f"EQ {const!r}"


def test_equals_match_rejects_unsupported_constants():
    for bad in ([1], {"a": 1}, object(), (1, [2]), torch.ones(1)):
        with pytest.raises(TypeError):
            one_leaf(lambda n: n.add_equals_match(bad, "EQ"))


def test_equals_subclass_is_not_equal():
    class MyInt(int):
        pass

    root = one_leaf(lambda n: n.add_equals_match(3, "EQ 3"))
    assert not check(root, MyInt(3))


# ---- tensors --------------------------------------------------------------------------------

def tensor_root(example, **kw):
    return one_leaf(lambda n: n.add_tensor_match(example, "TENSOR v", **kw))


def test_tensor_match_passes_on_same_metadata_new_values():
    root = tensor_root(torch.randn(2, 3))
    assert check(root, torch.randn(2, 3))
    assert check(root, torch.zeros(2, 3))


@pytest.mark.parametrize("other", [
    pytest.param(lambda: torch.randn(2, 3, dtype=torch.float64), id="dtype"),
    pytest.param(lambda: torch.randn(3, 2), id="shape"),
    pytest.param(lambda: torch.randn(2, 3, 1), id="ndim"),
    pytest.param(lambda: torch.randn(3, 2).t(), id="stride"),
    pytest.param(lambda: torch.randn(2, 3, device="meta"), id="device"),
    pytest.param(lambda: torch.randn(2, 3, requires_grad=True), id="requires_grad"),
    pytest.param(lambda: nn.Parameter(torch.randn(2, 3), requires_grad=False), id="parameter"),
    pytest.param(lambda: [1, 2], id="not-a-tensor"),
    pytest.param(lambda: None, id="none"),
])
def test_tensor_match_fails(other):
    root = tensor_root(torch.randn(2, 3))
    assert not check(root, other())
    assert root.last_failure() == "TENSOR v"


def test_tensor_match_exact_python_type():
    class Sub(torch.Tensor):
        pass

    p = nn.Parameter(torch.randn(4))
    root = tensor_root(p)
    assert check(root, nn.Parameter(torch.randn(4)))
    assert not check(root, torch.randn(4, requires_grad=True))
    root = tensor_root(torch.randn(4))
    assert not check(root, torch.randn(4).as_subclass(Sub))
    root = tensor_root(torch.randn(4).as_subclass(Sub))
    assert check(root, torch.randn(4).as_subclass(Sub))


def test_tensor_match_noncontiguous_example_and_views():
    base = torch.randn(4, 6)
    example = base[:, ::2]  # sizes (4, 3), strides (6, 2)
    root = tensor_root(example)
    assert check(root, torch.randn(4, 6)[:, ::2])
    assert not check(root, torch.randn(4, 3))
    assert check(root, torch.randn(4, 6)[1:, ::2].new_empty(4, 6)[:, ::2])


def test_tensor_match_dispatch_keys():
    root = tensor_root(torch.randn(3))
    with torch.inference_mode():
        inference_tensor = torch.randn(3)
    assert not check(root, inference_tensor)  # inference tensors lack the autograd keys


def test_tensor_match_dynamic_dims():
    root = tensor_root(torch.randn(2, 3), sizes=[None, 3], strides=[None, 1])
    assert check(root, torch.randn(7, 3))
    assert not check(root, torch.randn(7, 4))
    assert not check(root, torch.randn(3, 7).t())  # stride of dim 1 is not 1
    with pytest.raises(ValueError):
        tensor_root(torch.randn(2, 3), sizes=[None])
    with pytest.raises(TypeError):
        tensor_root([1, 2])


def test_tensor_match_scalar_and_empty():
    root = tensor_root(torch.tensor(1.0))
    assert check(root, torch.tensor(5.0))
    assert not check(root, torch.tensor([5.0]))
    root = tensor_root(torch.empty(0, 3))
    assert check(root, torch.empty(0, 3))
    assert not check(root, torch.empty(1, 3))


# ---- dicts ----------------------------------------------------------------------------------

def test_dict_unchanged():
    d = {"a": 1, "b": [2]}
    root = one_leaf(lambda n: n.add_dict_unchanged(d, "DICT d"))
    assert check(root, d)
    assert not check(root, dict(d))  # equal but another object
    d["a"] = 1  # version bumps, contents identical
    assert check(root, d)
    d["b"] = [2]  # a new (equal) list object: identity differs
    assert not check(root, d)


def test_dict_unchanged_detects_add_delete_and_reorder():
    value = object()
    d = {"a": value, "b": 2}
    root = one_leaf(lambda n: n.add_dict_unchanged(d, "DICT d"))
    d["c"] = 3
    assert not check(root, d)
    del d["c"]
    assert check(root, d)  # back to the snapshot
    del d["a"]
    d["a"] = value  # same pairs, different order
    assert not check(root, d)
    with pytest.raises(TypeError):
        one_leaf(lambda n: n.add_dict_unchanged([1], "x"))


# ---- module trees ---------------------------------------------------------------------------

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.seq = nn.Sequential(nn.ReLU(), nn.Linear(3, 2))
        self.register_buffer("buf", torch.zeros(2))
        self.scale = 2


def module_root(m):
    return one_leaf(lambda n: n.add_module_tree(m, "MODULE m"))


def test_module_tree_identity():
    m = Net()
    root = module_root(m)
    assert check(root, m)
    assert not check(root, Net())
    assert root.last_failure() == "MODULE m"


@pytest.mark.parametrize("mutate", [
    pytest.param(lambda m: setattr(m, "scale", 3), id="attribute-reassigned"),
    pytest.param(lambda m: setattr(m, "new_attr", 1), id="attribute-added"),
    pytest.param(lambda m: delattr(m, "scale"), id="attribute-deleted"),
    pytest.param(lambda m: setattr(m.lin, "weight", nn.Parameter(torch.randn(3, 3))), id="param-replaced"),
    pytest.param(lambda m: setattr(m.seq[1], "bias", None), id="param-set-none"),
    pytest.param(lambda m: setattr(m, "buf", torch.ones(2)), id="buffer-replaced"),
    pytest.param(lambda m: setattr(m, "extra", nn.Linear(1, 1)), id="submodule-added"),
    pytest.param(lambda m: m.seq.append(nn.Tanh()), id="nested-submodule-added"),
    pytest.param(lambda m: setattr(m.seq, "0", nn.Tanh()), id="submodule-replaced"),
    pytest.param(lambda m: m.seq[1].register_forward_hook(lambda *a: None), id="forward-hook"),
    pytest.param(lambda m: m.register_forward_pre_hook(lambda *a: None), id="forward-pre-hook"),
    pytest.param(lambda m: m.lin.register_full_backward_hook(lambda *a: None), id="backward-hook"),
    pytest.param(lambda m: m.train(False), id="eval"),
])
def test_module_tree_detects_changes(mutate):
    m = Net()
    root = module_root(m)
    assert check(root, m)
    mutate(m)
    assert not check(root, m)


def test_module_tree_ignores_inplace_parameter_updates():
    m = Net()
    root = module_root(m)
    with torch.no_grad():
        m.lin.weight.add_(1.0)
        m.buf.fill_(3.0)
    assert check(root, m)


@pytest.mark.parametrize("register", [
    nn_module.register_module_forward_hook,
    nn_module.register_module_forward_pre_hook,
    nn_module.register_module_full_backward_hook,
])
def test_module_tree_global_hooks(register):
    m = Net()
    root = module_root(m)
    handle = register(lambda *a: None)
    try:
        assert not check(root, m)
    finally:
        handle.remove()
    assert check(root, m)  # the hook dict is back to its traced contents


def test_module_tree_hook_removed_restores():
    m = Net()
    root = module_root(m)
    handle = m.lin.register_forward_hook(lambda *a: None)
    assert not check(root, m)
    handle.remove()
    assert check(root, m)


def test_module_tree_eval_twice_passes_after_recompile():
    m = Net()
    train_guard = module_root(m)
    m.eval()
    assert not check(train_guard, m)  # first eval(): training flags changed -> recompile
    eval_guard = module_root(m)  # the recompiled entry's guard
    m.eval()  # every __dict__ version bumps, contents are identical
    assert check(eval_guard, m)
    assert check(eval_guard, m)
    m.train()
    assert not check(eval_guard, m)
    assert check(train_guard, m)


def test_module_tree_holds_the_module_weakly():
    import gc
    import weakref

    m = Net()
    refs = [weakref.ref(m), weakref.ref(m.lin)]
    root = module_root(m)
    assert root.weak_objects() == [m]
    del m
    gc.collect()
    assert refs[0]() is None              # the guard does not keep the module alive
    assert root.weak_objects() == []
    assert not check(root, Net())         # nor does a dead module match anything
    for _ in range(20):                   # ... not even a new module at its address
        n = Net()
        assert not check(root, n)
    del root, n
    gc.collect()
    assert refs[1]() is None              # the watched dicts (and what they hold) are released with it


def test_dict_unchanged_survives_resizes():
    d = {f"k{i}": i for i in range(5)}
    root = one_leaf(lambda n: n.add_dict_unchanged(d, "DICT d"))
    for i in range(2000):  # forces several table resizes
        d[f"extra{i}"] = i
    assert not check(root, d)
    for i in range(2000):
        del d[f"extra{i}"]
    assert check(root, d)  # same pairs, same order again
    d.clear()
    assert not check(root, d)
