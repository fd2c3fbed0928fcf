"""Nested compiled functions, and exceptions raised inside compiled code reaching the caller
unchanged (same object, message, cause and traceback to the user's line)."""
import threading
import traceback

import pytest
import torch
import torch.nn as nn


class MyError(Exception):
    def __init__(self, msg, code):
        super().__init__(msg)
        self.code = code


PREBUILT = MyError("prebuilt", 7)


def raises_prebuilt(x):
    y = x + 1
    if x.shape[0] == 3:
        raise PREBUILT  # RAISE-LINE
    return y


def raises_with_cause(x):
    try:
        {}["missing"]
    except KeyError as e:
        raise ValueError(f"wrapped {x.shape[0]}") from e


def _deep(x, depth):
    if depth == 0:
        raise MyError(f"deep {x.dim()}", depth)  # RAISE-LINE
    return _deep(x * 2, depth - 1)


def raises_from_helper(x):
    return _deep(x + 1, 3)


def _raise_line(fn):
    import inspect
    src, start = inspect.getsourcelines(fn)
    return start + next(i for i, line in enumerate(src) if "RAISE-LINE" in line)


def test_prebuilt_exception_object_reaches_caller(cc):
    cnt = cc.counter()
    f = cc.compile(raises_prebuilt, cnt)
    with pytest.raises(MyError) as info:
        f(torch.randn(3))
    assert info.value is PREBUILT and info.value.code == 7
    last = traceback.extract_tb(info.value.__traceback__)[-1]
    assert (last.name, last.lineno) == ("raises_prebuilt", _raise_line(raises_prebuilt))
    # and the same function still works on inputs that do not raise
    x = torch.randn(4)
    torch.testing.assert_close(f(x), raises_prebuilt(x))


def test_exception_cause_kept(cc):
    f = cc.compile(raises_with_cause, cc.counter())
    with pytest.raises(ValueError, match="wrapped 2") as info:
        f(torch.randn(2))
    assert isinstance(info.value.__cause__, KeyError)


def test_exception_from_inlined_helper(cc):
    f = cc.compile(raises_from_helper, cc.counter())
    with pytest.raises(MyError, match="deep 1") as info:
        f(torch.randn(2))
    assert info.value.code == 0
    last = traceback.extract_tb(info.value.__traceback__)[-1]
    assert (last.filename, last.lineno) == (__file__, _raise_line(_deep))


def test_keyboard_interrupt_from_user_code(cc):
    def interrupted(x):
        y = x * 2
        raise KeyboardInterrupt
        return y

    f = cc.compile(interrupted, cc.counter())
    with pytest.raises(KeyboardInterrupt):
        f(torch.randn(2))


def _index(x, i):
    return x[i] * 2


def test_runtime_error_in_compiled_graph_matches_eager(cc):
    """An error raised while the compiled graph runs has eager's type and message."""
    cnt = cc.counter()
    f = cc.compile(_index, cnt, fullgraph=True)
    x = torch.randn(3)
    torch.testing.assert_close(f(x, torch.tensor([0, 2])), _index(x, torch.tensor([0, 2])))
    bad = torch.tensor([0, 5])
    with pytest.raises(Exception) as eager_info:
        _index(x, bad)
    with pytest.raises(Exception) as compiled_info:
        f(x, bad)
    assert type(compiled_info.value) is type(eager_info.value)
    assert str(compiled_info.value) == str(eager_info.value)
    assert cnt.frame_count == 1
    torch.testing.assert_close(f(x, torch.tensor([1, 0])), _index(x, torch.tensor([1, 0])))
    assert cnt.frame_count == 1


def _add(a, b):
    return a + b


def test_shape_error_at_trace_time_is_a_runtime_error(cc):
    f = cc.compile(_add, cc.counter(), fullgraph=True)
    with pytest.raises(RuntimeError) as eager_info:
        _add(torch.randn(3), torch.randn(4))
    with pytest.raises(RuntimeError) as info:
        f(torch.randn(3), torch.randn(4))
    if cc.name == "xcompile":  # torch.compile wraps it in a TorchRuntimeError with its own text
        assert str(eager_info.value) in str(info.value)
    x, y = torch.randn(3), torch.randn(3)
    torch.testing.assert_close(f(x, y), x + y)


def test_caller_can_catch_and_continue(cc):
    cnt = cc.counter()
    f = cc.compile(raises_prebuilt, cnt)
    for _ in range(3):
        try:
            f(torch.randn(3))
        except MyError:
            pass
    x = torch.randn(5)
    torch.testing.assert_close(f(x), raises_prebuilt(x))


# --------------------------------------------------------------------------- nesting


def _inner(x):
    return x.sin() * 2


def test_compiled_function_called_inside_compiled_function(cc):
    inner_cnt, outer_cnt = cc.counter(), cc.counter()
    inner = cc.compile(_inner, inner_cnt, fullgraph=True)

    def outer(x):
        return inner(x) + inner(x + 1)

    f = cc.compile(outer, outer_cnt, fullgraph=True)
    x = torch.randn(4)
    torch.testing.assert_close(f(x), _inner(x) + _inner(x + 1))
    assert outer_cnt.frame_count == 1, "the inner compiled function is inlined into the outer graph"
    assert inner_cnt.frame_count == 0
    torch.testing.assert_close(inner(x), _inner(x))
    assert inner_cnt.frame_count == 1, "called on its own, the inner function compiles with its backend"
    f(torch.randn(4))
    assert outer_cnt.frame_count == 1


def test_compiled_module_inside_compiled_function(cc):
    torch.manual_seed(0)
    mod = nn.Sequential(nn.Linear(3, 3), nn.ReLU())
    opt_mod = cc.compile(mod, cc.counter())
    cnt = cc.counter()

    def step(x):
        return opt_mod(x).sum(0) + 1

    f = cc.compile(step, cnt, fullgraph=True)
    x = torch.randn(2, 3)
    torch.testing.assert_close(f(x), mod(x).sum(0) + 1)
    assert cnt.frame_count == 1


def test_same_function_compiled_twice_with_different_backends(cc):
    c1, c2 = cc.counter(), cc.counter()
    f1 = cc.compile(_inner, c1, fullgraph=True)
    f2 = cc.compile(_inner, c2, fullgraph=True)
    x = torch.randn(3)
    torch.testing.assert_close(f1(x), _inner(x))
    torch.testing.assert_close(f2(x), _inner(x))
    assert c1.frame_count >= 1
    assert c1.frame_count + c2.frame_count <= 2


def test_compiled_function_in_threads(cc):
    cnt = cc.counter()
    f = cc.compile(_inner, cnt, fullgraph=True)
    f(torch.randn(3))
    errors, results = [], []

    def work(seed):
        try:
            g = torch.Generator().manual_seed(seed)
            for _ in range(20):
                x = torch.randn(3, generator=g)
                results.append(torch.equal(f(x), _inner(x)))
        except BaseException as e:  # noqa: BLE001  (reported below)
            errors.append(e)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len(results) == 80 and all(results)
    assert cnt.frame_count == 1
