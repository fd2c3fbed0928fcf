"""Containers and classes (issue 17): user list / tuple / dict subclasses made in the frame (with
and without methods and attributes, returned as real instances), dicts keyed by tensors and
parameters, builtin min/max over tensors, torch.nn modules made in forward, lazy modules on their
first call, Python attributes on tensors, and tensor subclasses passed in."""
import torch
from torch import nn

from .harness import CaseTable, obj, rg, rn

T = CaseTable("classes")


# -- list subclasses -----------------------------------------------------------------------------------------
class Batch(list):
    def total(self):
        s = 0
        for v in self:
            s = s + v
        return s

    def doubled(self):
        return Batch(v * 2 for v in self)


class PlainList(list):
    pass


class Tagged(list):
    def __init__(self, items, scale):
        super().__init__(items)
        self.scale = scale

    def weighted(self):
        return sum(self) * self.scale


class Scaled(list):
    def __getitem__(self, i):
        return super().__getitem__(i) * 10


@T.case(rn(3), rn(3))
def list_subclass_method(x, y):
    b = Batch([x, y])
    b.append(x * 2)
    return b.total(), len(b)


@T.case(rn(3), rn(3))
def list_subclass_returned(x, y):
    b = PlainList([x, y])
    b.append(x + 1)
    return b


@T.case(rn(3), rn(3))
def list_subclass_method_returns_new_instance(x, y):
    return Batch([x, y + 1]).doubled()


@T.case(rn(3), rn(3))
def list_subclass_init_with_attribute(x, y):
    t = Tagged([x, y], 3)
    t.append(x * y)
    return t.weighted(), t.scale, len(t)


@T.case(rn(3), rn(3))
def list_subclass_returned_with_attribute(x, y):
    t = Tagged([x], 2)
    t.extend([y, y * 2])
    return t


@T.case(rn(3), rn(3))
def list_subclass_own_getitem(x, y):
    s = Scaled([x, y])
    return s[0] + s[1], [v for v in s]


@T.case(rn(4), rn(4))
def list_subclass_to_torch_ops(x, y):
    b = Batch([x, y])
    return torch.stack(b), torch.cat(b), sum(b)


@T.case(rn(3), rn(3))
def list_subclass_builtin_operators(x, y):
    b = Batch([x, y])
    joined = b + [x]
    part = b[1:]
    return type(joined).__name__, type(part).__name__, len(joined), part[0] * 2, Batch([1, 2]) == [1, 2]


@T.case(rn(3), rn(3))
def list_subclass_inplace_add_keeps_class(x, y):
    b = Batch([x])
    b += [y, x * y]
    return b


@T.case(rn(3), rn(3))
def list_subclass_mutators(x, y):
    b = PlainList([x])
    b.insert(0, y)
    last = b.pop()
    b.extend([x + 1, x + 2])
    del b[0]
    b[0] = b[0] * 3
    return last, b


@T.case(rn(3))
def list_subclass_sort_and_search(x):
    b = Batch([3, 1, 2])
    b.sort()
    b.reverse()
    return x * b[0], b, b.index(2), b.count(1), 2 in b, isinstance(b, list)


class Stack(list):
    def push(self, v):
        self.append(v)
        return self

    def top(self):
        return self[-1]


@T.case(rn(3), rn(3))
def list_subclass_methods_call_builtin_ones(x, y):
    s = Stack()
    s.push(x).push(y * 2)
    empty = Stack()
    return s.top() + s[0], len(s), bool(empty), bool(s), list(s)


@T.case(rn(3), rn(3))
def list_subclass_iteration_builtins(x, y):
    b = Batch([x, y, x * y])
    out = [i * t for i, t in enumerate(b)]
    return out, list(reversed(b)), type(list(b)).__name__, isinstance(b, Batch), isinstance(b, Stack)


# -- tuple subclasses ----------------------------------------------------------------------------------------
class Pair(tuple):
    @property
    def first(self):
        return self[0]

    def swapped(self):
        return Pair((self[1], self[0]))


class PlainTuple(tuple):
    pass


@T.case(rn(3), rn(3))
def tuple_subclass_method_and_property(x, y):
    p = Pair((x, y))
    return p.first * 2 + p[1], len(p), p.swapped()


@T.case(rn(3), rn(3))
def tuple_subclass_returned(x, y):
    return PlainTuple((x, y + 1))


@T.case(rn(3), rn(3))
def tuple_subclass_unpacking_and_concat(x, y):
    p = Pair([x, y])
    a, b = p
    longer = p + (x,)
    return a - b, type(longer).__name__, len(longer), tuple(p)[1], isinstance(p, tuple)


@T.case(rn(3))
def tuple_subclass_with_attribute(x):
    p = PlainTuple((x, 2))
    p.note = 5
    return p, p.note * x


@T.case(rn(3))
def nested_subclasses_returned(x):
    return Pair((Batch([x]), {"a": PlainTuple((x * 2,))}))


@T.case(rn(3))
def tuple_subclass_constant_methods(x):
    p = PlainTuple((1, 2, 2, 3))
    return x * p.count(2), p.index(3), p == (1, 2, 2, 3), p[1:], len(p)


# -- list / tuple subclass instances passed in --------------------------------------------------------------
class Coords(tuple):
    def __new__(cls, a, b):
        return super().__new__(cls, (a, b))

    def norm2(self):
        return self[0] * self[0] + self[1] * self[1]


@T.case(obj(Batch, [rn(3), rn(3)]))
def list_subclass_input_methods(b):
    return b.total() * len(b), b[0], [t * 2 for t in b], isinstance(b, Batch)


@T.case(obj(Batch, [rn(3)]), rn(3))
def list_subclass_input_mutated(b, x):
    b.append(x * 2)
    b[0] = b[0] + 1
    return len(b), b.total()


@T.case(obj(Pair, [rn(3), rn(3)]))
def tuple_subclass_input_property(p):
    return p.first * 2, p.swapped(), len(p), p + (1,)


@T.case(obj(Coords, rn(3), rn(3)))
def tuple_subclass_input_with_own_new(c):
    a, b = c
    return c.norm2(), a - b, torch.stack([a, b])


# -- dict subclasses -----------------------------------------------------------------------------------------
class Config(dict):
    def get_or(self, k, d):
        return self[k] if k in self else d


class Defaulting(dict):
    def __missing__(self, key):
        return 0


@T.case(rn(3))
def dict_subclass_method(x):
    d = Config(a=x)
    d["b"] = x + 1
    return d.get_or("b", 0) + d.get_or("c", 2)


@T.case(rn(3))
def dict_subclass_returned(x):
    d = Config(a=x)
    d["b"] = x * 2
    return d


@T.case(rn(3))
def dict_subclass_missing(x):
    d = Defaulting(a=x)
    return d["a"] + d["zzz"]


class Registry(dict):
    def __init__(self, name, **kw):
        super().__init__(**kw)
        self.name = name

    def scaled(self, k):
        return {key: v * k for key, v in self.items()}


@T.case(rn(3))
def dict_subclass_with_attribute_and_iteration(x):
    r = Registry("reg", a=x, b=x + 1)
    r.update(c=x * 3)
    keys = [k for k in r]
    return r.scaled(2), keys, r.name, len(r)


# -- dicts keyed by tensors and parameters -------------------------------------------------------------------
def _two_layers():
    return nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 2))


class ParamIndex(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = _two_layers()

    def forward(self, x):
        params = list(self.parameters())
        index = {p: i for i, p in enumerate(params)}
        return self.net(x) * index[self.net[1].weight], self.net[0].bias in index, x in index


class ParamGroups(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = _two_layers()

    def forward(self, x):
        decay = {}
        for name, p in self.named_parameters():
            decay[p] = 0.1 if name.endswith("weight") else 0.0
        out = self.net(x)
        for p, wd in decay.items():
            out = out + wd * p.sum()
        return out, sorted(decay.values())


T.build("params_index_dict", ParamIndex, rn(2, 3))
T.build("params_dict_iteration", ParamGroups, rn(2, 3), grad=True)


@T.case(rn(3), rn(3), rn(3))
def tensor_keyed_comprehension(x, y, z):
    d = {t: i for i, t in enumerate([x, y, z])}
    return x * d[y] + d[z], y in d, (x + 1) in d


@T.case(rn(3), rn(3))
def tensor_keyed_literal_and_get(x, y):
    d = {x: 2, y: 3}
    return x * d.get(x) + d.get(x * 2, 5), len(d)


@T.case(rn(3), rn(3))
def tensor_keyed_from_zip(x, y):
    d = dict(zip([x, y], ["a", "b"]))
    out = 0
    for k, v in d.items():
        out = out + k * len(v)
    return out, list(d.values())


@T.case(rn(3), rn(3))
def tensor_keyed_pop_and_del(x, y):
    d = {x: 1, y: 2}
    v = d.pop(x)
    del d[y]
    return x * v, len(d), x in d


@T.case(rn(3), rn(3))
def tensor_keyed_setdefault_update(x, y):
    d = {}
    d.setdefault(x, []).append(x * 2)
    d.setdefault(x, []).append(y)
    d[y] = [y]
    return sum(d[x]), len(d), [len(v) for v in d.values()]


@T.case(rn(3))
def tensor_key_same_object_after_inplace(x):
    y = x.clone()
    d = {y: "clone"}
    y.add_(1)
    return y, d[y], y in d


class ChildNames(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(3, 3)
        self.b = nn.Linear(3, 3)

    def forward(self, x):
        names = {m: n for n, m in self.named_children()}
        order = sorted(names.values())
        return self.b(self.a(x)), names[self.a], order, self.b in names


T.build("module_keyed_dict", ChildNames, rn(2, 3))


@T.case(rn(3), rn(3))
def tensor_keyed_defaultdict(x, y):
    import collections
    d = collections.defaultdict(list)
    for t in (x, y, x):
        d[t].append(t * 2)
    return len(d), [len(v) for v in d.values()], sum(d[x])


# -- builtin min / max over tensors --------------------------------------------------------------------------
@T.case(rn(1), rn(1), rn(1))
def max_of_tensor_list(a, b, c):
    return max([a, b, c]) * 2


@T.case(rn(1), rn(1))
def min_of_two_tensors(a, b):
    return min(a, b) + 1


@T.case(rn(1), rn(1), rn(1))
def max_of_star_args_and_generator(a, b, c):
    return max(a, b, c) - min(t * 2 for t in (a, b, c))


@T.case(rn(4))
def max_over_rows_of_a_tensor(x):
    return max(x) + 0, min(x) * 1


@T.case(rg(1), rg(1), grad=True)
def max_of_tensors_grads(a, b):
    return max([a * 3, b]) * 2 + a + b          # (b's grad: eager None when a*3 wins)


@T.case(rn(1), rn(1))
def min_max_nested(a, b):
    hi = max(a, b)
    lo = min(a, b)
    return hi - lo, max([hi, lo * 2, a]) * 1


@T.case(rn(3), rn(3))
def max_of_single_tensor_list_is_the_tensor(x, y):
    return max([x]) is x, min([y + 1]) * 2


@T.case(rn(3))
def max_over_unbind(x):
    parts = x.unbind()
    return max(parts) - min(parts)


# -- torch.nn modules made in forward -------------------------------------------------------------------------
@T.case(rn(2, 5))
def stateless_modules_made_in_forward(x):
    return nn.ReLU()(x) + nn.Softmax(dim=-1)(x) + nn.Dropout(0.0)(x)


@T.case(rn(2, 3, 4))
def flatten_module_made_in_forward(x):
    return nn.Flatten()(x).sum(1), nn.Identity()(x).shape


@T.case(rn(2, 5))
def activation_modules_with_arguments(x):
    return nn.GELU(approximate="tanh")(x) - nn.LeakyReLU(0.2)(x) + nn.Hardtanh(-0.5, 0.5)(x)


class ScaleBy(nn.Module):
    def __init__(self, k):
        super().__init__()
        self.k = k

    def forward(self, x):
        return x * self.k


class OnesBuffer(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.register_buffer("b", torch.ones(n) * 2)

    def forward(self, x):
        return x + self.b


class Counting(nn.Module):
    def __init__(self):
        super().__init__()
        self.act = nn.ReLU()
        self.scale = ScaleBy(2)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return self.scale(self.act(x)) * self.calls, self.training


class HoldsTensor(nn.Module):
    def __init__(self, t):
        super().__init__()
        self.t = t
        self.register_buffer("c", t.clone())

    def forward(self, x):
        return x * self.t + self.c, len(list(self.buffers()))


@T.case(rn(3))
def user_module_made_in_forward(x):
    return ScaleBy(3)(x), ScaleBy(k=0.5)(x + 1)


@T.case(rn(3))
def user_module_with_buffer_made_in_forward(x):
    return OnesBuffer(3)(x)


@T.case(rn(3))
def nested_user_modules_made_in_forward(x):
    m = Counting()
    a = m(x)
    m.eval()
    b = m(x)
    return a, b, m.calls, isinstance(m.scale, ScaleBy)


@T.case(rn(3))
def user_module_holding_input_tensors(x):
    return HoldsTensor(x + 1)(x)


# -- lazy modules ----------------------------------------------------------------------------------------------
class LazyNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = nn.LazyBatchNorm1d()

    def forward(self, x):
        return self.bn(x) * 2


class LazyInSequence(nn.Module):
    def __init__(self):
        super().__init__()
        self.seq = nn.Sequential(nn.LazyBatchNorm1d(), nn.ReLU(), nn.LazyBatchNorm1d(affine=False))

    def forward(self, x):
        return self.seq(x + 1)


T.build("lazy_batchnorm_first_call", LazyNorm, rn(4, 5))
T.build("lazy_modules_in_sequential", LazyInSequence, rn(6, 3))


# -- Python attributes on tensors -------------------------------------------------------------------------------
class BufferTag(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("scale", torch.ones(3))

    def forward(self, x):
        self.scale.last_input = x * 2
        return x * self.scale + self.scale.last_input


class ParamTag(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        self.lin.weight.seen = True
        return self.lin(x), self.lin.weight.seen


def _tensor_dicts(m):
    """The Python attributes of each parameter and buffer (torch.compile's own markers left out)."""
    return {k: {a: v for a, v in vars(t).items() if not a.startswith("_dynamo")}
            for k, t in m.state_dict(keep_vars=True).items()}


T.build("buffer_attribute_set_and_read", BufferTag, rn(3), state=_tensor_dicts)
T.build("parameter_attribute_set_and_read", ParamTag, rn(3), state=_tensor_dicts)


@T.case(rn(3))
def input_tensor_attribute_set_and_read(x):
    x.tag = 2
    return x * x.tag


@T.case(rn(3), rn(3))
def input_tensor_attribute_holds_tensor(x, y):
    x.other = y * 2
    x.other = x.other + 1
    return x + x.other, hasattr(x, "other"), hasattr(x, "missing")


@T.case(rn(3))
def input_tensor_attribute_deleted(x):
    x.tmp = 5
    r = x * x.tmp
    del x.tmp
    return r, hasattr(x, "tmp")


def _tensor_with_attr():
    t = torch.randn(3)
    t.scale = 4
    return t


@T.case(obj(_tensor_with_attr))
def input_tensor_existing_attribute_read(x):
    return x * x.scale


@T.case(rn(3))
def input_tensor_attribute_string_in_fstring(x):
    x.label = "in"
    return x + 1, f"{x.label}-{x.dim()}"


@T.case(rn(3))
def made_tensor_attribute_set_and_read(x):
    y = x + 1
    y.tag = 3
    y.halved = y / 2
    return y * y.tag + y.halved, hasattr(y, "tag"), hasattr(x, "tag")


@T.case(rn(3))
def inplace_result_attribute_is_the_inputs(x):
    y = x.mul_(2)
    y.seen = 7
    return x * x.seen


# -- tensor subclasses passed in --------------------------------------------------------------------------------
class MyTensor(torch.Tensor):
    def doubled(self):
        return self * 2

    @property
    def twice(self):
        return self + self

    unit = 3


def _my_tensor():
    return torch.randn(3).as_subclass(MyTensor)


def _my_leaf():
    return torch.Tensor._make_subclass(MyTensor, torch.randn(3), True)


@T.case(obj(_my_tensor))
def subclass_input_ops_keep_class(x):
    return x * 2 + 1, (x * 3).sin()


@T.case(obj(_my_tensor))
def subclass_methods_property_class_attribute(x):
    return x.doubled().sum(), x.twice, x * x.unit


@T.case(obj(_my_tensor), rn(3))
def subclass_mixed_with_plain_tensor(x, y):
    return x + y, y * x, torch.stack([x, y])


@T.case(obj(_my_tensor))
def subclass_type_checks(x):
    y = x + 1
    return isinstance(y, MyTensor), type(y).__name__, isinstance(x.sum(), MyTensor), y


@T.case(obj(_my_tensor))
def subclass_returned_in_containers(x):
    return x, [x * 2], {"s": x.sum(), "parts": (x[0], x[1:])}


@T.case(obj(_my_leaf), grad=True)
def subclass_leaf_grads(x):
    return x.doubled() * x


@T.case(rn(3))
def make_subclass_in_frame(x):
    t = torch.Tensor._make_subclass(MyTensor, x)
    return t * 2, t.doubled()


@T.case(rn(3))
def as_subclass_in_frame(x):
    t = (x + 1).as_subclass(MyTensor)
    return t * 2, t.twice, isinstance(t, MyTensor)


@T.case(obj(_my_tensor))
def subclass_input_mutated_in_place(x):
    x.mul_(2)
    return x.add(1)
