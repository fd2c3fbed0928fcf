"""nn.Module values: attribute reads, calls (inlined forward), container indexing and iteration.

Everything read through a module is ``covered``: the module's MODULE_TREE guard pins its
``__dict__``, parameters, buffers, submodules and hooks.  Parameters and buffers become
``get_attr`` nodes on the very same tensor objects.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import torch
from torch.nn.modules import module as nn_module

from ..guards.sources import AttrSource, ItemSource
from . import hub
from .attrs import MISSING, AttrMissing, bind_class_member, class_member_source, mro_lookup, object_attr
from .exc import Unsupported
from .iteration import register_iterable
from .module_creation import NewModuleValue, initialize_lazy, is_uninitialized_lazy
from .pyops import register_value_kind
from .values import (
    ConstantValue,
    DictValue,
    LazyValue,
    ModuleValue,
    TupleValue,
    Value,
)

if TYPE_CHECKING:
    from .tracer import Tracer

_STATE_DICTS = ("_parameters", "_buffers", "_modules")
_HOOK_DICTS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks",
               "_forward_hooks_with_kwargs", "_forward_pre_hooks_with_kwargs")
_GLOBAL_HOOKS = ("_global_forward_hooks", "_global_forward_pre_hooks", "_global_backward_hooks",
                 "_global_backward_pre_hooks")
_SEQUENCE_MODULES = (torch.nn.Sequential, torch.nn.ModuleList, torch.nn.ParameterList)
_MAPPING_MODULES = (torch.nn.ModuleDict, torch.nn.ParameterDict)


def module_attr(tx: "Tracer", v: ModuleValue, name: str) -> Value:
    m, src = v.module, v.source
    if isinstance(v, NewModuleValue) and name in v.overlay:     # a tensor on a module made in the frame
        return v.overlay[name]
    stored = hub.stored_attribute(tx, m, name)
    if stored is not None:                        # assigned earlier in this trace
        return stored
    tx.side_effects.module_read(m, name)
    d = m.__dict__
    if name in _STATE_DICTS:                      # the tree guard watches these dicts: contents covered
        known = tx.memo.get(id(d[name]))          # one value per dict: writes (register_buffer) are
        if known is not None:                     # seen by later reads and replayed once
            return known[1]
        dsrc = AttrSource(src, name) if src is not None else None
        items: dict[Any, Value] = {k: LazyValue(x, ItemSource(dsrc, k) if dsrc is not None else None, True)
                                   for k, x in d[name].items()}
        dv = DictValue(items, source=dsrc, covered=True)
        tx.memo[id(d[name])] = (d[name], dv)
        return dv
    r = object_attr(tx, v, m, name, covered=True, instance_dict=d)
    if r is not MISSING:
        return r
    for dict_name in _STATE_DICTS:
        table = d.get(dict_name, {})
        traced = tx.memo.get(id(table))
        if traced is not None and isinstance(traced[1], DictValue):   # changed in this trace?
            items = traced[1].items
            if name not in items:
                continue
            if not isinstance(items[name], LazyValue):
                return tx.resolve(items[name])
        if name in table:
            obj = table[name]
            if obj is None:
                return ConstantValue(None)
            return tx.wrap(obj, AttrSource(src, name) if src is not None else None, True)
    raise AttrMissing(f"{type(m).__name__} has no attribute {name!r}",
                      "The same code raises AttributeError in eager mode.")


# Forward (pre-)hooks are inlined around forward; the MODULE_TREE guard watches these dicts.
_INLINED_HOOKS = ("_forward_hooks", "_forward_pre_hooks", "_forward_hooks_with_kwargs",
                  "_forward_pre_hooks_with_kwargs", "_forward_hooks_always_called")


def _has_hooks(m: torch.nn.Module) -> str | None:
    """The first hook dict that is not inlined (backward and global hooks) and is not empty."""
    for h in _HOOK_DICTS:
        if h not in _INLINED_HOOKS and getattr(m, h, None):
            return h
    for h in _GLOBAL_HOOKS:
        if getattr(nn_module, h, None):
            return h
    return None


def call_module(tx: "Tracer", v: ModuleValue, args: list[Value], kwargs: dict[str, Value]) -> Value:
    m = v.module
    if is_uninitialized_lazy(m):                  # nn.LazyLinear on its first call
        initialize_lazy(tx, v, args, kwargs)
    hook = _has_hooks(m)
    if hook is not None:
        raise Unsupported(f"calling {type(m).__name__} with hooks registered ({hook})",
                          "Backward hooks and global module hooks are not supported yet; remove the "
                          "hooks or compile the module's forward instead.")
    if m._forward_pre_hooks or m._forward_hooks or hub.has_frame_hooks(tx, m):
        return _call_with_forward_hooks(tx, v, args, kwargs)
    return _call_forward(tx, v, args, kwargs)


def _hook_value(tx: "Tracer", v: ModuleValue, dict_name: str, hook_id: int) -> Value:
    src = ItemSource(AttrSource(v.source, dict_name), hook_id) if v.source is not None else None
    return tx.wrap(getattr(v.module, dict_name)[hook_id], src, True)


def _call_with_forward_hooks(tx: "Tracer", v: ModuleValue, args: list[Value], kwargs: dict[str, Value]) -> Value:
    """nn.Module._call_impl's forward hook protocol, inlined: the module's hooks in order, then
    the ones registered inside the traced code (frame_hooks.py)."""
    m = v.module
    pre = [(_hook_value(tx, v, "_forward_pre_hooks", i), i in m._forward_pre_hooks_with_kwargs)
           for i in list(m._forward_pre_hooks)]
    pre += [(h.hook, h.with_kwargs) for h in hub.hooks_of(tx, m, pre=True)]
    for hook, with_kwargs in pre:
        if with_kwargs:
            r = tx.resolve(hub.call_value(tx, hook, [v, TupleValue(list(args)), DictValue(dict(kwargs))], {}))
            if _is_none(r):
                continue
            if not (isinstance(r, TupleValue) and len(r.items) == 2):
                raise Unsupported("a forward pre-hook with kwargs returned something other than (args, kwargs)")
            new_args, new_kwargs = (tx.resolve(i) for i in r.items)
            if not (isinstance(new_args, TupleValue) and isinstance(new_kwargs, DictValue)
                    and all(isinstance(k, str) for k in new_kwargs.items)):
                raise Unsupported("a forward pre-hook with kwargs returned unexpected (args, kwargs)")
            args, kwargs = list(new_args.items), dict(new_kwargs.items)
        else:
            r = tx.resolve(hub.call_value(tx, hook, [v, TupleValue(list(args))], {}))
            if _is_none(r):
                continue
            args = list(r.items) if isinstance(r, TupleValue) and r.cls is tuple else [r]
    result = _call_forward(tx, v, args, kwargs)
    post = [(_hook_value(tx, v, "_forward_hooks", i), i in m._forward_hooks_with_kwargs)
            for i in list(m._forward_hooks)]
    post += [(h.hook, h.with_kwargs) for h in hub.hooks_of(tx, m, pre=False)]
    for hook, with_kwargs in post:
        if with_kwargs:
            r = hub.call_value(tx, hook, [v, TupleValue(list(args)), DictValue(dict(kwargs)), result], {})
        else:
            r = hub.call_value(tx, hook, [v, TupleValue(list(args)), result], {})
        if not _is_none(tx.resolve(r)):
            result = r
    return result


def _is_none(r: Value) -> bool:
    return isinstance(r, ConstantValue) and r.value is None


def _call_forward(tx: "Tracer", v: ModuleValue, args: list[Value], kwargs: dict[str, Value]) -> Value:
    m = v.module
    cls = type(m)
    if cls.__call__ is not torch.nn.Module.__call__:
        idx, raw = mro_lookup(cls, "__call__")
        target = bind_class_member(tx, v, cls, idx, raw, "__call__", class_member_source(v.source, idx, "__call__"))
    elif "forward" in m.__dict__:                 # an instance-level forward override
        target = tx.wrap(m.__dict__["forward"], AttrSource(v.source, "forward") if v.source else None, True)
    else:
        idx, raw = mro_lookup(cls, "forward")
        if raw is MISSING or raw is nn_module._forward_unimplemented:
            raise Unsupported(f"{cls.__name__} has no forward()")
        target = bind_class_member(tx, v, cls, idx, raw, "forward", class_member_source(v.source, idx, "forward"))
    return hub.call_value(tx, target, args, kwargs)


def module_getitem(tx: "Tracer", v: ModuleValue, key: Value) -> Value:
    m = v.module
    if not isinstance(key, ConstantValue):
        raise Unsupported(f"indexing {type(m).__name__} with {key.describe()}")
    k = key.value
    if isinstance(m, _SEQUENCE_MODULES + _MAPPING_MODULES) and not isinstance(k, slice):
        try:
            item = m[k]
        except (IndexError, KeyError) as e:
            raise Unsupported(f"{type(m).__name__}[{k!r}] raised {type(e).__name__}") from e
        return tx.wrap(item, ItemSource(v.source, k) if v.source is not None else None, True)
    if isinstance(m, (torch.nn.Sequential, torch.nn.ModuleList)) and isinstance(k, slice):
        return _module_slice(tx, v, k)
    idx, raw = mro_lookup(type(m), "__getitem__")
    if raw is MISSING:
        raise Unsupported(f"{type(m).__name__} is not subscriptable")
    method = bind_class_member(tx, v, type(m), idx, raw, "__getitem__",
                               class_member_source(v.source, idx, "__getitem__"))
    return hub.call_value(tx, method, [key], {})


def _module_slice(tx: "Tracer", v: ModuleValue, k: slice) -> Value:
    """``blocks[1:]`` / ``seq[:-1]``: the container eager builds (same class, same children), made
    now.  Its children are wrapped first with their sources in ``v`` (the memo hands those values
    out when the new container is indexed or iterated), so they stay the same objects to the
    trace; the container itself is new, so it has no source (its contents are pinned by ``v``'s
    MODULE_TREE guard)."""
    m = cast("torch.nn.Sequential | torch.nn.ModuleList", v.module)   # (what the caller checked)
    for i in range(len(m))[k]:
        tx.wrap(m[i], ItemSource(v.source, i) if v.source is not None else None, True)
    part = m[k]
    v2 = ModuleValue(part, source=None, covered=True)
    tx.memo[id(part)] = (part, v2)                # keeps ``part`` alive with the trace
    return v2


def module_items(tx: "Tracer", v: ModuleValue) -> list[Value]:
    """What ``iter(module)`` yields, for the container modules."""
    m, src = v.module, v.source
    if isinstance(m, _SEQUENCE_MODULES):
        return [tx.wrap(m[i], ItemSource(src, i) if src is not None else None, True) for i in range(len(m))]
    if isinstance(m, _MAPPING_MODULES):
        return [ConstantValue(k) for k in m.keys()]
    raise Unsupported(f"iterating over {type(m).__name__}")


def module_len(v: ModuleValue) -> int:
    if isinstance(v.module, _SEQUENCE_MODULES + _MAPPING_MODULES):
        return len(v.module)
    raise Unsupported(f"len() of {type(v.module).__name__}")


__all__ = ["call_module", "module_attr", "module_getitem",
           "module_items", "module_len"]

hub.register(
    call_module=call_module, module_attr=module_attr,
)

register_iterable(ModuleValue, module_items, lambda tx, v: module_len(v))
register_value_kind(ModuleValue, getitem=lambda tx, v, key, subclass: module_getitem(tx, v, key))
