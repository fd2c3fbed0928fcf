"""``torch.Tensor`` subclasses: which ones the trace follows, and how their class is kept.

A *plain* subclass (``class MyTensor(torch.Tensor)`` with Python methods and attributes, but
torch's default ``__torch_function__`` and no ``__torch_dispatch__``) only changes the Python
class of what operators return: ``Tensor.__torch_function__`` runs the op and hands back the
result ``as_subclass(cls)``. The trace computes on plain tensors (the graph never sees the
class) and keeps the class in ``TensorValue.cls``:

    inputs     a plain-subclass argument is a graph input like any tensor (its TENSOR_MATCH checks
               the exact type); the compiled call passes the graph a plain alias of it
               (``as_subclass(torch.Tensor)``, which autograd follows back to the argument). A
               subclass tensor reached as a module attribute (a get_attr) is Unsupported.
    ops        the result of an op with a plain-subclass argument gets its class (the most derived
               one when several are related; unrelated ones are Unsupported, eager raises
               TypeError), except the getters torch does not wrap (``grad``, ``_base``)
    methods    names the subclass defines in Python are looked up on it first (inlined)
    made here  ``t.as_subclass(cls)`` and ``torch.Tensor._make_subclass(cls, t)`` (an alias /
               a detached alias in the graph; ``tensor_subclasses.py``)
    outputs    graph outputs whose value has a subclass are converted back with ``as_subclass``
               by ``wrap_compiled`` (the graph's node meta ``tensor_class`` says which)

Subclasses with their own ``__torch_function__`` (it would run for every operation, also for
the trace's own fake-tensor calls) or with ``__torch_dispatch__`` (wrapper subclasses such as
``TwoTensor``) are Unsupported, with that reason.
"""
from __future__ import annotations

import types
from typing import TYPE_CHECKING, Any, Callable

import torch

from . import hub
from .exc import Unsupported
from .values import ConstantValue, ListValue, TensorValue, TupleValue, Value, is_constant

if TYPE_CHECKING:
    from .tracer import Tracer

PLAIN_CLASSES = (torch.Tensor, torch.nn.Parameter)
_DEFAULT_TF = torch.Tensor.__torch_function__.__func__          # type: ignore[attr-defined]
_NOWRAP = {torch.Tensor._base.__get__, torch.Tensor.grad.__get__, torch.Tensor._grad.__get__}  # type: ignore[attr-defined,union-attr]


def is_plain_subclass(cls: Any) -> bool:
    """A user torch.Tensor subclass with torch's default __torch_function__, no __torch_dispatch__
    and the default attribute protocol."""
    if not isinstance(cls, type) or cls in PLAIN_CLASSES or not issubclass(cls, torch.Tensor) \
            or issubclass(cls, torch.nn.Parameter):
        return False
    tf = getattr(cls.__torch_function__, "__func__", None)
    return tf is _DEFAULT_TF and cls.__torch_dispatch__ is torch.Tensor.__torch_dispatch__ \
        and cls.__getattribute__ is torch.Tensor.__getattribute__ and cls.__setattr__ is torch.Tensor.__setattr__ \
        and "__getattr__" not in dir(cls)


def check_tensor_class(t: torch.Tensor) -> type | None:
    """The class a tensor argument keeps in the trace: None for torch.Tensor / Parameter, the
    class for a plain subclass; Unsupported (with the reason) for the others."""
    cls = type(t)
    if cls in PLAIN_CLASSES:
        return None
    if is_plain_subclass(cls):
        return cls
    name = cls.__name__
    if isinstance(cls, type) and issubclass(cls, torch.Tensor) and \
            cls.__torch_dispatch__ is not torch.Tensor.__torch_dispatch__:
        raise Unsupported(f"tensor subclass {name} with __torch_dispatch__",
                          "Pass plain tensors (unwrap the subclass outside the compiled region).",
                          "xcompile traces plain tensors and subclasses that only add Python methods; "
                          "wrapper subclasses need their __torch_dispatch__ traced, which it does not do.")
    if getattr(cls.__torch_function__, "__func__", None) is not _DEFAULT_TF:
        raise Unsupported(f"tensor subclass {name} with its own __torch_function__",
                          "Pass plain tensors, or a subclass that keeps torch.Tensor's __torch_function__.",
                          "Its __torch_function__ would run for every operation; xcompile does not inline it "
                          "(torch.compile does, and also runs it for its own fake-tensor calls).")
    raise Unsupported(f"tensor subclass {name}", "Pass plain torch.Tensor inputs.")


def mark(v: TensorValue, cls: type) -> TensorValue:
    """Give ``v`` (and its node, for ``wrap_compiled``) the subclass ``cls``."""
    v.cls = cls
    v.node.meta["tensor_class"] = cls
    return v


# -- results of ops ------------------------------------------------------------------------------------------
def _classes(x: Any, out: list) -> None:
    if isinstance(x, TensorValue):
        if x.cls not in PLAIN_CLASSES:
            out.append(x.cls)
    elif isinstance(x, (TupleValue, ListValue)):
        for i in x.items:
            _classes(i, out)


def result_class(args, kwargs) -> type | None:
    """The subclass whose __torch_function__ eager runs for these arguments (None: plain)."""
    found: list[type] = []
    for a in [*args, *kwargs.values()]:
        _classes(a, found)
    if not found:
        return None
    best = found[0]
    for c in found[1:]:
        if issubclass(c, best):
            best = c
        elif not issubclass(best, c):
            raise Unsupported(f"an operation on tensors of unrelated subclasses {best.__name__} and {c.__name__}",
                              "The same code raises TypeError in eager mode (no __torch_function__ accepts "
                              "both).")
    return best


def _mark_all(r: Value, cls: type) -> None:
    if isinstance(r, TensorValue):
        mark(r, cls)
    elif isinstance(r, (TupleValue, ListValue)):
        for i in r.items:
            _mark_all(i, cls)


def subclass_result(target: Any, args, kwargs, result: Value) -> Value:
    """``result`` of ``target(*args, **kwargs)`` with the class eager's __torch_function__ gives it."""
    cls = result_class(args, kwargs)
    if cls is not None and target not in _NOWRAP:
        _mark_all(result, cls)
    return result


# -- methods the subclass defines -----------------------------------------------------------------------------
def subclass_member(tx: "Tracer", v: TensorValue, name: str) -> Value | None:
    """``v.name`` when the subclass (not torch.Tensor) defines ``name``, else None."""
    cls = v.cls
    if cls in PLAIN_CLASSES:
        return None
    for k in cls.__mro__:
        if k is torch.Tensor or k is torch._C.TensorBase:
            return None
        if name in k.__dict__:
            raw = k.__dict__[name]
            if isinstance(raw, types.FunctionType):
                return hub.bind_class_member(tx, v, cls, cls.__mro__.index(k), raw, name, None)
            if isinstance(raw, (property, staticmethod, classmethod)):
                got = hub.bind_class_member(tx, v, cls, cls.__mro__.index(k), raw, name, None)
                if got is not None:
                    return got
            if is_constant(raw):                     # a class-level constant
                return ConstantValue(raw)
            raise Unsupported(f"attribute {name!r} of tensor subclass {cls.__name__} (a {type(raw).__name__})")
    return None


# -- the compiled call ----------------------------------------------------------------------------------------
def _restored(r: torch.Tensor, cls: type, originals: dict[int, Any]) -> torch.Tensor:
    original = originals.get(id(r))
    return original if original is not None else r.as_subclass(cls)


def wrap_compiled(compiled: Callable | None, gm: torch.fx.GraphModule) -> Callable | None:
    """``compiled`` with plain-subclass inputs passed as plain aliases and outputs given back
    their subclass (``compiled`` itself when the graph has neither)."""
    if compiled is None:
        return None
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    ins = frozenset(i for i, n in enumerate(placeholders) if n.meta.get("tensor_class") is not None)
    out_node = next((n for n in gm.graph.nodes if n.op == "output"), None)
    outs: dict[int, type] = {}
    if out_node is not None and isinstance(out_node.args[0], (tuple, list)):
        for i, n in enumerate(out_node.args[0]):
            cls = n.meta.get("tensor_class") if isinstance(n, torch.fx.Node) else None
            if cls is not None:
                outs[i] = cls
    if not ins and not outs:
        return compiled

    def with_subclasses(*args: Any) -> Any:
        originals: dict[int, Any] = {}
        if ins:
            plain = []
            for i, a in enumerate(args):
                if i in ins and type(a) is not torch.Tensor:
                    alias = a.as_subclass(torch.Tensor)
                    originals[id(alias)] = a          # an input handed back is the caller's object
                    a = alias
                plain.append(a)
            args = tuple(plain)
        result = compiled(*args)
        if not outs:
            return result
        return tuple(_restored(r, outs[i], originals) if i in outs and type(r) is not outs[i] else r
                     for i, r in enumerate(result))

    with_subclasses.__name__ = getattr(compiled, "__name__", "compiled") + "_subclasses"
    return with_subclasses


__all__ = ["PLAIN_CLASSES", "check_tensor_class", "is_plain_subclass", "mark", "result_class",
           "subclass_member", "subclass_result", "wrap_compiled"]
