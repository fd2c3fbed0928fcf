"""The value hub: the operations the frontend's value modules perform on one another.

An interpreter is mutually recursive: calling a value may read an attribute, which may call a
property, which may iterate a container... Each operation below is implemented in one module
(named in its section) and registered here when that module is imported (``register``, at the
module's end; ``frontend/implementations.py`` imports them all). Other modules call it as
``hub.<name>(...)`` instead of importing its module, so the modules form layers with no import
circle: values, sources and the graph builder below; the value modules above, each importing
only lower layers and this hub.

The definitions here are placeholders that say which module fills them; ``register`` refuses a
name that is not declared, so this page lists every cross-module operation.
"""
from __future__ import annotations

from typing import Any


def register(**operations: Any) -> None:
    """Fill the named placeholders (each implementing module calls this once, at import)."""
    g = globals()
    for name, fn in operations.items():
        if name not in _DECLARED:
            raise NameError(f"hub.register: {name!r} is not a declared operation of frontend/hub.py")
        g[name] = fn


def _unfilled(name: str):
    def missing(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"frontend hub: {name} was not registered (import xcompile.frontend.implementations)")
    missing.__name__ = name
    return missing


# -- attrs.py -------------------------------------------------------------------------------------
bind_class_member: Any = _unfilled('bind_class_member')
class_member_source: Any = _unfilled('class_member_source')   # (obj_source: Source | None, mro_index: int, name: str)
generic_getattr: Any = _unfilled('generic_getattr')   # (tx: 'Tracer', v: Value, name: str)
load_attr: Any = _unfilled('load_attr')   # (tx: 'Tracer', v: Value, name: str)
mro_lookup: Any = _unfilled('mro_lookup')   # (cls: type, name: str, start: int=0)
storage_method: Any = _unfilled('storage_method')   # (storage: DictValue, name: str)

# -- builtins_more.py -----------------------------------------------------------------------------
lru_cached_call: Any = _unfilled('lru_cached_call')   # (tx, args, kwargs)
set_binary_op: Any = _unfilled('set_binary_op')   # (tx, op, a: Value, b: Value)
set_operation: Any = _unfilled('set_operation')   # (tx, op: str, a: Value, b: Value)

# -- builtins_rules.py ----------------------------------------------------------------------------
BUILTINS: Any = _unfilled('BUILTINS')   # a value
call_constant_function: Any = _unfilled('call_constant_function')
dict_builtin: Any = _unfilled('dict_builtin')   # (tx, args, kwargs)
make_namedtuple: Any = _unfilled('make_namedtuple')   # (tx, cls: type, args: list[Value], kwargs: dict[str, Value])
mapping_source: Any = _unfilled('mapping_source')   # (tx, v: Value)

# -- calls.py -------------------------------------------------------------------------------------
CONTEXT_VALUES: Any = _unfilled('CONTEXT_VALUES')   # a value
call_value: Any = _unfilled('call_value')
dict_base: Any = _unfilled('dict_base')   # (cls: type)
is_plain_user_class: Any = _unfilled('is_plain_user_class')   # (cls)
switch_grad_mode: Any = _unfilled('switch_grad_mode')   # (tx: 'Tracer', enabled: bool)

# -- container_methods.py -------------------------------------------------------------------------
call_object_method: Any = _unfilled('call_object_method')

# -- contexts.py ----------------------------------------------------------------------------------
CONTEXT_CLASSES: Any = _unfilled('CONTEXT_CLASSES')   # a value
enter_context: Any = _unfilled('enter_context')   # (tx: 'Tracer', ctx: Value)
exit_context: Any = _unfilled('exit_context')   # (tx: 'Tracer', ctx: Value, args: list[Value])
make_autocast: Any = _unfilled('make_autocast')   # (device_type, dtype, enabled, cache_enabled)
make_generator_context: Any = _unfilled('make_generator_context')
make_inference_mode: Any = _unfilled('make_inference_mode')   # (tx, args, kwargs) [grad_contexts.py]

# -- exceptions.py --------------------------------------------------------------------------------
handle_exception: Any = _unfilled('handle_exception')   # (f: Frame, inst: Instr, err: PythonError)
make_exception: Any = _unfilled('make_exception')   # (tx: 'Tracer', v: Value)
real_exception: Any = _unfilled('real_exception')   # (v: Value)

# -- frame_hooks.py -------------------------------------------------------------------------------
has_frame_hooks: Any = _unfilled('has_frame_hooks')   # (tx: 'Tracer', m: torch.nn.Module)
hooks_of: Any = _unfilled('hooks_of')   # (tx: 'Tracer', m: torch.nn.Module, pre: bool)

# -- generators.py --------------------------------------------------------------------------------
OutsideGeneratorValue: Any = _unfilled('OutsideGeneratorValue')   # a class
call_generator_method: Any = _unfilled('call_generator_method')
is_lazy: Any = _unfilled('is_lazy')   # (v: Value)
iter_next: Any = _unfilled('iter_next')   # (tx: 'Tracer', it: Value)
lazy: Any = _unfilled('lazy')   # (what: str, pull)

# -- introspection.py -----------------------------------------------------------------------------
signature_attr: Any = _unfilled('signature_attr')   # (tx: 'Tracer', v: ConstantValue, name: str)

# -- iteration.py ---------------------------------------------------------------------------------
items_of: Any = _unfilled('items_of')   # (tx: 'Tracer', v: Value)
length_of: Any = _unfilled('length_of')   # (tx: 'Tracer', v: Value)

# -- modules.py -----------------------------------------------------------------------------------
call_module: Any = _unfilled('call_module')
module_attr: Any = _unfilled('module_attr')   # (tx: 'Tracer', v: ModuleValue, name: str)

# -- pyops.py -------------------------------------------------------------------------------------
as_constant: Any = _unfilled('as_constant')   # (v: Value)
contains: Any = _unfilled('contains')   # (tx: 'Tracer', item: Value, container: Value)
delitem: Any = _unfilled('delitem')   # (tx: 'Tracer', container: Value, key: Value)
is_op: Any = _unfilled('is_op')   # (a: Value, b: Value)
note_mutation: Any = _unfilled('note_mutation')   # (tx: 'Tracer', v: Value)
set_add: Any = _unfilled('set_add')   # (s: SetValue, item: Value)
set_member: Any = _unfilled('set_member')   # (items: list[Value], item: Value)
setitem: Any = _unfilled('setitem')   # (tx: 'Tracer', container: Value, key: Value, value: Value)

# -- scalars.py -----------------------------------------------------------------------------------
SymScalarValue: Any = _unfilled('SymScalarValue')   # a class

# -- user_objects.py ------------------------------------------------------------------------------
NOT_DEFINED: Any = _unfilled('NOT_DEFINED')   # a value
call_dunder: Any = _unfilled('call_dunder')   # (tx: 'Tracer', v: Value, name: str, args: list[Value])
defines: Any = _unfilled('defines')   # (v: Value, name: str)
delete_attribute: Any = _unfilled('delete_attribute')   # (tx: 'Tracer', obj: Value, name: str)
store_attribute: Any = _unfilled('store_attribute')
stored_attribute: Any = _unfilled('stored_attribute')
user_binary_op: Any = _unfilled('user_binary_op')   # (tx: 'Tracer', op, a: Value, b: Value)
user_class_of: Any = _unfilled('user_class_of')   # (v: Value)
user_unary_op: Any = _unfilled('user_unary_op')   # (tx: 'Tracer', op, a: Value)

_DECLARED = frozenset(n for n in globals() if not n.startswith('_') and n not in ('register', 'annotations', 'Any'))
