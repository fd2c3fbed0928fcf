"""Exceptions raised and caught inside the compiled frame, and context managers: try/except/
else/finally, re-raise, exception attributes, errors from Python operations (KeyError,
IndexError, AttributeError, ZeroDivisionError, StopIteration), user context managers,
@contextlib.contextmanager, torch.autocast and the grad modes."""
import contextlib

import torch

from .harness import CaseTable, rg, rn

T = CaseTable("exc")


class ShapeError(ValueError):
    pass


class Retry(Exception):
    def __init__(self, factor):
        super().__init__(factor)
        self.factor = factor


def _check_2d(x):
    if x.dim() != 2:
        raise ShapeError("need 2d")
    return x


@T.case(rn(3, 4))
def try_except_value_error(a):
    try:
        raise ValueError("bad")
    except ValueError:
        a = a * 2
    return a


@T.case(rn(3, 4))
def except_as_reads_args(a):
    try:
        raise ValueError(3, "x")
    except ValueError as e:
        k, tag = e.args
    return a * k, tag


@T.case(rn(3, 4))
def except_tuple_of_classes(a):
    try:
        raise KeyError("k")
    except (TypeError, KeyError):
        return a + 1


@T.case(rn(3, 4))
def except_base_class_catches_subclass(a):
    try:
        _check_2d(a.flatten())
    except ValueError as e:
        return a * 2, str(e), type(e).__name__


@T.case(rn(3, 4))
def first_matching_handler_wins(a):
    try:
        raise ShapeError("x")
    except ShapeError:
        a = a + 1
    except ValueError:
        a = a + 100
    return a


@T.case(rn(3, 4))
def try_else_runs_without_exception(a):
    try:
        b = a * 2
    except ValueError:
        b = a
    else:
        b = b + 1
    return b


@T.case(rn(3, 4))
def try_finally_without_exception(a):
    try:
        b = a * 2
    finally:
        b = b - 1
    return b


@T.case(rn(3, 4))
def try_except_finally_with_exception(a):
    steps = []
    try:
        steps.append(1)
        raise RuntimeError("boom")
    except RuntimeError:
        steps.append(2)
    finally:
        steps.append(3)
    return a * len(steps), steps


@T.case(rn(3, 4))
def return_inside_finally_block_order(a):
    def inner(x):
        try:
            return x * 2
        finally:
            x.add_(0)                   # runs, but the return value was computed first
    return inner(a)


@T.case(rn(3, 4))
def exception_from_inlined_callee(a):
    def inner(x):
        raise Retry(3)

    try:
        inner(a)
    except Retry as r:
        return a * r.factor


@T.case(rn(3, 4))
def exception_through_two_frames(a):
    def deepest(x):
        return {"a": x}["missing"]

    def middle(x):
        return deepest(x) + 1

    try:
        return middle(a)
    except KeyError as e:
        return a - 1, e.args[0]


@T.case(rn(3, 4))
def caught_in_callee_not_seen_by_caller(a):
    def inner(x):
        try:
            raise IndexError
        except IndexError:
            return x * 5

    try:
        return inner(a)
    except IndexError:
        return a


@T.case(rn(3, 4))
def reraise_bare_is_caught_outside(a):
    try:
        try:
            raise TypeError("t")
        except TypeError:
            a = a + 1
            raise
    except TypeError:
        a = a * 2
    return a


@T.case(rn(3, 4))
def raise_from_sets_cause(a):
    try:
        try:
            raise KeyError("inner")
        except KeyError as e:
            raise ValueError("outer") from e
    except ValueError as e:
        return a + 1, type(e.__cause__).__name__


@T.case(rn(3, 4))
def raise_class_without_call(a):
    try:
        raise StopIteration
    except StopIteration:
        return a - 3


@T.case(rn(3))
def key_error_from_dict_lookup(a):
    table = {"x": 1}
    try:
        k = table["y"]
    except KeyError:
        k = 10
    return a * k


@T.case(rn(3))
def index_error_from_list(a):
    xs = [a, a * 2]
    try:
        return xs[5]
    except IndexError:
        return xs[-1]


class Box:
    pass


@T.case(rn(3))
def attribute_error_from_missing_attribute(a):
    b = Box()
    try:
        v = b.missing
    except AttributeError:
        v = 4
    return a * v


@T.case(rn(3))
def zero_division_from_constants(a):
    n = 0
    try:
        r = 10 / n
    except ZeroDivisionError:
        r = -1.0
    return a * r


@T.case(rn(3))
def stop_iteration_from_next(a):
    it = iter([1, 2])
    total = 0
    while True:
        try:
            total += next(it)
        except StopIteration:
            break
    return a * total


@T.case(rn(3))
def next_with_default(a):
    it = iter([])
    return a * next(it, 7)


@T.case(rn(3))
def value_error_from_unpacking(a):
    try:
        x, y = [1, 2, 3]
    except ValueError:
        x, y = 0, 1
    return a * x + y


@T.case(rn(3))
def value_error_from_int_parse(a):
    try:
        v = int("nope")
    except ValueError:
        v = 2
    return a * v


@T.case(rn(3))
def exception_in_loop_continue(a):
    out = a
    for i in range(4):
        try:
            if i % 2:
                raise ValueError(i)
            out = out + i
        except ValueError:
            continue
    return out


@T.case(rn(3))
def exception_state_restored_after_handler(a):
    try:
        raise ValueError("a")
    except ValueError:
        pass
    try:
        raise KeyError("b")
    except KeyError as e:
        return a + 1, e.args


@T.case(rn(3))
def nested_try_inner_finally_then_outer_except(a):
    log = []
    try:
        try:
            raise RuntimeError
        finally:
            log.append("inner finally")
    except RuntimeError:
        log.append("outer except")
    return a * 2, log


@T.case(rn(3))
def isinstance_on_caught_exception(a):
    try:
        raise ShapeError("s")
    except Exception as e:  # noqa: BLE001  (whatever the program under test raises)
        return a + isinstance(e, ValueError) + isinstance(e, KeyError) * 10


@T.case(rn(3))
def user_exception_with_fields(a):
    try:
        raise Retry(2.5)
    except Retry as r:
        return a * r.factor, r.args


@T.case(rn(3))
def assert_false_caught(a):
    try:
        assert a.dim() == 5, "wrong rank"
    except AssertionError as e:
        return a + 1, str(e)


# -- context managers ----------------------------------------------------------------------------------------
class Scale:
    def __init__(self, k):
        self.k = k
        self.entered = 0

    def __enter__(self):
        self.entered += 1
        return self.k

    def __exit__(self, exc_type, exc, tb):
        self.entered -= 1
        return False


class Suppress:
    def __init__(self, *kinds):
        self.kinds = kinds

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        return exc_type is not None and issubclass(exc_type, self.kinds)


@contextlib.contextmanager
def doubled(k):
    yield k * 2


@contextlib.contextmanager
def recording(log, name):
    log.append(f"enter {name}")
    try:
        yield name
    finally:
        log.append(f"exit {name}")


@contextlib.contextmanager
def swallow(kind):
    try:
        yield
    except kind:
        pass


@T.case(rn(3))
def user_context_manager_value(a):
    with Scale(3) as k:
        b = a * k
    return b


@T.case(rn(3))
def user_context_manager_state(a):
    s = Scale(2)
    with s:
        inside = s.entered
    return a * s.k, inside, s.entered


@T.case(rn(3))
def user_context_manager_suppresses(a):
    with Suppress(KeyError):
        a = a + 1
        raise KeyError("x")
    return a


@T.case(rn(3))
def user_context_manager_does_not_suppress(a):
    try:
        with Suppress(KeyError):
            raise ValueError("v")
    except ValueError:
        a = a * 4
    return a


@T.case(rn(3))
def nested_user_context_managers(a):
    with Scale(2) as x, Scale(5) as y:
        return a * x + y


@T.case(rn(3))
def contextmanager_yield_value(a):
    with doubled(3) as k:
        return a * k


@T.case(rn(3))
def contextmanager_try_finally_order(a):
    log = []
    with recording(log, "outer") as n1:
        with recording(log, "inner") as n2:
            b = a + 1
    return b, log, n1 + n2


@T.case(rn(3))
def contextmanager_finally_runs_on_exception(a):
    log = []
    try:
        with recording(log, "c"):
            raise IndexError
    except IndexError:
        log.append("caught")
    return a * 2, log


@T.case(rn(3))
def contextmanager_swallows(a):
    with swallow(ZeroDivisionError):
        a = a * 3
        x = 1 / 0
        a = a + x
    return a


@T.case(rn(3))
def contextlib_suppress(a):
    with contextlib.suppress(KeyError):
        a = a * 2
        {}["missing"]
    return a


@T.case(rn(4, 4))
def autocast_block_bf16_matmul(a):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        b = a @ a
    return b, b.dtype


@T.case(rn(4, 4))
def autocast_then_float_ops(a):
    with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
        b = torch.mm(a, a.t())
    return b.float() + a


@T.case(rn(4, 4))
def autocast_nested_disable(a):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        x = a @ a
        with torch.autocast("cpu", enabled=False):
            y = a @ a
    return x.dtype, y.dtype, y


@T.case(rg(3, 4), grad=True)
def no_grad_inside_try(a):
    try:
        with torch.no_grad():
            s = a.sum()
            raise ValueError
    except ValueError:
        pass
    return a * s, torch.is_grad_enabled()


@T.case(rg(3, 4))
def grad_mode_restored_after_exception(a):
    try:
        with torch.no_grad():
            raise KeyError
    except KeyError:
        pass
    return a * 2, torch.is_grad_enabled()


@T.case(rn(3))
def context_manager_from_inlined_helper(a):
    def run(x):
        with Scale(4) as k:
            return x * k
    return run(a) + 1
