"""The harness must be able to fail: each property it claims to check is broken on purpose here.
Runs without xcompile (fake compilers), so it also guards the table against nondeterminism."""
import pytest
import torch

from .cases import ALL_CASES
from .harness import Case, Compiler, assert_same, rn, run_case


class _Count:
    def __init__(self):
        self.frame_count = 0
        self.op_count = 0


class FakeCompiler(Compiler):
    """'Compiles' by wrapping the program; ``wrap`` decides what goes wrong."""

    name = "fake"

    def __init__(self, wrap=None, frames=1):
        self.wrap = wrap or (lambda fn: fn)
        self.frames = frames

    def reset(self):
        pass

    def counter(self):
        return _Count()

    def compile(self, fn, backend):
        inner = self.wrap(fn)
        calls = []

        def compiled(*args, **kwargs):
            calls.append(1)
            backend.frame_count = min(len(calls), self.frames)
            backend.op_count = 1
            return inner(*args, **kwargs)
        return compiled


@pytest.mark.parametrize("case", ALL_CASES, ids=[c.name for c in ALL_CASES])
def test_table_is_deterministic_under_eager(case):
    """Two builds and two input draws from one seed agree: a failure is never the table's own noise."""
    run_case(case, FakeCompiler())


def _by_name(name) -> Case:
    return next(c for c in ALL_CASES if c.name == name)


def test_detects_wrong_values():
    wrong = FakeCompiler(lambda fn: (lambda *a, **k: torch.utils._pytree.tree_map(
        lambda t: t + 1e-3 if isinstance(t, torch.Tensor) and t.is_floating_point() else t, fn(*a, **k))))
    with pytest.raises(AssertionError, match="out"):
        run_case(_by_name("arith.add"), wrong)


def test_detects_recompile():
    with pytest.raises(AssertionError, match="recompiled"):
        run_case(_by_name("arith.add"), FakeCompiler(frames=2))


def test_detects_missing_input_mutation():
    def on_copies(fn):
        return lambda *a, **k: fn(*[x.clone() if isinstance(x, torch.Tensor) else x for x in a], **k)
    with pytest.raises(AssertionError, match="inputs after call"):
        run_case(_by_name("state.inplace_input_not_returned"), FakeCompiler(on_copies))


def test_detects_lost_aliasing():
    def detached(fn):
        return lambda *a, **k: fn(*a, **k).clone()
    with pytest.raises(AssertionError, match="aliases input"):
        run_case(_by_name("views.view_returned_aliases_input"), FakeCompiler(detached))


def test_detects_missing_module_state_update():
    def frozen_buffers(mod):
        def call(*a):
            saved = {k: v.clone() for k, v in mod.named_buffers()}
            out = mod(*a)
            with torch.no_grad():
                for k, v in mod.named_buffers():
                    v.copy_(saved[k])
            return out
        return call
    with pytest.raises(AssertionError, match="module state"):
        run_case(_by_name("module.inplace_buffer_update"), FakeCompiler(frozen_buffers))


def test_detects_wrong_gradients():
    def no_grad_path(fn):
        return lambda *a: fn(*[x.detach() * 1 + x * 0.5 if isinstance(x, torch.Tensor) else x for x in a])
    with pytest.raises(AssertionError):
        run_case(_by_name("arith.arith_with_grad"), FakeCompiler(no_grad_path))


@pytest.mark.parametrize("actual, expected, needle", [
    (torch.zeros(2, 3), torch.zeros(2, 3, dtype=torch.float64), "dtype"),
    (torch.zeros(3, 2).t(), torch.zeros(2, 3), "stride"),
    (torch.zeros(2, 3), torch.zeros(3, 2), "shape"),
    (torch.zeros(2, requires_grad=True), torch.zeros(2), "requires_grad"),
    ((torch.zeros(2),), [torch.zeros(2)], "type"),
    ({"a": 1, "b": 2}, {"b": 2, "a": 1}, "keys"),
    ((1, 2), (1, 2, 3), "length"),
    ("x", "y", "eager"),
    (torch.Size([2]), torch.Size([3]), "eager"),
])
def test_assert_same_rejects(actual, expected, needle):
    with pytest.raises(AssertionError, match=needle):
        assert_same(actual, expected)


def test_assert_same_accepts_equal_nested():
    x = rn(2, 3).make()
    assert_same({"a": (x, [1, "s", torch.float32])}, {"a": (x.clone(), [1, "s", torch.float32])})


def test_detects_wrong_attribute_of_an_input_object():
    def skip_effects(fn):
        def run(s, a):
            import copy
            return fn(copy.copy(s), a)            # the effects land on a copy: the input is unchanged
        return run
    with pytest.raises(AssertionError, match=r"inputs after call.*__dict__\['x'\]"):
        run_case(_by_name("effects.object_attribute_assignment"), FakeCompiler(skip_effects))


def test_detects_wrong_program_state():
    def forget_global(fn):
        def run(*args):
            out = fn(*args)
            fn.__globals__["LAST"] = None         # as if the global write were lost
            return out
        return run
    with pytest.raises(AssertionError, match="program state after call"):
        run_case(_by_name("effects.global_rebound_to_tensor"), FakeCompiler(forget_global))
