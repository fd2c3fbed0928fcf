"""Python-level constructs around tensor code: inlined helpers, closures, globals, default and
keyword arguments, *args/**kwargs, constants, f-strings, len/range/enumerate/zip/isinstance,
tensor properties, comprehensions, loops over constants."""
import functools
import math

import torch

from .harness import CaseTable, ri, rn

T = CaseTable("py")

SCALE = 3.0
OFFSETS = (1, 2, 3)
TABLE = {"lo": -1.0, "hi": 1.0}
GLOBAL_TENSOR = torch.arange(4, dtype=torch.float32)


def _square_plus(x, k=1.0):
    return x * x + k


def _two_level(x):
    return _square_plus(x, k=2.0) - _square_plus(-x)


def _swap(a, b):
    return b, a


@T.case(rn(3, 4))
def inline_helper(a):
    return _square_plus(a)


@T.case(rn(3, 4))
def inline_nested_helpers(a):
    return _two_level(a)


@T.case(rn(3), rn(3))
def inline_returns_tuple(a, b):
    x, y = _swap(a, b)
    return x - y


def _recursive_sum(xs):
    if not xs:
        return 0
    return xs[0] + _recursive_sum(xs[1:])


@T.case([rn(3), rn(3), rn(3)])
def inline_recursion_over_list(xs):
    return _recursive_sum(xs)


@T.case(rn(3, 4))
def global_constants(a):
    return a * SCALE + OFFSETS[1] + TABLE["hi"] + math.pi


@T.case(rn(3, 4))
def global_tensor(a):
    return a + GLOBAL_TENSOR


@T.case(rn(3, 4))
def math_module_on_constants(a):
    return a * math.sqrt(2.0) + math.floor(2.7) + math.log(math.e)


def _make_closure_scale():
    factor = 2.5
    shift = torch.ones(4)

    def fn(x):
        return x * factor + shift
    return fn


T.build("closure_over_constant_and_tensor", _make_closure_scale, rn(3, 4))


def _make_nested_closure():
    def outer(x):
        y = x + 1

        def inner(z):
            return z * y
        return inner(x) + inner(2 * x)
    return outer


T.build("closure_defined_inside", _make_nested_closure, rn(3, 4))


def _make_nonlocal_accumulator():
    total = torch.zeros(3)

    def fn(x):
        nonlocal total
        total = total + x
        return x * 2, total
    return fn


# the cell is rebound once per call: compiled and eager copies must agree call by call
T.build("closure_nonlocal_rebind", _make_nonlocal_accumulator, rn(3))


@T.case(rn(3, 4))
def lambda_inside(a):
    f = lambda t, s=2: t * s  # noqa: E731
    return f(a), f(a, 3)


@T.case(rn(3, 4))
def functools_partial(a):
    g = functools.partial(torch.add, alpha=2)
    return g(a, a), functools.partial(_square_plus, k=5.0)(a)


@T.case(rn(3, 4), rn(3, 4))
def defaults_used(a, b, scale=2.0, bias=None):
    out = a * scale + b
    if bias is not None:
        out = out + bias
    return out


@T.case(rn(3, 4), kwargs={"b": rn(3, 4), "mode": "sub"})
def keyword_arguments(a, *, b, mode="add"):
    return a + b if mode == "add" else a - b


@T.case(rn(3), rn(3), rn(3))
def star_args(*xs):
    total = xs[0]
    for x in xs[1:]:
        total = total + x
    return total, len(xs)


@T.case(rn(3), kwargs={"w": rn(3), "v": rn(3)})
def star_kwargs(a, **kw):
    return a + sum(kw[k] for k in sorted(kw)), list(kw.keys())


def _callee(a, b, *rest, c=1, **more):
    return a * b + sum(rest) * c + more.get("d", 0)


@T.case(rn(3), rn(3))
def call_with_unpacking(a, b):
    args = (a, b, a, b)
    kw = {"c": 2, "d": a}
    return _callee(*args, **kw), _callee(a, *[b]), _callee(**{"a": a, "b": b})


@T.case(rn(3, 4))
def tuple_build_and_unpack(a):
    t = (a, a + 1, a + 2)
    x, y, z = t
    first, *rest = t
    return x + y + z, first, len(rest)


@T.case(rn(3))
def list_build_append_extend(a):
    out = [a]
    out.append(a * 2)
    out.extend([a * 3, a * 4])
    out.insert(0, -a)
    out.pop()
    return out


@T.case(rn(3))
def dict_build_and_update(a):
    d = {"x": a}
    d["y"] = a * 2
    d.update(z=a * 3)
    d.setdefault("w", a - 1)
    del d["x"]
    return d, list(d.items())[0][0], "y" in d


@T.case(rn(3, 4), rn(4))
def return_nested_structures(a, b):
    return {"pair": (a, b), "list": [a.sum(), [b * 2]], "n": 3, "name": "ok"}


@T.case({"a": rn(3), "b": rn(3)}, [rn(2), (rn(2), rn(2))])
def nested_container_inputs(d, lst):
    x = d["a"] * d["b"]
    y = lst[0] + lst[1][0] - lst[1][1]
    return x, y


@T.case([rn(3), rn(3)])
def list_input_mutated(xs):
    xs.append(xs[0] + xs[1])
    xs[0] = xs[0] * 0
    return xs[-1]


@T.case({"a": rn(3)})
def dict_input_mutated(d):
    d["b"] = d["a"] * 2
    return d["a"] + 1


@T.case(rn(4, 5))
def comprehensions(a):
    rows = [a[i] * i for i in range(a.shape[0])]
    sq = {k: a.sum() * k for k in (1, 2)}
    gen = sum(r.sum() for r in rows)
    return torch.stack(rows), sq, gen


@T.case(rn(3, 4), rn(3, 4))
def enumerate_zip(a, b):
    acc = []
    for i, (x, y) in enumerate(zip(a, b)):
        acc.append(x * i + y)
    return acc


@T.case(rn(3, 4))
def range_loop_with_break(a):
    out = a
    for i in range(10):
        if i == 3:
            break
        out = out + i
    return out


@T.case(rn(3, 4))
def while_loop_on_python_int(a):
    i, out = 0, a
    while i < 4:
        out = out * 0.5
        i += 1
    return out


@T.case(rn(3, 4))
def fstrings_and_constant_strings(a):
    name = f"layer_{a.dim()}_{a.shape[1]:02d}"
    return a * len(name), name, "x".join(["a", "b"]), name.upper()


@T.case(rn(3, 4), 5)
def isinstance_and_type_checks(a, n):
    r = a
    if isinstance(a, torch.Tensor):
        r = r + 1
    if isinstance(n, int) and not isinstance(n, bool):
        r = r * n
    if type(n) is float:
        r = r - 100
    return r, callable(_square_plus), isinstance(OFFSETS, (list, tuple))


@T.case(rn(2, 3, 4))
def tensor_properties(a):
    return (a * a.ndim, a.shape, a.size(), a.size(1), a.dtype, a.device, a.numel(),
            a.dim(), a.is_floating_point(), a.requires_grad, a.shape[-1] * 2, len(a))


@T.case(rn(2, 3, 4))
def shape_arithmetic(a):
    b, c, d = a.shape
    return a.reshape(b * c, d) / d, torch.zeros(b, c + 1), a.new_ones(a.shape[1:])


@T.case(rn(3, 4), ri(3, high=2))
def branch_on_dtype_and_shape(a, m):
    if a.dtype == torch.float32 and a.shape[0] == 3:
        a = a * 2
    if m.dtype.is_floating_point:
        a = a - 1
    if a.device.type == "cpu":
        a = a + 0.5
    return a


@T.case(rn(3, 4))
def builtins_on_constants(a):
    k = max(2, 5) + min(1, 3) + abs(-2) + int(3.7) + round(2.5) + sum([1, 2, 3])
    flags = all([True, 1]) and any([0, 1])
    return a * k if flags else a, sorted([3, 1, 2]), divmod(7, 3), pow(2, 3)


@T.case(rn(3, 4))
def conditional_expression_on_constant(a):
    mode = "double"
    return a * 2 if mode == "double" else a, (a if OFFSETS else -a)


@T.case(rn(3))
def chained_comparisons_and_boolops(a):
    n = a.shape[0]
    ok = 0 < n <= 3 and n != 2 or n == 10
    return a + int(ok), not ok


class _Point:
    def __init__(self, x, y):
        self.x = x
        self.y = y

    def norm2(self):
        return self.x * self.x + self.y * self.y


@T.case(rn(3), rn(3))
def user_object_created_inside(a, b):
    p = _Point(a, b)
    p.x = p.x + 1
    return p.norm2()


@T.case(rn(3), rn(3))
def try_except_no_raise(a, b):
    try:
        out = a + b
    except RuntimeError:
        out = a - b
    finally:
        pass
    return out


@T.case(rn(3))
def try_except_caught_inside(a):
    try:
        raise ValueError("inside")
    except ValueError:
        return a * 3


@T.case(rn(3, 4))
def slice_objects_and_tuples_as_index(a):
    s = slice(1, 3)
    idx = (s, slice(None, None, 2))
    return a[idx], a[s]


@T.case(rn(4))
def assert_on_static_property(a):
    assert a.shape[0] == 4, "static shape"
    assert a.dtype is torch.float32
    return a + 1


@T.case(rn(2, 3))
def torch_size_ops(a):
    s = a.shape + (5,)
    return torch.ones(s) * a.sum(), torch.Size([2, 3]) == a.shape, s.numel()
