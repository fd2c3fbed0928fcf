"""trace_frame-level checks of the breadth features: exception unwinding, side-effect plans,
dict-key guards, lazy generators, autocast nodes, context managers."""
import contextlib

import pytest
import torch

from xcompile.frontend.exc import PythonError, Unsupported

from .helpers import trace


def r(*shape):
    return torch.randn(*shape)


# -- exceptions -------------------------------------------------------------------------------------------------
def test_uncaught_exception_is_a_python_error_with_the_users_line():
    def fn(x):
        raise KeyError("missing")
    with pytest.raises(PythonError) as ei:
        trace(fn, r(2))
    assert "KeyError" in ei.value.reason and "missing" in ei.value.reason
    assert ei.value.user_stack[-1].line == 'raise KeyError("missing")'


def test_exception_unwinds_through_inlined_frames_to_the_handler():
    def inner(x):
        return [x][3]

    def middle(x):
        y = x * 2
        return inner(y) + 1

    def fn(x):
        try:
            return middle(x)
        except IndexError:
            return x - 1
    c = trace(fn, r(2))
    assert [n.target.__name__ for n in c.gm.graph.nodes if n.op == "call_function"] == ["mul", "sub"]


def test_bare_raise_reraises_the_exception_being_handled():
    def fn(x):
        try:
            try:
                raise ValueError("first")
            except ValueError:
                try:
                    raise KeyError("second")
                except KeyError:
                    pass
                raise                     # the ValueError again, not the KeyError
        except ValueError as e:
            return x + 1, e.args[0]
        except KeyError:
            return x - 1, "wrong"
    assert trace(fn, r(2)).output[1][1] == ("const", "first")


def test_graph_break_is_never_caught_by_except_exception():
    def fn(x):
        try:
            return x.item()
        except Exception:  # noqa: BLE001  (whatever the program under test raises)
            return 0
    with pytest.raises(Unsupported) as ei:
        trace(fn, r(1))
    assert not isinstance(ei.value, PythonError)


# -- side effects ------------------------------------------------------------------------------------------------
class Obj:
    pass


def test_side_effect_plan_slots_and_outputs():
    def fn(o, xs, x):
        o.y = x * 2
        xs.append(x + 1)
        return x
    c = trace(fn, Obj(), [r(2)], r(2))
    plan = c.side_effects
    assert plan.described == ["L['o']: set attributes y", "L['xs']: list contents"]
    assert plan.n_objects == 2                         # o and xs (only appended to: its items are not fetched)
    assert [s.name() for s in c.passthrough_sources[:2]] == ["L['o']", "L['xs']"]
    outs = [n.name for n in c.gm.graph.output_node().args[0]]
    assert outs == ["mul", "add", "l_x"]               # effect tensors first, then the result


def test_write_only_attribute_needs_no_guard_on_it():
    def fn(o, x):
        o.cache = x * 2
        return x
    guards = str(trace(fn, Obj(), r(2)).guards)
    assert "L['o'].cache" not in guards and "TYPE_MATCH: L['o']" in guards


def test_no_effects_no_plan():
    def fn(xs):
        ys = list(xs)
        ys.append(1)
        return ys
    assert trace(fn, [1, 2]).side_effects is None


# -- guards ------------------------------------------------------------------------------------------------------
def test_dict_input_guard_lists_its_keys_in_order():
    def fn(d):
        return d["b"] * 2
    guards = str(trace(fn, {"b": r(2), "a": 1}).guards)
    assert "DICT_KEYS: L['d'] ('b', 'a')" in guards


# -- generators and contexts ---------------------------------------------------------------------------------------
def test_generator_runs_only_as_far_as_consumed():
    seen = []

    def gen(x):
        for i in range(100):
            seen.append(i)                 # a real list from the closure: a side effect
            yield x * i

    def fn(x):
        g = gen(x)
        return next(g) + next(g)
    c = trace(fn, r(2))
    muls = [n for n in c.gm.graph.nodes if n.op == "call_function" and n.target.__name__ == "mul"]
    assert len(muls) == 2
    assert c.side_effects.described == ["C['gen'].__closure__[0].cell_contents: list contents"]


def test_autocast_block_is_bracketed_by_nodes():
    def fn(x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = x @ x
        return y
    c = trace(fn, r(3, 3))
    targets = [n.target for n in c.gm.graph.nodes if n.op == "call_function"]
    assert targets[0] is torch.amp._enter_autocast and targets[-1] is torch.amp._exit_autocast
    mm = [n for n in c.gm.graph.nodes if n.op == "call_function" and n.target.__name__ == "matmul"][0]
    assert mm.meta["example_value"].dtype == torch.bfloat16


@contextlib.contextmanager
def _fails_on_exit():
    yield
    raise RuntimeError("in exit")


def test_contextmanager_error_after_yield_propagates():
    def fn(x):
        try:
            with _fails_on_exit():
                y = x + 1
        except RuntimeError as e:
            return y * 2, str(e)
    assert trace(fn, r(2)).output[1][1] == ("const", "in exit")


class _Ctx:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return True                       # suppresses everything


def test_user_context_manager_suppression_continues_after_the_block():
    def fn(x):
        with _Ctx():
            x = x + 1
            raise ValueError
        return x * 3
    c = trace(fn, r(2))
    names = [n.target.__name__ for n in c.gm.graph.nodes if n.op == "call_function"]
    assert names == ["add", "mul"]
