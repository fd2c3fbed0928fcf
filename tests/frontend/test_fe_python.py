"""Python values and calls: constants, containers, unpacking, builtins, closures, inlining."""
import collections
import functools
import math

import torch

from .helpers import check, placeholders, trace

SCALE = 3.0


def helper(x, k=2, *, bias=0.5):
    return x * k + bias


def r(*shape):
    return torch.randn(*shape)


def test_constants_arithmetic_and_fstrings():
    def fn(x, n, name):
        k = (n + 1) * 2 // 3 - n % 2
        s = f"{name}-{k:03d}-{n!r}"
        return x * k, s, math.sqrt(16.0) + abs(-n), round(2.567, 2)
    check(fn, r(3), 5, "a")


def test_containers_built_in_frame():
    def fn(x):
        t = (x, x + 1)
        lst = [x * 2]
        lst.append(x - 1)
        lst.extend(t)
        lst += [x]
        d = {"a": x, "b": t}
        d["c"] = lst[0]
        d.update(e=x.sum())
        return lst, d, t + (1, 2), [1, 2] * 2, d.get("zz", None), list(d.keys()), len(d)
    check(fn, r(2))


def test_unpacking_and_star():
    def fn(x):
        a, b, *rest = x.unbind(0)
        first, *mid, last = [1, 2, 3, 4]
        (p, q), s = (a, b), rest
        return p + q, sum(s), first + last, mid, [*rest, a], (*mid, 9)
    check(fn, r(5, 2))


def test_builtins_on_constants_and_sizes():
    def fn(x):
        n = len(x)
        sizes = x.shape
        total = sum(sizes)
        m = max(sizes) - min(sizes[0], 2)
        flat = x.reshape(sizes[0] * sizes[1])
        shp = sizes[:1] + (sizes[1],) + torch.Size([1])
        return flat * n + total + m, shp, isinstance(x, torch.Tensor), isinstance(n, (float, str)), \
            x.view(*sizes[::-1]), sorted([3, 1, 2]), any([0, 1]), all([]), int("7"), float(n)
    check(fn, r(3, 4))


def test_range_enumerate_zip_reversed_and_loops():
    def fn(xs, x):
        out = []
        for i in range(3):
            x = x + i
        for i, t in enumerate(xs):
            out.append(t * i)
        for a, b in zip(xs, reversed(xs)):
            out.append(a - b)
        total = 0
        k = 0
        while k < 3:
            total += k
            k += 1
        return x, out, total
    check(fn, [r(2), r(2), r(2)], r(2))


def test_comprehensions_and_genexprs():
    def fn(xs):
        doubled = [t * 2 for t in xs]
        pos = {i: t for i, t in enumerate(xs) if i != 1}
        s = sum(t.sum() for t in xs)
        return doubled, pos, s, tuple(t + 1 for t in xs), [i * j for i in range(3) for j in range(2)]
    check(fn, [r(3), r(3), r(3)])


def test_inlined_functions_defaults_kwargs_globals():
    def fn(x, y):
        a = helper(x)
        b = helper(y, 3, bias=1.0)
        c = helper(*(x,), **{"k": 4})
        return a + b + c + SCALE
    c = check(fn, r(2), r(2))
    assert "G['helper']" in str(c.guards) and "G['SCALE']" in str(c.guards)


def test_closures_and_nested_defs():
    def fn(x):
        k = 3

        def inner(y, scale=2):
            return y * k * scale

        add = lambda a, b=1: a + b  # noqa: E731
        twice = functools.partial(inner, scale=5)
        return inner(x), add(x), twice(x), (lambda: k + 1)()
    check(fn, r(3))


def test_closure_of_the_traced_function():
    w = torch.randn(3)
    factor = 2.5

    def fn(x):
        return x * w * factor

    c = check(fn, r(3))
    guards = str(c.guards)
    assert "C['w']" in guards and "EQUALS_MATCH: C['factor'] 2.5" in guards


def test_nonlocal_in_nested_function():
    def fn(x):
        count = 0

        def bump(t):
            nonlocal count
            count += 1
            return t + count

        y = bump(x)
        y = bump(y)
        return y, count
    check(fn, r(2))


def test_args_kwargs_forwarding():
    def inner(*args, **kwargs):
        return sum(args) + kwargs.get("extra", 0)

    def fn(x, *args, **kwargs):
        return inner(x, *args, **kwargs), len(args), sorted(kwargs)
    check(fn, r(2), r(2), r(2), extra=r(2), other=1)


def test_namedtuple_and_dict_inputs():
    Pair = collections.namedtuple("Pair", ["a", "b"])

    def fn(p, d):
        return p.a + p.b, d["x"] * d["k"], p[0], list(d.items())[0][0]
    c = check(fn, Pair(r(2), r(2)), {"x": r(2), "k": 3})
    guards = str(c.guards)
    assert "DICT_KEYS: L['d'] ('x', 'k')" in guards and "EQUALS_MATCH: L['d']['k'] 3" in guards


def test_list_input_only_used_items_become_inputs():
    def fn(xs):
        return xs[1] * 2
    c = trace(fn, [r(2), r(2), r(2)])
    assert placeholders(c) == ["l_xs_1"]
    assert "L['xs'][0]" not in str(c.guards)
    assert "LENGTH_CHECK: L['xs'] 3" in str(c.guards)


def test_passthrough_of_input_objects():
    class Cfg:
        scale = 2

    cfg = Cfg()

    def fn(x, xs, c):
        return x * c.scale, xs, c
    c = trace(fn, r(2), [1, 2], cfg)
    assert c.output == ("tuple", [("out", 0), ("source", 0), ("source", 1)])
    assert [s.name() for s in c.passthrough_sources] == ["L['xs']", "L['c']"]
    check(fn, r(2), [1, 2], cfg)


def test_user_object_attributes_are_guarded():
    class Cfg:
        def __init__(self):
            self.hidden = 4
            self.act = "relu"

        @property
        def double(self):
            return self.hidden * 2

        def scale(self, x):
            return x * self.hidden

    def fn(x, cfg):
        y = cfg.scale(x) + cfg.double
        return torch.relu(y) if cfg.act == "relu" else y
    c = check(fn, r(3), Cfg())
    guards = str(c.guards)
    assert "TYPE_MATCH: L['cfg']" in guards
    assert "EQUALS_MATCH: L['cfg'].hidden 4" in guards and "EQUALS_MATCH: L['cfg'].act 'relu'" in guards


def test_constant_control_flow():
    def fn(x, mode, flag=None):
        if mode == "double":
            x = x * 2
        elif mode == "half":
            x = x / 2
        if flag is None:
            x = x + 1
        if x.dim() == 1 and not x.requires_grad:
            x = x - 1
        return x if x.shape[0] > 2 else -x
    check(fn, r(3), "double")
    check(fn, r(2), "half", flag=True)


def test_methods_on_constants():
    def fn(x, name):
        parts = name.split("_")
        return x * len(parts), name.upper(), "-".join(parts), (3.5).is_integer()
    check(fn, r(2), "a_b_c")


def test_torch_size_values():
    def fn(x):
        s = x.size()
        new = torch.Size([s[0] * 2, s[1] // 2])
        return x.reshape(new), s.numel(), list(s), s == (4, 6), x.new_zeros(s[1:])
    check(fn, r(4, 6))


def test_globals_constant_fold_of_math_and_type():
    def fn(x):
        return x * math.pi, type(x) is torch.Tensor, math.floor(2.7), getattr(x, "ndim"), hasattr(x, "nope")
    check(fn, r(2))


class _Point:
    def __init__(self, x, y):
        self.x = x
        self.y = y

    def norm2(self):
        return self.x * self.x + self.y * self.y


def test_objects_created_in_the_frame():
    import dataclasses

    @dataclasses.dataclass
    class Cfg:
        scale: float
        shift: float = 1.0

    def fn(a, b):
        p = _Point(a, b)
        p.x = p.x + 1
        c = Cfg(2.0)
        return p.norm2() * c.scale + c.shift, isinstance(p, _Point)
    check(fn, r(3), r(3))


def test_sets_generators_and_contexts():
    import contextlib

    def gen(xs):
        yield from xs
        yield xs[0] * 10

    def fn(x, xs):
        seen = {1, 2}
        seen.add(3)
        ids = set()
        for t in (x, x, xs[0]):
            ids.add(t)
        with contextlib.nullcontext():
            y = sum(gen(xs)) + x
        return y, len(seen), 2 in seen, len(ids)
    check(fn, r(2), [r(2), r(2)])


def test_module_parameters_and_named_modules_iteration():
    m = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 2))

    def fn(x, mod):
        names = [n for n, _ in mod.named_modules()]
        return x * sum(p.sum() for p in mod.parameters()), names
    check(fn, r(2), m)
