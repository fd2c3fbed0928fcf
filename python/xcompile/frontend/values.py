"""The closed set of symbolic values the interpreter pushes on its stack.

Each class has one job and explicit fields; none of them knows the interpreter.
Behaviour (attribute lookup, calls, iteration) lives in tables keyed by value
class (``attrs.py``, ``calls.py``, ``iteration.py``), so a new case is a new row.

Common fields:
    source   where the object came from outside the frame (None for values made here)
    covered  the object's identity is already pinned by an enclosing guard (an attribute
             of a module under MODULE_TREE), so reading it needs no guard of its own
"""
from __future__ import annotations

import contextlib
import enum
import functools
import types
from dataclasses import dataclass, field
from typing import Any

import torch

from ..guards.sources import Source
from .exc import Unsupported, register_exception_value

# Python values that are immutable and foldable: a ConstantValue may hold these (and tuples,
# frozensets, slices of them).
CONSTANT_TYPES = (type(None), bool, int, float, complex, str, bytes, type(Ellipsis), type(NotImplemented),
                  torch.dtype, torch.device, torch.layout, torch.memory_format, torch.Size, range,
                  torch.finfo, torch.iinfo, types.CodeType)


def is_constant(obj: Any) -> bool:
    if isinstance(obj, (tuple, frozenset)) and type(obj) in (tuple, frozenset, torch.Size):
        return all(is_constant(o) for o in obj)
    if isinstance(obj, slice):
        return is_constant(obj.start) and is_constant(obj.stop) and is_constant(obj.step)
    return type(obj) in CONSTANT_TYPES or isinstance(obj, enum.Enum)   # enum members are singletons


class Value:
    """Base: ``source`` and ``covered`` only.  Subclasses are dataclasses."""

    source: Source | None = None
    covered: bool = False
    # What replacement code hands out for this value instead of its own real object, and where
    # it reads it: (object, source or None). Set for a compiled function or module traced as the
    # function it wraps (tracing_rules._rebuilt_as).
    rebuild_as: tuple | None = None

    def python_type(self) -> type:
        raise NotImplementedError(type(self).__name__)

    def describe(self) -> str:
        return type(self).__name__


@dataclass(eq=False)
class NullValue(Value):
    """The NULL that LOAD_GLOBAL / PUSH_NULL put below a callable, or an unbound local."""

    def describe(self) -> str:
        return "NULL"


NULL = NullValue()


@dataclass(eq=False)
class LazyValue(Value):
    """A real object reached through ``source`` and not wrapped yet (wrapped on first use)."""

    obj: Any
    source: Source | None
    covered: bool = False


@dataclass(eq=False)
class ConstantValue(Value):
    value: Any
    source: Source | None = None
    covered: bool = False

    def python_type(self) -> type:
        return type(self.value)

    def describe(self) -> str:
        return f"constant {self.value!r}"


@dataclass(eq=False)
class TensorValue(Value):
    node: torch.fx.Node
    fake: torch.Tensor
    cls: type = torch.Tensor                 # torch.Tensor or torch.nn.Parameter
    source: Source | None = None
    covered: bool = False

    def python_type(self) -> type:
        return self.cls

    def describe(self) -> str:
        return f"tensor {self.node.name}"


@dataclass(eq=False)
class TupleValue(Value):
    items: list[Value]
    cls: type = tuple                        # tuple, or a namedtuple / structseq class
    source: Source | None = None
    covered: bool = False

    def python_type(self) -> type:
        return self.cls

    def describe(self) -> str:
        return "tuple" if self.cls is tuple else f"namedtuple {self.cls.__name__}"


@dataclass(eq=False)
class ListValue(Value):
    """``items`` is the trace's view of the list.  A list from outside the frame starts *blind*
    (``blind`` set, ``side_effects.BlindList``): nothing about its contents is known or guarded
    until ``items`` is first read, which installs its length guard; until then ``append`` /
    ``extend`` / ``clear`` are recorded on ``blind`` without looking."""

    items: list[Value]
    source: Source | None = None
    covered: bool = False
    blind: Any = None

    def python_type(self) -> type:
        return list

    def describe(self) -> str:
        return "list"


def _list_items(self: ListValue) -> list[Value]:
    blind = self.__dict__.get("blind")
    if blind is not None:                     # first look at the contents: guard, then materialize
        self.__dict__["blind"] = None
        self.__dict__["_items"] = blind.observe()
    return self.__dict__["_items"]


def _set_list_items(self: ListValue, items: list[Value]) -> None:
    self.__dict__["_items"] = items


ListValue.items = property(_list_items, _set_list_items)      # type: ignore[assignment]


def _set_items(self: "SetValue") -> list[Value]:
    blind = self.__dict__.get("blind")
    if blind is not None:
        raise Unsupported(f"reading the contents of a set from outside the frame ({blind.where()})",
                          "Adding to and discarding from such a set is supported; reading it (`in`, len, "
                          "iteration) needs a guard on its contents, which xcompile does not have. Keep "
                          "the set's contents out of the compiled code, or use a dict/list.")
    return self.__dict__["_items"]


def _set_set_items(self: "SetValue", items: list[Value]) -> None:
    self.__dict__["_items"] = items


@dataclass(eq=False)
class DictValue(Value):
    items: dict[Any, Value]                  # keys are Python constants
    source: Source | None = None
    covered: bool = False
    cls: type = dict                         # dict, collections.OrderedDict or collections.defaultdict
    default_factory: Value | None = None     # defaultdict: called for a missing key

    def python_type(self) -> type:
        return self.cls

    def describe(self) -> str:
        return "dict"


@dataclass(eq=False)
class SetValue(Value):
    """A set: constants compare by value, everything else by identity.  A set from outside the
    frame is *blind* (``blind``, ``side_effects.BlindSet``): ``add`` / ``discard`` / ``update`` /
    ``clear`` are recorded and replayed after the graph; its contents cannot be guarded, so reading
    them (``in``, ``len``, iteration) is Unsupported."""

    items: list[Value]
    source: Source | None = None
    covered: bool = False
    blind: Any = None

    def python_type(self) -> type:
        return set

    def describe(self) -> str:
        return "set"


@dataclass(eq=False)
class DictViewValue(Value):
    """``d.keys()`` / ``d.values()`` / ``d.items()``."""

    dict_value: DictValue
    kind: str                                # "keys" | "values" | "items"

    def python_type(self) -> type:
        return {"keys": type({}.keys()), "values": type({}.values()), "items": type({}.items())}[self.kind]


@dataclass(eq=False)
class IteratorValue(Value):
    """A finite iterator over already-known items (lists, ranges, zip, enumerate, genexprs...)."""

    items: list[Value]
    pos: int = 0
    # what made it, when not a list iterator: a key of stdlib_iterators.REBUILD (map, zip...)
    # saying how an iterator that outlives the frame is rebuilt and which type it has
    kind: Any = None

    def python_type(self) -> type:
        return type(iter([])) if self.kind is None else self.kind

    def describe(self) -> str:
        return "iterator"


@dataclass(eq=False)
class GeneratorValue(Value):
    """A generator called in the traced code, run lazily (``frontend/generators.py``): ``frame``
    is its frontend frame, suspended after its last ``yield``; ``result`` its return value once
    exhausted."""

    frame: Any
    exhausted: bool = False
    result: Value | None = None

    def python_type(self) -> type:
        return types.GeneratorType

    def describe(self) -> str:
        return f"generator {self.frame.code.co_qualname}"


@dataclass(eq=False)
class LazyIterValue(Value):
    """enumerate / zip / map / filter over a generator: advanced item by item. ``pull(tx)``
    returns the next item or None at the end."""

    pull: Any
    what: str = "iterator"

    def python_type(self) -> type:
        return type(iter([]))

    def describe(self) -> str:
        return f"lazy {self.what}"


@dataclass(eq=False)
class FunctionValue(Value):
    """A real Python function (inlined when called)."""

    fn: types.FunctionType
    source: Source | None = None
    covered: bool = False

    def python_type(self) -> type:
        return types.FunctionType

    def describe(self) -> str:
        return f"function {self.fn.__qualname__}"


@dataclass(eq=False)
class CellValue(Value):
    """A closure cell.  ``external`` cells belong to a real function's closure: ``real_cell`` is
    that cell and ``cell_source`` reaches it (a rebinding is a side effect applied after the graph)."""

    contents: Value | None = None
    external: bool = False
    real_cell: Any = None
    cell_source: Source | None = None


@dataclass(eq=False)
class NestedFunctionValue(Value):
    """A function made by MAKE_FUNCTION inside the traced code (lambda, nested def, comprehension)."""

    code: types.CodeType
    frame_globals: Any                       # the making frame's globals accessor (frontend.frame.Globals)
    defaults: tuple[Value, ...] = ()
    kwdefaults: dict[str, Value] = field(default_factory=dict)
    closure: tuple[CellValue, ...] = ()

    def python_type(self) -> type:
        return types.FunctionType

    def describe(self) -> str:
        return f"function {self.code.co_qualname}"


@dataclass(eq=False)
class BoundMethodValue(Value):
    func: Value                              # FunctionValue or NestedFunctionValue
    self_value: Value
    source: Source | None = None

    def python_type(self) -> type:
        return types.MethodType

    def describe(self) -> str:
        return f"method {self.func.describe()}"


@dataclass(eq=False)
class PartialValue(Value):
    """``functools.partial(func, *args, **kwargs)``."""

    func: Value
    args: list[Value]
    kwargs: dict[str, Value]

    def python_type(self) -> type:
        return functools.partial


@dataclass(eq=False)
class ModuleValue(Value):
    """An ``nn.Module`` instance."""

    module: torch.nn.Module
    source: Source | None = None
    covered: bool = False

    def python_type(self) -> type:
        return type(self.module)

    def describe(self) -> str:
        return f"module {type(self.module).__name__}"


@dataclass(eq=False)
class TorchOpValue(Value):
    """A torch callable that becomes one graph node (``torch.*``, ``F.*``, ``Tensor.*`` unbound)."""

    fn: Any
    source: Source | None = None
    covered: bool = False

    def python_type(self) -> type:
        return type(self.fn)

    def describe(self) -> str:
        return f"torch callable {getattr(self.fn, '__qualname__', getattr(self.fn, '__name__', self.fn))}"


@dataclass(eq=False)
class TensorMethodValue(Value):
    """``tensor.name`` looked up as a method, not called yet."""

    tensor: TensorValue
    name: str

    def python_type(self) -> type:
        return types.BuiltinMethodType

    def describe(self) -> str:
        return f"method Tensor.{self.name}"


@dataclass(eq=False)
class BuiltinValue(Value):
    """A Python builtin or stdlib callable with a handler in ``builtins_rules.py``."""

    fn: Any
    source: Source | None = None
    covered: bool = False

    def python_type(self) -> type:
        return type(self.fn)

    def describe(self) -> str:
        return f"builtin {getattr(self.fn, '__name__', self.fn)}"


@dataclass(eq=False)
class ObjectMethodValue(Value):
    """A method of a container or constant value: ``lst.append``, ``d.items``, ``'a'.join``."""

    obj: Value
    name: str

    def python_type(self) -> type:
        return types.BuiltinMethodType

    def describe(self) -> str:
        return f"method {self.obj.describe()}.{self.name}"


@dataclass(eq=False)
class PythonModuleValue(Value):
    module: types.ModuleType
    source: Source | None = None
    covered: bool = False

    def python_type(self) -> type:
        return types.ModuleType

    def describe(self) -> str:
        return f"python module {self.module.__name__}"


@dataclass(eq=False)
class ClassValue(Value):
    cls: type
    source: Source | None = None
    covered: bool = False

    def python_type(self) -> type:
        return type(self.cls)

    def describe(self) -> str:
        return f"class {self.cls.__qualname__}"


@dataclass(eq=False)
class GradModeValue(Value):
    """``torch.no_grad()`` / ``enable_grad()`` / ``set_grad_enabled(b)`` (a context manager)."""

    enabled: bool
    prev: bool | None = None                 # set_grad_enabled(b) switches at the call: the mode before it
    exit_to: bool | None = None              # after BEFORE_WITH: the mode __exit__ restores

    def python_type(self) -> type:
        return {True: torch.enable_grad, False: torch.no_grad}[self.enabled]

    def describe(self) -> str:
        return f"grad mode context (enabled={self.enabled})"


@dataclass(eq=False)
class NoOpContextValue(Value):
    """A context manager with no effect on the traced program (inference_mode when already on)."""

    what: str

    def describe(self) -> str:
        return self.what


@dataclass(eq=False)
class UserContextValue(Value):
    """An active ``with`` on an object whose class defines ``__enter__``/``__exit__`` (inlined)."""

    obj: Value
    exit_fn: Value                           # the bound __exit__

    def describe(self) -> str:
        return f"context manager {self.obj.describe()}"


@dataclass(eq=False)
class GeneratorContextValue(Value):
    """``@contextlib.contextmanager`` called: the generator runs to its yield on enter, on from
    there on exit (``frame`` is its suspended frontend frame once entered)."""

    func: Value
    args: list[Value]
    kwargs: dict[str, Value]
    frame: Any = None
    yield_index: int = -1

    def python_type(self) -> type:
        return contextlib._GeneratorContextManager

    def describe(self) -> str:
        return f"@contextmanager {self.func.describe()}"


@dataclass(eq=False)
class AutocastValue(Value):
    """``torch.autocast(...)``: enter/exit become graph nodes (torch.amp._enter/_exit_autocast)."""

    device_type: str
    dtype: Any
    enabled: bool
    cache_enabled: Any
    node: Any = None                         # the enter node while active

    def python_type(self) -> type:
        return torch.autocast

    def describe(self) -> str:
        return f"torch.autocast({self.device_type!r}, dtype={self.dtype}, enabled={self.enabled})"


@dataclass(eq=False)
class ContextExitValue(Value):
    """The bound ``__exit__`` that BEFORE_WITH pushes."""

    ctx: Value
    holder: bool = False      # the real exit is a runner's _C.ContextExit (tracing_rules._held_exit)


@dataclass(eq=False)
class SuperValue(Value):
    cls: type
    obj: Value


@dataclass(eq=False)
class UserObjectValue(Value):
    """Any other Python object from a source: attributes are read through it, with guards.
    A user dict subclass (HF ``ModelOutput`` passed in) has its dict contents in ``storage``,
    a DictValue of the builtin base class whose items are read with guards like a dict's."""

    obj: Any
    source: Source | None = None
    covered: bool = False
    storage: Any = None

    def python_type(self) -> type:
        return type(self.obj)

    def describe(self) -> str:
        return f"object of type {type(self.obj).__qualname__}"


@dataclass(eq=False)
class NewObjectValue(Value):
    """An instance of a plain user class created inside the trace; its attributes live here.
    A dict / OrderedDict subclass (HF ``ModelOutput``) keeps its dict contents in ``storage``, a
    DictValue of the builtin base class (``dict_storage`` substitutes it for dict operations)."""

    cls: type
    attrs: dict[str, Value] = field(default_factory=dict)
    storage: Any = None                      # DictValue for dict subclasses, else None

    def python_type(self) -> type:
        return self.cls

    def describe(self) -> str:
        return f"new {self.cls.__qualname__} object"


def dict_storage(v: Value) -> Value:
    """The DictValue behind a dict subclass made in the frame; ``v`` itself otherwise."""
    if isinstance(v, (NewObjectValue, UserObjectValue)) and v.storage is not None:
        return v.storage
    return v


def real_object(v: Value) -> Any:
    """The real Python object behind a value that wraps one (None if it has none)."""
    attr = _REAL_OBJECT_FIELD.get(type(v))
    return None if attr is None else getattr(v, attr)


_REAL_OBJECT_FIELD: dict[type, str] = {
    ConstantValue: "value", ModuleValue: "module", FunctionValue: "fn", TorchOpValue: "fn",
    BuiltinValue: "fn", PythonModuleValue: "module", ClassValue: "cls", UserObjectValue: "obj",
}


def register_real_object_field(value_cls: type, field_name: str) -> None:
    """``real_object(v)`` of a ``value_cls`` value is ``getattr(v, field_name)``."""
    _REAL_OBJECT_FIELD[value_cls] = field_name


SetValue.items = property(_set_items, _set_set_items)      # type: ignore[assignment]


register_exception_value(UserObjectValue)
