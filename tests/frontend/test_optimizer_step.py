"""``optimizer.step()`` captured (issue #32).

Before, ``xcompile.explain(lambda: opt.step())()`` gave 0 graphs: torch.optim's functions were
taken for torch operators ("passing object of type AdamW to a torch operator"), torch.optim's
frames were skipped as torch's own after the break its grad-mode wrapper makes
(``torch._dynamo.graph_break()``), its ``state`` dict is keyed by parameters ("dict with
non-constant keys"), the first step stores new parameter keys into it, and Adam's
``addcdiv_(..., value=<0-d tensor>)`` was a data-dependent operator. Now the step is one graph,
whose only breaks are the wrapper's own, as under torch.compile.
"""
import copy
import warnings

import pytest
import torch

import xcompile
from xcompile.testing import CompileCounterWithBackend

pytestmark = pytest.mark.usefixtures("fresh_compilers")

OPTIMIZERS = {
    "sgd": lambda ps: torch.optim.SGD(ps, lr=0.1),
    "sgd-nesterov": lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01),
    "adam": lambda ps: torch.optim.Adam(ps, lr=1e-2),
    "adamw": lambda ps: torch.optim.AdamW(ps, lr=1e-2, weight_decay=0.1),
    "rmsprop": lambda ps: torch.optim.RMSprop(ps, lr=1e-2, momentum=0.5),
    "adagrad": lambda ps: torch.optim.Adagrad(ps, lr=1e-2),
    # the multi-tensor (foreach) and fused variants: foreach Adam's stacked step sizes reach
    # torch._foreach_addcdiv_ as a tensor, whose fake kernel cannot run (frontend/optim_ops.py)
    "adamw-foreach": lambda ps: torch.optim.AdamW(ps, lr=1e-2, weight_decay=0.1, foreach=True),
    "adam-foreach": lambda ps: torch.optim.Adam(ps, lr=1e-2, foreach=True),
    "sgd-foreach": lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, foreach=True),
    "rmsprop-foreach": lambda ps: torch.optim.RMSprop(ps, lr=1e-2, momentum=0.5, foreach=True),
    "adamw-fused": lambda ps: torch.optim.AdamW(ps, lr=1e-2, weight_decay=0.1, fused=True),
    "adam-fused-amsgrad-maximize": lambda ps: torch.optim.Adam(ps, lr=1e-2, weight_decay=0.1, fused=True,
                                                               amsgrad=True, maximize=True),
}
# Under compile an optimizer keeps its step count a tensor (torch.optim's _get_value), so Adam's
# bias corrections are float32 tensor math where eager uses Python floats (torch.compile too).
TOLERANCE = {k: dict(rtol=1e-5, atol=1e-6) for k in OPTIMIZERS if k.startswith("adam")}
CASES = [(k, "eager") for k in OPTIMIZERS] + [(k, "aot_eager") for k in OPTIMIZERS] + \
    [("adamw", "inductor"), ("sgd-nesterov", "inductor"), ("adamw-foreach", "inductor"), ("adamw-fused", "inductor"),
     ("adam-fused-amsgrad-maximize", "inductor")]
# Fallbacks expected (the graph run as it is, with a warning), each with its reason: none. (A
# fused Adam's step is traced as its math: frontend/optim_ops.py; torch's functionalization of
# _fused_adamw_ without amsgrad asserts.)
EXPECTED_FALLBACK: dict[tuple[str, str], str] = {}


def _model():
    return torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh(), torch.nn.Linear(5, 3))


def _only_wrapper_breaks(explained) -> bool:
    return all("graph_break()" in str(b) for b in explained.break_reasons)


def _step_both(m, m_ref, step, opt_ref, tol) -> None:
    """One backward on fresh random input for both models, the eager step and the compiled one,
    then every parameter compared."""
    x = torch.randn(4, 6)
    m_ref(x).square().sum().backward()
    m(x).square().sum().backward()
    opt_ref.step()
    step()
    for a, b in zip(m.parameters(), m_ref.parameters()):
        torch.testing.assert_close(a, b, **tol)


@pytest.mark.parametrize("kind,backend", CASES)
def test_step_is_one_graph_and_agrees(kind, backend):
    torch.manual_seed(0)
    m_ref = _model()
    m = copy.deepcopy(m_ref)
    opt_ref, opt = OPTIMIZERS[kind](m_ref.parameters()), OPTIMIZERS[kind](m.parameters())
    cnt = CompileCounterWithBackend(backend)
    step = xcompile.compile(lambda: opt.step(), backend=cnt)
    tol = TOLERANCE.get(kind, dict(rtol=1e-6, atol=1e-7))
    counts = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(4):
            _step_both(m, m_ref, step, opt_ref, tol)
            opt_ref.zero_grad()
            opt.zero_grad()
            counts.append(cnt.frame_count)
    fallbacks = [str(w.message) for w in caught if "running this graph eagerly" in str(w.message)]
    expected = EXPECTED_FALLBACK.get((kind, backend))
    assert all(expected and expected in f for f in fallbacks) and bool(fallbacks) == bool(expected), fallbacks
    assert counts[-1] == counts[-2] <= 2, f"recompiled after the state was made: {counts}"
    assert cnt.op_count > 0
    for p, p_ref in zip(m.parameters(), m_ref.parameters()):
        st, st_ref = opt.state[p], opt_ref.state[p_ref]
        assert list(st) == list(st_ref)
        for k in st:
            torch.testing.assert_close(torch.as_tensor(st[k]), torch.as_tensor(st_ref[k]), **tol)
    m(torch.randn(4, 6)).sum().backward()
    explained = xcompile.explain(lambda: opt.step())()
    assert explained.graph_count == 1 and _only_wrapper_breaks(explained), str(explained)


def test_state_keyed_by_one_element_tensors_is_told_apart():
    """An outside dict keyed by tensors: its keys are guarded by identity. Tensor ``==`` is
    elementwise; a one-element key equal in value to the old one must not pass for it."""
    a, b = torch.tensor([1.0]), torch.tensor([1.0])
    state = {a: torch.tensor([10.0])}
    cnt = CompileCounterWithBackend("eager")

    def f(x):
        total = x
        for k, v in state.items():
            total = total + k * v
        return total

    cf = xcompile.compile(f, backend=cnt, fullgraph=True)
    x = torch.zeros(1)
    torch.testing.assert_close(cf(x), f(x))
    state.clear()
    state[b] = torch.tensor([20.0])
    torch.testing.assert_close(cf(x), f(x))
    assert cnt.frame_count == 2


def test_lookup_by_a_parameter_reads_its_entry():
    m = torch.nn.Linear(3, 3)
    state = {p: torch.full_like(p, float(i + 1)) for i, p in enumerate(m.parameters())}

    def f():
        return [p * state[p] for p in m.parameters()]

    cf = xcompile.compile(f, backend="eager", fullgraph=True)
    for got, ref in zip(cf(), f()):
        torch.testing.assert_close(got, ref)
    state[m.bias] = torch.zeros(3)                 # a value changed: the same keys, read again
    for got, ref in zip(cf(), f()):
        torch.testing.assert_close(got, ref)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_new_parameter_keys_stored_into_an_outside_dict(backend):
    """An optimizer's first step makes its state: entries keyed by the parameters themselves."""
    import collections
    m = torch.nn.Linear(2, 2)
    state: dict = collections.defaultdict(dict)

    def init():
        for p in m.parameters():
            s = state[p]
            if len(s) == 0:
                s["buf"] = torch.zeros_like(p)
            s["buf"].add_(p)

    cf = xcompile.compile(init, backend=backend)
    cf()
    cf()
    assert list(state) == list(m.parameters())
    assert all(k is p for k, p in zip(state, m.parameters()))
    for p in m.parameters():
        torch.testing.assert_close(state[p]["buf"], 2 * p.detach())


def test_captured_after_torch_compile_compiled_one():
    """torch.compile, once it compiled a step of an optimizer class, leaves a disabled wrapper on
    that class's ``_init_group`` for good; xcompile traces the function it wraps (it was a
    'torch.compiler.disable()d function' break, and every later step ran eagerly)."""
    m = _model()
    m(torch.randn(2, 6)).sum().backward()
    torch.compile(torch.optim.Adagrad(m.parameters()).step, backend="eager")()
    assert getattr(torch.optim.Adagrad._init_group, "_torchdynamo_disable", False)
    opt = torch.optim.Adagrad(m.parameters())
    opt.step()
    explained = xcompile.explain(lambda: opt.step())()
    assert explained.graph_count == 1 and _only_wrapper_breaks(explained), str(explained)


def test_fused_step_captured_after_torch_compile_ran():
    """The first torch.compile in a process disables ``torch.optim.<opt>._fused_<opt>`` in every
    optimizer module for good (torch._dynamo: "don't trace into fused optimizer"); xcompile traces
    the function it wraps. Before, a fused AdamW step broke at the fused call, in any process that
    had run torch.compile."""
    torch.compile(lambda x: x + 1, backend="eager")(torch.ones(1))
    import torch.optim.adam as adam_mod  # (AdamW's fused step is Adam's _fused_adam)
    assert getattr(adam_mod._fused_adam, "_torchdynamo_disable", False)
    torch.manual_seed(0)
    m_ref = _model()
    m = copy.deepcopy(m_ref)
    opt_ref, opt = OPTIMIZERS["adamw-fused"](m_ref.parameters()), OPTIMIZERS["adamw-fused"](m.parameters())
    step = xcompile.compile(lambda: opt.step(), backend="eager")
    for _ in range(3):
        _step_both(m, m_ref, step, opt_ref, TOLERANCE["adamw-fused"])
    explained = xcompile.explain(lambda: opt.step())()
    assert explained.graph_count == 1 and _only_wrapper_breaks(explained), str(explained)
