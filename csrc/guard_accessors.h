// guard_accessors.h — how a guard node gets its value: one small class per edge kind.
//
//   frame accessors (parent ignored)        value accessors (parent = the parent node's value)
//   local(i)    frame.locals[i]             attr(name)  PyObject_GetAttr(parent, name)
//   global(n)   globals[n], else builtins   item(key)   list/tuple[int] fast path, dict lookup
//   closure(i)  closure[i].cell_contents                (exact dicts and subclasses), else
//                                                       PyObject_GetItem
//   closure_cell(i)  closure[i] (the cell itself)      generic_attr(name)  PyObject_GenericGetAttr
//   call(fn, args, kwargs)  fn(*args, **kwargs): a global-state getter a trace folded
//
// Every accessor holds strong references to its key objects. fetch() returns a new reference,
// or NULL (possibly with an error set, which the caller clears): a missing name, key, index or
// attribute, or an empty cell, makes the guard fail; it never raises into user code.
#pragma once

#include <Python.h>

#include <memory>
#include <string>

#include "guard_tree.h"

namespace xc {

std::unique_ptr<Accessor> make_local_accessor(int index, std::string name);
// `name` borrowed (must be a str); interned internally.
std::unique_ptr<Accessor> make_global_accessor(PyObject* name);
std::unique_ptr<Accessor> make_closure_accessor(int index, std::string name);
// fn(*args, **kwargs) with held references; `args` a tuple, `kwargs` a dict or NULL (borrowed).
std::unique_ptr<Accessor> make_call_accessor(PyObject* fn, PyObject* args, PyObject* kwargs,
                                             std::string name);
// The cell object itself (a side effect rebinds its contents after the graph runs).
std::unique_ptr<Accessor> make_closure_cell_accessor(int index, std::string name);
// `name` borrowed (must be a str); interned internally.
std::unique_ptr<Accessor> make_attr_accessor(PyObject* name);
// object.__getattribute__(parent, name) (PyObject_GenericGetAttr); `name` borrowed.
std::unique_ptr<Accessor> make_generic_attr_accessor(PyObject* name);
// `key` borrowed (any object; must be hashable to be found in dicts).
std::unique_ptr<Accessor> make_item_accessor(PyObject* key);

// repr(obj) as UTF-8, "<unprintable>" if repr raises (the error is cleared).
std::string safe_repr(PyObject* obj);

}  // namespace xc
