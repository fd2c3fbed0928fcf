"""User objects around tensor code: attribute reads and writes, dataclasses, named tuples,
inheritance and super(), properties, static and class methods, __getitem__/__len__/__call__/
__contains__/__iter__ on user classes, getattr/hasattr/setattr, isinstance/issubclass with tuples,
objects passed in and objects made in the frame."""
import collections
import dataclasses
import enum
import typing

import torch
from torch import nn

from .harness import CaseTable, obj, rn

T = CaseTable("obj")


# -- plain classes -------------------------------------------------------------------------------------------
class Point:
    def __init__(self, x, y):
        self.x = x
        self.y = y

    def norm2(self):
        return self.x * self.x + self.y * self.y

    def scaled(self, k):
        return Point(self.x * k, self.y * k)


class Counter:
    start = 10                         # class attribute

    def __init__(self):
        self.n = 0

    def bump(self, by=1):
        self.n += by
        return self.n


@T.case(obj(Point, rn(3), rn(3)))
def read_attributes_of_input_object(p):
    return p.x * 2 + p.y


@T.case(obj(Point, rn(3), rn(3)))
def call_method_of_input_object(p):
    return p.norm2()


@T.case(obj(Point, rn(3), rn(3)))
def method_returning_new_object(p):
    q = p.scaled(3)
    return q.norm2(), type(q).__name__


@T.case(rn(3), rn(3))
def object_made_in_frame(a, b):
    p = Point(a, b)
    p.x = p.x + 1
    return p.norm2()


@T.case(rn(3))
def class_attribute_read(a):
    c = Counter()
    return a + c.start + Counter.start


@T.case(rn(3))
def instance_attribute_shadows_class_attribute(a):
    c = Counter()
    c.start = 1
    return a * c.start, Counter.start


@T.case(rn(3))
def method_mutating_new_object(a):
    c = Counter()
    c.bump()
    c.bump(by=4)
    return a * c.n


# -- dataclasses ---------------------------------------------------------------------------------------------
@dataclasses.dataclass
class Config:
    hidden: int = 4
    scale: float = 0.5
    act: str = "relu"


@dataclasses.dataclass
class Pair:
    left: torch.Tensor
    right: torch.Tensor

    def total(self):
        return self.left + self.right


@dataclasses.dataclass(frozen=True)
class Frozen:
    k: int
    name: str = "f"


@T.case(rn(4))
def dataclass_defaults(a):
    cfg = Config()
    return getattr(torch, cfg.act)(a) * cfg.scale + cfg.hidden


@T.case(rn(4))
def dataclass_keyword_construction(a):
    cfg = Config(hidden=2, act="tanh")
    return getattr(torch, cfg.act)(a) * cfg.hidden


@T.case(obj(Pair, rn(3), rn(3)))
def dataclass_input_with_tensors(p):
    return p.total() * 2


@T.case(rn(3), rn(3))
def dataclass_built_from_tensors(a, b):
    p = Pair(a, b)
    p.left = p.left * 3
    return p.total()


@T.case(rn(3))
def frozen_dataclass_fields(a):
    f = Frozen(3)
    return a * f.k, f.name


@T.case(obj(Config, 8, 2.0, "sigmoid"))
def dataclass_config_argument(cfg):
    return torch.ones(cfg.hidden) * cfg.scale


@T.case(rn(3))
def dataclass_fields_and_replace(a):
    cfg = Config()
    names = [f.name for f in dataclasses.fields(cfg)]
    return a * len(names), names


# -- named tuples --------------------------------------------------------------------------------------------
Vec = collections.namedtuple("Vec", ["u", "v"])


class Span(typing.NamedTuple):
    lo: torch.Tensor
    hi: torch.Tensor
    tag: str = "span"


@T.case(obj(Vec, rn(3), rn(3)))
def namedtuple_input_fields(p):
    return p.u - p.v, p[0] * 2


@T.case(rn(3), rn(3))
def namedtuple_made_and_returned(a, b):
    return Vec(a + 1, b - 1)


@T.case(rn(3), rn(3))
def typing_namedtuple_with_default(a, b):
    s = Span(a, b)
    return s.hi - s.lo, s.tag


@T.case(rn(3), rn(3))
def namedtuple_unpack_and_replace(a, b):
    v = Vec(a, b)
    u, w = v
    v2 = v._replace(u=w)
    return v2, u + w


@T.case(rn(3), rn(3))
def namedtuple_asdict_and_fields(a, b):
    v = Vec(a, b)
    d = v._asdict()
    return d["u"] * 2, Vec._fields


@T.case(rn(4, 5))
def structseq_fields(a):
    m = a.max(dim=1)
    s = torch.sort(a, dim=0)
    return m.values + m.indices, s.values[0], s[1]


@T.case(rn(4, 5))
def return_structseq_directly(a):
    return torch.min(a, 1)


# -- inheritance, super, properties, static/class methods ----------------------------------------------------
class Base:
    factor = 2

    def __init__(self, bias):
        self.bias = bias

    def apply(self, x):
        return x * self.factor + self.bias

    @property
    def doubled_bias(self):
        return self.bias * 2

    @staticmethod
    def helper(x):
        return x - 1

    @classmethod
    def make(cls, bias):
        return cls(bias)


class Child(Base):
    factor = 3

    def __init__(self, bias, extra):
        super().__init__(bias)
        self.extra = extra

    def apply(self, x):
        return super().apply(x) + self.extra


class GrandChild(Child):
    def apply(self, x):
        return super(Child, self).apply(x) - 100


@T.case(rn(3))
def subclass_overrides_and_super(a):
    return Child(1.0, 0.5).apply(a)


@T.case(rn(3))
def two_argument_super_skips_a_level(a):
    return GrandChild(1.0, 0.5).apply(a)


@T.case(rn(3))
def property_read(a):
    b = Base(1.5)
    return a + b.doubled_bias


@T.case(rn(3))
def staticmethod_via_instance_and_class(a):
    b = Base(0.0)
    return b.helper(a) + Base.helper(a) + Child.helper(a)


@T.case(rn(3))
def classmethod_constructs_subclass(a):
    c = Child.make.__func__(Child, 2.0) if False else Base.make(2.0)
    return c.apply(a), type(c).__name__


@T.case(rn(3))
def class_attribute_through_subclass(a):
    return a * Child.factor + Base.factor, Child(0, 0).factor


class Temperature:
    def __init__(self, c):
        self._c = c

    @property
    def c(self):
        return self._c

    @c.setter
    def c(self, v):
        self._c = v * 1

    @property
    def f(self):
        return self._c * 9 / 5 + 32


@T.case(rn(3))
def property_setter_on_new_object(a):
    t = Temperature(a)
    t.c = t.c + 10
    return t.f


@T.case(obj(Temperature, rn(3)))
def property_setter_on_input_object(t):
    t.c = t.c * 2
    return t.f


# -- dunder protocols ----------------------------------------------------------------------------------------
class Bank:
    def __init__(self, tensors):
        self.tensors = tensors

    def __getitem__(self, i):
        return self.tensors[i] * 10

    def __len__(self):
        return len(self.tensors)

    def __contains__(self, i):
        return 0 <= i < len(self.tensors)

    def __call__(self, x):
        return sum(t * x for t in self.tensors)


class Affine:
    def __init__(self, w, b):
        self.w, self.b = w, b

    def __call__(self, x):
        return x * self.w + self.b


@T.case(rn(3), rn(3))
def getitem_on_user_class(a, b):
    bank = Bank([a, b])
    return bank[1] - bank[0]


@T.case(rn(3), rn(3))
def len_and_contains_on_user_class(a, b):
    bank = Bank([a, b, a])
    return a * len(bank), 1 in bank, 7 in bank


@T.case(rn(3), rn(3))
def call_on_user_class(a, b):
    bank = Bank([a, b])
    return bank(2.0)


@T.case(obj(Affine, rn(3), rn(3)), rn(3))
def callable_object_input(f, x):
    return f(x) + f(x * 2)


class Chain:
    def __init__(self, *fns):
        self.fns = fns

    def __call__(self, x):
        for fn in self.fns:
            x = fn(x)
        return x


@T.case(rn(3))
def object_holding_functions(a):
    return Chain(torch.sin, lambda t: t * 2, torch.cos)(a)


class Vector2:
    def __init__(self, a, b):
        self.a, self.b = a, b

    def __add__(self, other):
        return Vector2(self.a + other.a, self.b + other.b)

    def __mul__(self, k):
        return Vector2(self.a * k, self.b * k)

    def __neg__(self):
        return Vector2(-self.a, -self.b)


@T.case(rn(3), rn(3))
def operator_overloading_on_user_class(a, b):
    v = Vector2(a, b) + Vector2(b, a) * 2
    w = -v
    return w.a, w.b


# -- getattr / hasattr / setattr / isinstance ----------------------------------------------------------------
@T.case(obj(Point, rn(3), rn(3)))
def getattr_with_name_and_default(p):
    name = "y"
    return getattr(p, name) + getattr(p, "z", 1.0), hasattr(p, "x"), hasattr(p, "z")


@T.case(rn(3))
def setattr_on_new_object(a):
    c = Counter()
    for i, name in enumerate(("u", "v")):
        setattr(c, name, a * i)
    return c.u + c.v, hasattr(c, "u")


@T.case(rn(3))
def isinstance_with_tuples(a):
    vals = [1, 2.0, "s", a, (1,), None]
    kinds = [isinstance(v, (int, float)) for v in vals]
    return a * sum(kinds), isinstance(a, (torch.Tensor, list)), isinstance(None, type(None))


@T.case(rn(3))
def issubclass_with_tuples(a):
    flags = (issubclass(Child, Base), issubclass(Base, (Child, int)), issubclass(GrandChild, (int, Base)),
             issubclass(bool, int))
    return a * sum(flags), flags


@T.case(obj(Child, rn(3), rn(3)))
def isinstance_of_input_object(c):
    if isinstance(c, Base) and not isinstance(c, GrandChild):
        return c.apply(c.bias)
    return c.bias


@T.case(rn(3))
def type_comparisons(a):
    p = Point(a, a)
    return a * (type(p) is Point), type(p) == Point, type(a) is torch.Tensor  # noqa: E721


@T.case(rn(3))
def callable_checks(a):
    return a * callable(torch.sin), callable(Point), callable(3), callable(Affine(1, 2))


# -- enums and modules holding objects -----------------------------------------------------------------------
class Mode(enum.Enum):
    TRAIN = "train"
    EVAL = "eval"


class Act(enum.IntEnum):
    RELU = 1
    TANH = 2


@T.case(rn(3))
def enum_members_and_values(a):
    m = Mode.TRAIN
    if m is Mode.TRAIN and m.value == "train":
        return a * 2, m.name
    return a


@T.case(rn(3))
def int_enum_arithmetic(a):
    return a * (Act.TANH + 1), Act.RELU == 1


class Holder(nn.Module):
    def __init__(self):
        super().__init__()
        self.cfg = Config(hidden=3, scale=2.0)
        self.point = Point(1.0, 2.0)
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x) * self.cfg.scale + self.point.y * self.cfg.hidden


T.build("module_holding_plain_objects", Holder, rn(2, 4))


class Registry(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleDict({"a": nn.Linear(3, 3), "b": nn.Linear(3, 3)})
        self.order = ["b", "a"]

    def forward(self, x):
        for k in self.order:
            x = self.blocks[k](x).relu()
        return x


T.build("module_with_name_list", Registry, rn(2, 3))


class WithHelperObject(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3)
        self.post = Affine(2.0, -1.0)

    def forward(self, x):
        return self.post(self.fc(x))


T.build("module_calls_user_callable", WithHelperObject, rn(2, 3))


@T.case(rn(3))
def object_identity_and_equality(a):
    p = Point(a, a)
    q = p
    r = Point(a, a)
    return a * (p is q), p is r, p == q


@T.case(obj(Point, rn(3), 5))
def object_with_int_attribute_branch(p):
    if p.y > 3:
        return p.x * p.y
    return p.x


@T.case(rn(3))
def nested_objects(a):
    outer = Point(Point(a, a * 2), Point(a * 3, a * 4))
    return outer.x.y + outer.y.x


@T.case(rn(3))
def list_of_objects_sorted_by_attribute(a):
    ps = [Point(a * k, k) for k in (3, 1, 2)]
    ps.sort(key=lambda p: p.y)
    return [p.x for p in ps]


@T.case(rn(3))
def dict_of_objects(a):
    d = {"p": Point(a, 1), "q": Point(a * 2, 2)}
    return sum(v.x * v.y for v in d.values())


@T.case(rn(3))
def vars_like_access_via_dict_attr(a):
    p = Point(a, 2)
    return a + len(p.__dict__), sorted(p.__dict__)


@T.case(rn(3))
def class_name_and_qualname(a):
    return a * len(Point.__name__), Child.__qualname__, Point.norm2.__name__


# -- objects made in the frame returned (built by the entry's Python wrapper) --------------------------------------
@T.case(rn(3), rn(3))
def return_dataclass_made_in_frame(a, b):
    return Pair(a * 2, b + 1)


@T.case(rn(3))
def return_plain_object_in_a_list(a):
    return [Point(a, a * 2), 3]


@T.case(rn(3))
def return_ordered_dict_and_set(a):
    od = collections.OrderedDict()
    od["second"] = a * 2
    od["first"] = a
    return od, {1, 2, 3}


@T.case(rn(3))
def return_defaultdict(a):
    groups = collections.defaultdict(list)
    groups["x"].append(a)
    groups["y"].append(a * 2)
    return groups
