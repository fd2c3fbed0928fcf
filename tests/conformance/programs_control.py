"""Control flow over Python values around tensor code: if/for/while/break/continue over constants,
ranges, lists, tuples and dicts; enumerate/zip/reversed/sorted; comprehensions and generator
expressions; any/all/min/max/sum over Python values; conditional expressions; assert."""
import torch

from .harness import CaseTable, rn

T = CaseTable("control")

WEIGHTS = [0.5, -1.0, 2.0]
NAMES = ("relu", "tanh", "sigmoid")
CONFIG = {"scale": 2.0, "shift": -1.0, "act": "gelu"}


@T.case(rn(3, 4))
def if_elif_else_on_constant(a):
    mode = "mid"
    if mode == "low":
        return a - 1
    elif mode == "mid":
        return a * 2
    else:
        return a + 1


@T.case(rn(3, 4), 3)
def if_on_int_argument(a, n):
    if n > 2:
        a = a * n
    if n % 2 == 0:
        a = a + 1
    return a


@T.case(rn(3, 4), None)
def if_on_none_argument(a, b):
    if b is None:
        return a + 1
    return a + b


@T.case(rn(3, 4), True, False)
def if_on_bool_arguments(a, p, q):
    if p and not q:
        return a.relu()
    if p or q:
        return a.tanh()
    return a


@T.case(rn(3, 4))
def nested_if_on_shapes(a):
    if a.dim() == 2:
        if a.shape[0] < a.shape[1]:
            return a.t()
        return a
    return a.flatten()


@T.case(rn(5))
def for_over_range(a):
    acc = a
    for i in range(4):
        acc = acc * 0.5 + i
    return acc


@T.case(rn(5))
def for_over_range_with_step(a):
    out = []
    for i in range(10, 0, -3):
        out.append(a * i)
    return torch.stack(out)


@T.case(rn(5))
def for_over_global_list(a):
    for w in WEIGHTS:
        a = a * w
    return a


@T.case(rn(5))
def for_over_tuple_of_strings(a):
    outs = []
    for name in NAMES:
        outs.append(getattr(torch, name)(a))
    return outs


@T.case(rn(5))
def for_over_dict_items(a):
    out = a
    for k, v in {"x": 1.0, "y": 2.0, "z": 3.0}.items():
        out = out + v if k != "y" else out * v
    return out


@T.case(rn(5))
def for_over_dict_keys_and_values(a):
    d = {"a": 1, "b": 2, "c": 3}
    keys = [k for k in d.keys()]
    total = sum(d.values())
    return a * total, keys


@T.case(rn(5))
def for_over_dict_directly(a):
    d = {"p": a, "q": a * 2}
    return [d[k] + 1 for k in d]


@T.case({"u": rn(3), "v": rn(3), "w": rn(3)})
def for_over_input_dict_items(d):
    out = 0
    for i, (k, v) in enumerate(d.items()):
        out = out + v * (i + 1)
    return out, list(d)


@T.case([rn(3), rn(3), rn(3), rn(3)])
def for_over_input_list(xs):
    acc = xs[0]
    for x in xs[1:]:
        acc = torch.maximum(acc, x)
    return acc


@T.case((rn(2), rn(2)))
def for_over_input_tuple(t):
    return sum(x.sum() for x in t)


@T.case(rn(6))
def for_with_break(a):
    for i in range(10):
        if i * i > 10:
            break
        a = a + i
    return a, i


@T.case(rn(6))
def for_with_continue(a):
    for i in range(6):
        if i % 2:
            continue
        a = a * (i + 1)
    return a


@T.case(rn(6))
def for_else_runs_without_break(a):
    for i in range(3):
        if i > 5:
            break
    else:
        a = a + 100
    return a


@T.case(rn(6))
def for_else_skipped_on_break(a):
    for i in range(3):
        if i == 1:
            break
    else:
        a = a + 100
    return a * i


@T.case(rn(4))
def nested_loops(a):
    out = []
    for i in range(3):
        for j in range(i):
            out.append(a * i - j)
    return torch.stack(out)


@T.case(rn(4))
def nested_loops_break_inner(a):
    total = 0
    for i in range(4):
        for j in range(4):
            if j > i:
                break
            total += 1
    return a * total


@T.case(rn(4))
def while_with_counter(a):
    i = 0
    while i < 5:
        a = a + i
        i += 2
    return a


@T.case(rn(4))
def while_true_with_break(a):
    n = 1
    while True:
        n *= 3
        if n > 50:
            break
    return a * n


@T.case(rn(4))
def while_over_list_pop(a):
    todo = [1, 2, 3]
    out = a
    while todo:
        out = out + todo.pop()
    return out


@T.case(rn(4))
def while_else(a):
    i = 0
    while i < 3:
        i += 1
    else:
        a = -a
    return a


@T.case(rn(3), rn(3))
def enumerate_with_start(a, b):
    return [x * i for i, x in enumerate((a, b), start=1)]


@T.case(rn(3), rn(3), rn(3))
def zip_three_sequences(a, b, c):
    return [x + y * z for x, y, z in zip([a, b], [b, c], [c, a])]


@T.case(rn(3))
def zip_unequal_lengths_stops(a):
    return [a * i + j for i, j in zip(range(5), (10, 20))]


@T.case([rn(3), rn(3), rn(3)])
def reversed_list(xs):
    return [x * i for i, x in enumerate(reversed(xs))]


@T.case(rn(3))
def reversed_range(a):
    return torch.stack([a * i for i in reversed(range(4))])


@T.case(rn(3))
def sorted_constants(a):
    order = sorted([3, 1, 2], reverse=True)
    return [a * i for i in order]


@T.case({"b": rn(2), "a": rn(2), "c": rn(2)})
def sorted_dict_keys(d):
    return [d[k] * i for i, k in enumerate(sorted(d))]


@T.case(rn(3))
def sorted_with_key(a):
    words = ["ccc", "a", "bb"]
    return [a * len(w) for w in sorted(words, key=len)]


@T.case(rn(4, 3))
def list_comprehension_with_condition(a):
    return [row * 2 for i, row in enumerate(a) if i % 2 == 0]


@T.case(rn(3))
def nested_comprehension(a):
    return [[a * i * j for j in range(2)] for i in range(3)]


@T.case(rn(3))
def dict_comprehension(a):
    return {f"p{i}": a ** i for i in range(3)}


@T.case(rn(3))
def set_comprehension_of_constants(a):
    s = {i % 3 for i in range(10)}
    return a * len(s), sorted(s)


@T.case(rn(3))
def generator_expression_in_sum(a):
    return sum(a * i for i in range(4))


@T.case(rn(3))
def generator_expression_in_tuple(a):
    return tuple(a + i for i in range(3))


@T.case(rn(3))
def generator_expression_in_max(a):
    return a * max(i * i for i in range(-3, 2))


@T.case(rn(3))
def any_all_over_constants(a):
    flags = [s > 0 for s in (1, 2, -3)]
    if any(flags) and not all(flags):
        return a + 1
    return a


@T.case(rn(2, 3))
def any_all_over_shapes(a):
    if all(s > 1 for s in a.shape) and any(s == 3 for s in a.shape):
        return a.sum(0)
    return a


@T.case(rn(3))
def min_max_over_python_values(a):
    return a * min(3, 1, 2) + max([4, 7, 5]), min((2.5, 1.5)), max("abc")


@T.case(rn(3))
def min_max_with_key(a):
    pairs = [(1, "x"), (3, "y"), (2, "z")]
    return a * max(pairs, key=lambda p: p[0])[0], min(pairs, key=lambda p: p[0])[1]


@T.case(rn(3))
def min_max_default(a):
    return a + max([], default=7) + min((), default=-1)


@T.case(rn(3))
def sum_with_start(a):
    return sum([1, 2, 3], 10) * a, sum([[1], [2]], [])


@T.case(rn(3))
def sum_of_tensors_list(a):
    parts = [a, a * 2, a * 3]
    return sum(parts)


@T.case(rn(3), 5)
def conditional_expression_on_argument(a, n):
    y = a * 2 if n > 3 else a / 2
    return y if a.dim() == 1 else y.t()


@T.case(rn(3))
def chained_conditional_expressions(a):
    k = 7
    return a * (1 if k < 5 else 2 if k < 10 else 3)


@T.case(rn(4, 2))
def assert_on_shapes(a):
    assert a.dim() == 2, "need 2d"
    assert a.shape[1] == 2
    return a.sum(1)


@T.case(rn(4))
def assert_on_constant_config(a):
    assert CONFIG["scale"] > 0
    return a * CONFIG["scale"] + CONFIG["shift"]


@T.case(rn(4))
def string_dispatch_from_config(a):
    act = CONFIG["act"]
    if act == "relu":
        return a.relu()
    if act.startswith("ge"):
        return torch.nn.functional.gelu(a)
    return a


@T.case(rn(4))
def boolean_short_circuit_values(a):
    x = None
    y = x or 3
    z = 0 and 5
    w = [] or [1, 2]
    return a * y + z, w


@T.case(rn(4))
def loop_builds_dict_then_reads(a):
    d = {}
    for i in range(3):
        d[i] = a + i
    return d[0] * d[2]


@T.case(rn(4))
def loop_over_string(a):
    out = a
    for ch in "abc":
        out = out + ord(ch) - ord("a")
    return out


@T.case(rn(4))
def unpacking_in_for(a):
    pairs = [(1, 2), (3, 4)]
    out = a
    for p, (q) in pairs:
        out = out * p + q
    return out


@T.case(rn(4))
def star_unpacking(a):
    first, *rest = [1, 2, 3, 4]
    *init, last = (a, a * 2, a * 3)
    return a * first + sum(rest), torch.stack(init), last


@T.case(rn(4))
def range_object_properties(a):
    r = range(2, 20, 3)
    return a * len(r) + r[2] + r[-1], 8 in r, list(r[1:3])


@T.case(rn(4))
def list_methods_in_frame(a):
    xs = [3, 1, 2]
    xs.sort()
    xs.insert(0, 9)
    xs.remove(2)
    xs.extend([7, 7])
    return a * xs.index(7) + xs.count(7), xs


@T.case(rn(4))
def dict_methods_in_frame(a):
    d = {"x": 1}
    d.update(y=2)
    d.setdefault("z", 3)
    v = d.pop("x")
    items = sorted(d.items())
    return a * v + len(d), items, d.get("nope", 5)


@T.case(rn(4))
def tuple_comparison_and_membership(a):
    t = (1, 2, 3)
    flag = (1, 2) < (1, 3) and 2 in t and 5 not in t
    return a * flag + t.index(3)


@T.case(rn(3, 4))
def loop_over_tensor_rows(a):
    out = []
    for row in a:
        out.append(row.sum())
    return torch.stack(out)


@T.case(rn(3, 4))
def enumerate_tensor_rows(a):
    return sum(row * i for i, row in enumerate(a))


@T.case(rn(2, 3))
def loop_over_shape(a):
    total = 1
    for s in a.shape:
        total *= s
    return a.reshape(total)


@T.case(rn(2, 3, 4))
def walrus_in_condition(a):
    if (n := a.dim()) > 2:
        return a.sum(-1) * n
    return a


@T.case(rn(4))
def lambda_in_loop_default_capture(a):
    fns = [lambda x, k=k: x * k for k in range(3)]
    return [f(a) for f in fns]


@T.case(rn(4))
def early_return_inside_loop(a):
    for i in range(10):
        if i == 3:
            return a * i
    return a


@T.case(rn(4))
def match_statement_on_constant(a):
    kind = ("scale", 3)
    match kind:
        case ("shift", v):
            return a + v
        case ("scale", v):
            return a * v
        case _:
            return a


def _counting(log, x):
    i = 0
    while True:                       # endless: only as much runs as is consumed
        log.append(i)
        yield x * i
        i += 1


@T.case([], rn(3))
def generator_partly_consumed_with_side_effects(log, a):
    g = _counting(log, a)
    first = next(g)
    second = next(g)
    return first + second


@T.case(rn(3))
def endless_generator_zipped_with_range(a):
    return [v + i for i, v in zip(range(3), _counting([], a))]


def _inner_gen(x):
    yield x
    yield x * 2
    return 5


def _outer_gen(x):
    r = yield from _inner_gen(x)
    yield x * r


@T.case(rn(3))
def yield_from_return_value(a):
    return list(_outer_gen(a))


@T.case(rn(3))
def generator_for_loop_with_break(a):
    out = a
    for i, v in enumerate(_counting([], a)):
        if i == 3:
            break
        out = out + v
    return out


@T.case(rn(3))
def generator_expression_next_and_rest(a):
    g = (a * i for i in range(4))
    head = next(g)
    rest = list(g)
    return head, torch.stack(rest)
