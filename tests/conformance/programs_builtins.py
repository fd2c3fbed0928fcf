"""Python builtins and stdlib used around tensor code: math, operator, functools, itertools,
collections, numbers and strings, type conversions."""
import collections
import functools
import itertools
import math
import operator

import torch

from .harness import CaseTable, rn

T = CaseTable("builtins")


# -- math ----------------------------------------------------------------------------------------------------
@T.case(rn(3))
def math_functions_on_constants(a):
    return a * math.sqrt(16) + math.exp(0) + math.log2(8) + math.cos(0) + math.hypot(3, 4)


@T.case(rn(8, 4))
def math_on_shapes(a):
    d = a.shape[-1]
    scale = 1 / math.sqrt(d)
    n = math.ceil(a.shape[0] / 3)
    return a * scale, n, math.floor(2.5), math.prod(a.shape)


@T.case(rn(3))
def math_constants_and_predicates(a):
    return a * math.pi + math.e, math.isfinite(1.0), math.isnan(float("nan")), math.inf > 1e308


@T.case(rn(3))
def math_gcd_factorial_comb(a):
    return a * math.gcd(12, 18) + math.factorial(4) + math.comb(5, 2), math.lcm(4, 6)


@T.case(rn(3))
def math_trunc_copysign_fmod(a):
    return a * math.trunc(-2.7) + math.copysign(2.0, -1.0) + math.fmod(7.5, 2), math.isclose(0.1 + 0.2, 0.3)


@T.case(rn(3))
def math_degrees_radians_atan2(a):
    return a * math.radians(180) + math.degrees(math.pi / 2) * 0 + math.atan2(1, 1)


# -- numbers -------------------------------------------------------------------------------------------------
@T.case(rn(3))
def abs_round_divmod_pow(a):
    q, r = divmod(17, 5)
    return a * abs(-3) + round(2.675, 2) + q + r + pow(2, 5) + pow(3, 2, 5), round(7.5)


@T.case(rn(3))
def abs_and_neg_on_tensors(a):
    return abs(a), torch.round(a * 10), -a, +a, abs(-a) + 1


@T.case(rn(3))
def int_float_bool_conversions(a):
    return a * int("12") + float("1.5") + int(3.9) + bool(0) + int(True), float(7) / 2


@T.case(rn(3))
def bit_operations_on_ints(a):
    n = 0b1011
    return a * (n & 3) + (n | 4) + (n ^ 1) + (n << 2) + (n >> 1) + (~n)


@T.case(rn(3))
def complex_numbers(a):
    z = complex(3, 4)
    return a * abs(z), z.real, z.imag, (z * 1j).real


@T.case(rn(3))
def float_methods(a):
    x = 2.5
    return a * x.is_integer() + (10.0).is_integer(), x.hex(), float.fromhex("0x1.4p+1")


@T.case(rn(3))
def int_methods(a):
    n = 37
    return a * n.bit_length() + (255).bit_count(), n.to_bytes(2, "big"), int.from_bytes(b"\x01\x00", "big")


# -- strings -------------------------------------------------------------------------------------------------
@T.case(rn(3))
def string_methods(a):
    s = "Hello, World"
    return a * len(s.split(", ")), s.lower(), s.replace("l", "L"), s.startswith("He"), s.find("W"), s[::-1]


@T.case(rn(3))
def string_join_format_fstring(a):
    parts = [str(i) for i in range(3)]
    name = "-".join(parts)
    return a * len(name), name, "{}:{:03d}".format("x", 7), f"{3.14159:.2f}|{name!r}|{12:>4}"


@T.case(rn(3))
def string_building_for_dispatch(a):
    prefix = "act"
    key = f"{prefix}_{'relu'.upper()}"
    table = {"act_RELU": torch.relu, "act_TANH": torch.tanh}
    return table[key](a), key.lower()


@T.case(rn(3))
def string_membership_and_comparison(a):
    s = "transformer"
    return a * ("form" in s) + ("x" in s) + (s < "zebra"), s.count("r"), s.partition("s")


@T.case(rn(3))
def chr_ord_hex_bin(a):
    return a * (ord("c") - ord("a")), chr(65), hex(255), bin(5), oct(8)


# -- operator ------------------------------------------------------------------------------------------------
@T.case(rn(3), rn(3))
def operator_functions_on_tensors(a, b):
    return operator.add(a, b), operator.mul(a, 2), operator.sub(b, a), operator.truediv(a, 2), operator.neg(a)


@T.case(rn(3), rn(3))
def operator_comparisons_on_tensors(a, b):
    return operator.lt(a, b), operator.ge(a, 0), operator.eq(a, a)


@T.case([rn(3), rn(3), rn(3)])
def operator_itemgetter(xs):
    first, third = operator.itemgetter(0, 2)(xs)
    return first - third, operator.itemgetter(1)(xs) * 2


@T.case(rn(3))
def operator_attrgetter(a):
    t = torch.zeros(2, 3)
    get = operator.attrgetter("shape", "dtype")
    shape, dtype = get(t)
    return a * shape[1], dtype


@T.case(rn(3))
def operator_methodcaller(a):
    call = operator.methodcaller("sum", 0)
    return call(a.reshape(3, 1)), operator.methodcaller("upper")("abc")


@T.case(rn(3))
def operator_on_constants(a):
    return a * operator.add(2, 3) + operator.mul(2, 4) + operator.floordiv(9, 2) + operator.pow(2, 3), \
        operator.contains([1, 2], 2), operator.not_(0), operator.index(5)


@T.case(rn(3), rn(3))
def operator_inplace_functions(a, b):
    x = a.clone()
    x = operator.iadd(x, b)
    x = operator.imul(x, 2)
    return x


@T.case(rn(3, 4))
def operator_getitem_on_tensor(a):
    return operator.getitem(a, (slice(None), 1)), operator.getitem(a, 0)


# -- functools -----------------------------------------------------------------------------------------------
def _affine(x, w=1.0, b=0.0):
    return x * w + b


@T.case(rn(3))
def functools_partial_keywords(a):
    f = functools.partial(_affine, w=2.0)
    g = functools.partial(f, b=-1.0)
    return f(a), g(a), g(a, w=3.0)


@T.case(rn(3))
def functools_partial_positional(a):
    clamp = functools.partial(torch.clamp, min=-0.5)
    return clamp(a, max=0.5), functools.partial(torch.add, a)(a * 2)


@T.case([rn(3), rn(3), rn(3)])
def functools_reduce_tensors(xs):
    return functools.reduce(torch.maximum, xs), functools.reduce(operator.add, xs, torch.zeros(3))


@T.case(rn(3))
def functools_reduce_constants(a):
    return a * functools.reduce(lambda x, y: x * y, [1, 2, 3, 4])


@functools.lru_cache(maxsize=None)
def _table(n):
    return tuple(i * i for i in range(n))


@functools.cache
def _scale_for(name):
    return {"small": 0.5, "large": 2.0}[name]


@T.case(rn(3))
def lru_cached_helper(a):
    return a * sum(_table(4)) * _scale_for("large")


def _logged(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs) + 1
    return wrapper


@_logged
def _decorated(x):
    return x * 3


@T.case(rn(3))
def functools_wraps_decorator(a):
    return _decorated(a), _decorated.__name__


# -- itertools -----------------------------------------------------------------------------------------------
@T.case(rn(3), rn(3))
def itertools_chain(a, b):
    return list(itertools.chain([a, b], (a * 2,), [b * 3]))


@T.case([[rn(2)], [rn(2), rn(2)]])
def itertools_chain_from_iterable(xss):
    return torch.stack(list(itertools.chain.from_iterable(xss)))


@T.case(rn(3))
def itertools_product(a):
    return [a * i + j for i, j in itertools.product(range(2), (10, 20))]


@T.case(rn(3))
def itertools_product_repeat(a):
    return a * len(list(itertools.product([0, 1], repeat=3)))


@T.case([rn(3), rn(3), rn(3)])
def itertools_accumulate(xs):
    return list(itertools.accumulate(xs)), list(itertools.accumulate([1, 2, 3], operator.mul))


@T.case([rn(3), rn(3), rn(3), rn(3)])
def itertools_islice(xs):
    return [x * 2 for x in itertools.islice(xs, 1, None, 2)], len(list(itertools.islice(xs, 2)))


@T.case(rn(3))
def itertools_zip_longest(a):
    return [x if y is None else x * y for x, y in itertools.zip_longest([a, a], [2], fillvalue=None)]


@T.case(rn(3))
def itertools_repeat_with_times(a):
    return sum(itertools.repeat(a, 3))


@T.case(rn(3), rn(3), rn(3))
def itertools_combinations_permutations(a, b, c):
    pairs = [x * y for x, y in itertools.combinations([a, b, c], 2)]
    return pairs, len(list(itertools.permutations(range(3))))


@T.case([rn(3), rn(3), rn(3)])
def itertools_pairwise(xs):
    return [y - x for x, y in itertools.pairwise(xs)]


@T.case(rn(3))
def itertools_starmap_takewhile_dropwhile(a):
    sums = list(itertools.starmap(operator.add, [(1, 2), (3, 4)]))
    small = list(itertools.takewhile(lambda v: v < 3, [1, 2, 5, 1]))
    rest = list(itertools.dropwhile(lambda v: v < 3, [1, 2, 5, 1]))
    return a * sum(sums), small, rest


@T.case(rn(3), rn(3))
def itertools_compress(a, b):
    return list(itertools.compress([a, b, a + b], [True, False, 1]))


# -- collections ---------------------------------------------------------------------------------------------
@T.case(rn(3))
def ordered_dict_in_frame(a):
    d = collections.OrderedDict()
    d["b"] = a * 2
    d["a"] = a * 3
    d.move_to_end("b")
    return list(d.values()), list(d.keys())


@T.case(rn(3))
def defaultdict_list_grouping(a):
    groups = collections.defaultdict(list)
    for i in range(5):
        groups[i % 2].append(a * i)
    return [torch.stack(groups[k]) for k in sorted(groups)], isinstance(groups, dict)


@T.case(rn(3))
def defaultdict_int_counting(a):
    counts = collections.defaultdict(int)
    for w in "abracadabra":
        counts[w] += 1
    return a * counts["a"], sorted(counts.items())


@T.case(collections.OrderedDict([("x", rn(3)), ("y", rn(3))]))
def ordered_dict_input(d):
    return [v * i for i, v in enumerate(d.values())], list(d)


@T.case(rn(3))
def dict_fromkeys_and_frozenset(a):
    d = dict.fromkeys(["p", "q"], 0)
    fs = frozenset([1, 2, 2])
    return a * len(d) + len(fs), d, 2 in fs


# -- builtins on containers ----------------------------------------------------------------------------------
@T.case(rn(3))
def map_and_filter(a):
    doubled = list(map(lambda t: t * 2, [a, a + 1]))
    evens = list(filter(lambda i: i % 2 == 0, range(6)))
    return doubled, evens, list(map(operator.add, [1, 2], [10, 20]))


@T.case(rn(3))
def filter_none_keeps_truthy(a):
    return a * len(list(filter(None, [0, 1, "", "x", None, 3])))


@T.case(rn(3))
def tuple_list_set_conversions(a):
    t = tuple([1, 2, 2])
    s = set(t)
    lst = list(s)
    return a * len(lst), sorted(lst), tuple(range(3))


@T.case(rn(3))
def len_of_everything(a):
    return a * (len([1, 2]) + len((1,)) + len({"a": 1}) + len("abc") + len(range(5)) + len({1, 2}))


@T.case(rn(3))
def hash_of_constants_is_stable(a):
    return a * (hash((1, 2)) == hash((1, 2))), hash("x") == hash("x")


@T.case(rn(3))
def slice_builtin(a):
    s = slice(None, None, 2)
    rev = slice(None, None, -1)
    return a[s] + 1, [a * i for i in range(4)][rev], s.step, slice(1, 3).indices(10)


@T.case(rn(2, 3))
def torch_size_and_tuple_interop(a):
    s = a.shape
    return a.new_zeros(s + (2,)), tuple(s) == (2, 3), list(s), s.numel(), torch.Size([2]) + s


@T.case(rn(3))
def set_operators_and_methods(a):
    s = {1, 2, 3}
    s |= {4}
    t = s & {2, 4, 6}
    u = (s - {1}) ^ {9}
    s.discard(3)
    return a * len(s), sorted(t), sorted(u), {1, 2}.issubset(s), sorted(s.union([7], (8,)))
