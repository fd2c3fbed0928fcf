"""Builtins and stdlib objects around tensor code: id(), sys.intern, cls.__subclasses__(),
dict.fromkeys, collections.deque, the endless and grouping itertools (count, repeat, groupby,
accumulate), inspect.signature and typing objects."""
import collections
import inspect
import itertools
import operator
import sys
import typing
from typing import Any, Dict, List, Optional, Tuple, Union

import torch
from torch import nn

from .harness import CaseTable, obj, rn

T = CaseTable("stdlib")

_SHARED = [1, 2, 3]


class _Shape:
    pass


class _Square(_Shape):
    pass


class _Circle(_Shape):
    pass


class _Act(nn.Module):
    def forward(self, x):
        return torch.relu(x)


class _Gelu(nn.Module):
    def forward(self, x):
        return torch.nn.functional.gelu(x)


# -- id --------------------------------------------------------------------------------------------------------
@T.case(rn(3))
def id_of_list_made_here(a):
    xs, ys = [a], [a]
    same = id(xs) == id(xs)
    other = id(xs) != id(ys)
    return a + same + other


@T.case(rn(3))
def id_of_global_list(a):
    return a * (id(_SHARED) == id(_SHARED)), id(_SHARED) == id(_SHARED)


@T.case(rn(3))
def id_of_none_and_bools(a):
    return a + (id(None) == id(None)) + (id(True) != id(False))


@T.case(rn(3))
def id_in_seen_set_of_objects(a):
    objs = [[1], [2]]
    objs.append(objs[0])
    seen = set()
    out = a
    for o in objs:
        if id(o) in seen:
            continue
        seen.add(id(o))
        out = out + o[0]
    return out, len(seen)


def _modules_by_id():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(3, 3)
            self.b = self.a
            self.c = nn.Linear(3, 3)

        def forward(self, x):
            seen, out = set(), x
            for m in (self.a, self.b, self.c):
                if id(m) not in seen:
                    seen.add(id(m))
                    out = m(out)
            return out, len(seen)
    return M()


T.build("id_dedupes_shared_submodules", _modules_by_id, rn(2, 3))


@T.case(rn(3))
def id_of_class_and_function(a):
    return a + (id(_Square) == id(_Square)) + (id(torch.relu) == id(torch.relu)) + (id(_Square) != id(_Circle))


# -- sys ----------------------------------------------------------------------------------------------------
@T.case(rn(3))
def sys_intern_string(a):
    name = sys.intern("hidden_" + "states")
    return a * len(name), name


@T.case(rn(3))
def sys_intern_as_dict_key(a):
    d = {sys.intern("x"): a}
    return d["x"] + 1


@T.case(rn(3))
def sys_maxsize_and_version(a):
    return a + (sys.maxsize > 2 ** 31) + (sys.version_info >= (3, 8))


# -- __subclasses__ ------------------------------------------------------------------------------------------
@T.case(rn(3))
def subclasses_count(a):
    return a * len(_Shape.__subclasses__())


@T.case(rn(3))
def subclasses_names(a):
    names = [c.__name__ for c in _Shape.__subclasses__()]
    return a + len(names), names


@T.case(rn(3))
def subclasses_membership(a):
    subs = _Shape.__subclasses__()
    return a * (_Square in subs) + (_Shape in subs)


# -- dict.fromkeys -----------------------------------------------------------------------------------------
@T.case(rn(3))
def fromkeys_then_fill_tensors(a):
    d = dict.fromkeys(["q", "k", "v"])
    d["q"], d["k"], d["v"] = a, a * 2, a * 3
    return d


@T.case(rn(3))
def fromkeys_default_value_shared(a):
    d = dict.fromkeys(("x", "y"), a)
    return d["x"] + d["y"], list(d)


@T.case(rn(3))
def fromkeys_of_string_and_range(a):
    d1 = dict.fromkeys("abc", 0)
    d2 = dict.fromkeys(range(3), 1)
    return a + len(d1) + sum(d2.values()), sorted(d1)


@T.case(rn(3))
def fromkeys_dedupes_in_order(a):
    order = list(dict.fromkeys(["b", "a", "b", "c", "a"]))
    return a * len(order), order


@T.case(rn(3))
def ordered_dict_fromkeys(a):
    d = collections.OrderedDict.fromkeys(["x", "y"], 0)
    d["x"] = a
    return d["x"] + d["y"], list(d.keys())


# -- deque -----------------------------------------------------------------------------------------------------
@T.case(rn(3))
def deque_append_pop_both_ends(a):
    d = collections.deque()
    d.append(a)
    d.appendleft(a + 1)
    d.append(a * 2)
    last = d.pop()
    first = d.popleft()
    return last + first + d[0], len(d)


@T.case(rn(3))
def deque_maxlen_drops_oldest(a):
    d = collections.deque(maxlen=3)
    for i in range(5):
        d.append(a * i)
    return tuple(d), d.maxlen, len(d)


@T.case(rn(3))
def deque_maxlen_appendleft_drops_newest(a):
    d = collections.deque([a, a + 1, a + 2], maxlen=3)
    d.appendleft(a - 1)
    return list(d)


@T.case(rn(3))
def deque_extend_and_iterate(a):
    d = collections.deque([a])
    d.extend([a * 2, a * 3])
    total = a * 0
    for t in d:
        total = total + t
    return total, len(d)


@T.case(rn(3))
def deque_extendleft_reverses(a):
    d = collections.deque([0])
    d.extendleft([1, 2, 3])
    return a + d[0], list(d)


@T.case(rn(3))
def deque_indexing_negative_and_setitem(a):
    d = collections.deque([a, a + 1, a + 2])
    d[1] = d[-1] * 10
    return d[0] + d[1] + d[-1]


@T.case(rn(4))
def deque_sliding_window_sum(a):
    window = collections.deque(maxlen=2)
    outs = []
    for i in range(4):
        window.append(a[i])
        outs.append(sum(window))
    return torch.stack(outs)


@T.case(rn(3))
def deque_as_bfs_queue(a):
    graph = {0: [1, 2], 1: [3], 2: [3], 3: []}
    q = collections.deque([0])
    seen, out = {0}, a
    while q:
        n = q.popleft()
        out = out * 2 + n
        for m in graph[n]:
            if m not in seen:
                seen.add(m)
                q.append(m)
    return out


@T.case(rn(3))
def deque_truth_len_contains(a):
    d = collections.deque([1, 2])
    e = collections.deque()
    return a + bool(d) + bool(e) + len(d) + (2 in d) + (5 in d)


@T.case(rn(3))
def deque_count_index_remove(a):
    d = collections.deque([3, 1, 3, 2])
    c = d.count(3)
    i = d.index(2)
    d.remove(3)
    return a * c + i, list(d)


@T.case(rn(3))
def deque_copy_is_independent(a):
    d = collections.deque([a])
    e = d.copy()
    e.append(a * 2)
    return len(d), len(e), e[-1] + d[0]


@T.case(rn(3))
def deque_clear_and_reverse(a):
    d = collections.deque([1, 2, 3])
    d.reverse()
    first = d[0]
    d.clear()
    d.append(a)
    return d[0] * first, len(d)


@T.case(rn(3))
def deque_returned_with_constants(a):
    d = collections.deque([1, 2], maxlen=4)
    d.append(3)
    return a + 1, d


@T.case(rn(3))
def deque_of_tensor_results_reduced(a):
    d = collections.deque(torch.unbind(a.reshape(3, 1)))
    return torch.cat(list(d)) * 2


@T.case(rn(3))
def deque_equality(a):
    d = collections.deque([1, 2])
    return a + (d == collections.deque([1, 2])) + (d != collections.deque([2]))


@T.case(obj(collections.deque, [1, 2, 3]), rn(3))
def deque_argument_popleft_append(d, a):
    first = d.popleft()
    d.append(first * 10)
    return a * first + d[0], len(d)


@T.case(obj(collections.deque, [4, 5], 3), rn(3))
def deque_argument_with_maxlen_extend(d, a):
    d.extend([6, 7])
    return a + sum(d) + d.maxlen


# -- itertools.count / repeat ---------------------------------------------------------------------------------
@T.case(rn(3))
def count_zipped_with_list(a):
    out = []
    for i, t in zip(itertools.count(), [a, a * 2, a * 3]):
        out.append(t * i)
    return out


@T.case(rn(3))
def count_start_step_next(a):
    c = itertools.count(5, 2)
    first = next(c)
    second = next(c)
    return a + first * second


@T.case(rn(3))
def count_loop_with_break(a):
    out = a
    for i in itertools.count(1):
        out = out * 2
        if i >= 3:
            break
    return out


@T.case(rn(3))
def count_float_step(a):
    c = itertools.count(0.5, 0.25)
    return a * next(c) + next(c)


@T.case(rn(3))
def count_as_id_source(a):
    ids = itertools.count()
    names = {name: next(ids) for name in ("x", "y", "z")}
    return a + names["z"], names


@T.case(rn(3))
def repeat_zipped_as_scale(a):
    return [x * s for x, s in zip([a, a + 1], itertools.repeat(2))]


@T.case(rn(3))
def repeat_of_tensor_zipped(a):
    pairs = list(zip(range(3), itertools.repeat(a)))
    return sum(i * t for i, t in pairs)


@T.case(rn(3))
def repeat_with_times(a):
    return sum(itertools.repeat(a, 3)), list(itertools.repeat("x", 2))


@T.case(rn(3))
def repeat_map_pow(a):
    return list(map(pow, [1, 2, 3], itertools.repeat(2))), a + 1


# -- itertools.groupby / accumulate ------------------------------------------------------------------------
@T.case(rn(3))
def groupby_runs_of_constants(a):
    out = []
    for k, g in itertools.groupby([1, 1, 2, 3, 3, 3]):
        out.append(a * k * len(list(g)))
    return out


@T.case(rn(3))
def groupby_with_key_function(a):
    words = ["apple", "avocado", "banana", "blueberry", "cherry"]
    groups = [(k, len(list(g))) for k, g in itertools.groupby(words, key=lambda w: w[0])]
    return a + len(groups), groups


@T.case(rn(4))
def groupby_groups_of_tensors(a):
    rows = [(0, a[0]), (0, a[1]), (1, a[2]), (2, a[3])]
    sums = []
    for _, g in itertools.groupby(rows, key=operator.itemgetter(0)):
        sums.append(sum(t for _, t in g))
    return torch.stack(sums)


@T.case(rn(3))
def groupby_group_left_behind_is_empty(a):
    pairs = list(itertools.groupby("aabbb"))
    return a + len(pairs), [(k, list(g)) for k, g in pairs]


@T.case(rn(3))
def groupby_sorted_lengths(a):
    names = sorted(["x", "yy", "zz", "w", "vvv"], key=len)
    by_len = {k: list(g) for k, g in itertools.groupby(names, key=len)}
    return a * len(by_len), by_len


@T.case(rn(3))
def accumulate_tensors(a):
    return list(itertools.accumulate([a, a * 2, a * 3]))


@T.case(rn(3))
def accumulate_with_func_and_initial(a):
    maxes = list(itertools.accumulate([3, 1, 4, 1, 5], max))
    prods = list(itertools.accumulate([1, 2, 3], operator.mul, initial=10))
    return a + maxes[-1] + prods[-1], maxes, prods


@T.case(rn(4))
def accumulate_offsets_for_split(a):
    sizes = [1, 3]
    offsets = [0, *itertools.accumulate(sizes)]
    return [a[offsets[i]:offsets[i + 1]] for i in range(len(sizes))]


# -- iterators consumed in the frame ------------------------------------------------------------------------
@T.case(rn(3))
def iterator_types_checked(a):
    m = map(abs, [1, -2])
    z = zip([1], [2])
    return a + isinstance(m, map) + isinstance(z, zip) + (type(iter(())) is not type(iter([]))), list(m), list(z)


# -- inspect.signature -----------------------------------------------------------------------------------------
def _attention_processor():
    class Processor:
        def __call__(self, attn, hidden_states, encoder_hidden_states=None, attention_mask=None, scale=1.0):
            return hidden_states * scale

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.processor = Processor()

        def forward(self, x, **cross_attention_kwargs):
            params = set(inspect.signature(self.processor.__call__).parameters.keys())
            kwargs = {k: w for k, w in cross_attention_kwargs.items() if k in params}
            return self.processor(self, x, **kwargs)
    return Attention()


T.build("inspect_signature_filters_kwargs", _attention_processor, rn(3), kwargs={"scale": 2.0, "unused": 1})


def _with_defaults(x, y=2, *, z=3):
    return x


@T.case(rn(3))
def inspect_signature_parameter_defaults(a):
    sig = inspect.signature(_with_defaults)
    return a * sig.parameters["y"].default + sig.parameters["z"].default, list(sig.parameters)


@T.case(rn(3))
def inspect_signature_of_module_forward(a):
    n = len(inspect.signature(_Act.forward).parameters)
    return a * n


# -- typing ---------------------------------------------------------------------------------------------------
@T.case(rn(3))
def typing_generic_alias_compare(a):
    t = List[int]
    return a + (t == List[int]) + (t != List[float]), typing.get_origin(t) is list


@T.case(rn(3))
def typing_get_args_of_dict(a):
    args = typing.get_args(Dict[str, int])
    return a * len(args), args[0] is str


@T.case(rn(3))
def typing_jit_annotate_empty_list(a):
    sizes = torch.jit.annotate(List[int], [])
    for d in a.shape:
        sizes.append(d)
    return a.reshape(sizes[0], 1), sizes


@T.case(rn(3))
def typing_jit_annotate_optional(a):
    best = torch.jit.annotate(Optional[torch.Tensor], None)
    if best is None:
        best = a * 2
    return best


@T.case(rn(3))
def typing_any_and_union_identity(a):
    x: Any = a
    u = Union[int, str]
    return x + 1, Any is typing.Any, u == Union[str, int]


@T.case(rn(3))
def typing_tuple_alias_origin(a):
    t = Tuple[int, ...]
    return a * len(typing.get_args(t)), typing.get_origin(t) is tuple


@T.case(rn(3))
def typing_builtin_generic_alias(a):
    t = list[int]
    return a + (typing.get_origin(t) is list) + len(typing.get_args(dict[str, float]))


@T.case(rn(3))
def typing_cast_is_identity(a):
    y = typing.cast(torch.Tensor, a)
    return y * 2, isinstance(y, torch.Tensor)


@T.case(rn(3))
def typing_isinstance_special_aliases(a):
    xs = [a]
    return a + isinstance(xs, List) + isinstance({}, typing.Dict) + isinstance(3, Optional[int]) \
        + isinstance(None, Union[int, None]) + isinstance(a, int | torch.Tensor)


@T.case(rn(3))
def islice_of_count_and_repeat(a):
    firsts = list(itertools.islice(itertools.count(2, 3), 4))
    pads = list(itertools.islice(itertools.repeat(a), 1, 3))
    return a * firsts[-1], firsts, sum(pads)


@T.case(rn(3))
def takewhile_of_count(a):
    small = list(itertools.takewhile(lambda n: n * n < 20, itertools.count(1)))
    return a + len(small), small


def _squares(n):
    for i in range(n):
        yield i * i


@T.case(rn(3))
def islice_of_generator_leaves_the_rest(a):
    g = _squares(6)
    head = list(itertools.islice(g, 2))
    rest = list(g)
    return a + sum(head), head, rest
