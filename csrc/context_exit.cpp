// context_exit.cpp — ContextExit: the exit of a `with` block a graph-break runner holds.
//
// A frame that breaks inside `with torch.no_grad():` is run by a runner: it enters the block's
// context again and hands the exit to the resume function, whose bytecode continues the block and
// calls the exit when it ends. Between the enter and the resume frame's first instruction lie
// calls that can raise: the resume function's own compile, an interrupt (a signal handler runs at
// the eval loop's next check, after any call returns). The runner holds the exit in a
// try/except over all of that; the resume frame may have called it already, so it runs once.
//
//   e = ContextExit()       empty: calling it does nothing and returns None
//   e.enter(ctx)            ctx.__enter__() looked up on the type, as BEFORE_WITH does; the exit is
//                           held only once __enter__ has returned, with no Python code between
//                           (so no signal handler can run between the enter and the holding)
//   e.hold(fn)              hold an exit made elsewhere (a context entered while tracing)
//   e(t, v, tb)             call the held exit (once) and return what it returns; None if none held
//   e.discard()             drop the held exit uncalled: a traced graph left the block already
//   e.fn, e.active          the held exit (or None); whether one is held
#include "context_exit.h"

#include <structmember.h>

namespace xc {

namespace {

struct ContextExitObject {
  PyObject_HEAD vectorcallfunc vectorcall;
  PyObject* exit;  // strong or NULL
};

PyObject* g_enter_name = nullptr;  // interned "__enter__"
PyObject* g_exit_name = nullptr;   // interned "__exit__"

// The special method `name` of type(obj) bound to obj (new reference), or NULL without an error.
PyObject* lookup_special(PyObject* obj, PyObject* name) {
  PyObject* descr = _PyType_Lookup(Py_TYPE(obj), name);  // borrowed
  if (descr == nullptr) return nullptr;
  descrgetfunc get = Py_TYPE(descr)->tp_descr_get;
  if (get == nullptr) return Py_NewRef(descr);
  return get(descr, obj, reinterpret_cast<PyObject*>(Py_TYPE(obj)));
}

PyObject* ce_vectorcall(PyObject* self_obj, PyObject* const* args, size_t nargsf,
                        PyObject* kwnames) {
  auto* self = reinterpret_cast<ContextExitObject*>(self_obj);
  PyObject* fn = self->exit;
  if (fn == nullptr) Py_RETURN_NONE;
  self->exit = nullptr;  // taken before the call: a re-entrant call finds nothing to run
  PyObject* result = PyObject_Vectorcall(fn, args, nargsf, kwnames);
  Py_DECREF(fn);
  return result;
}

PyObject* ce_new(PyTypeObject* type, PyObject* args, PyObject* kwds) {
  if ((args != nullptr && PyTuple_GET_SIZE(args) != 0) ||
      (kwds != nullptr && PyDict_GET_SIZE(kwds) != 0)) {
    PyErr_SetString(PyExc_TypeError, "ContextExit() takes no arguments");
    return nullptr;
  }
  auto* self = reinterpret_cast<ContextExitObject*>(type->tp_alloc(type, 0));
  if (self == nullptr) return nullptr;
  self->vectorcall = ce_vectorcall;
  self->exit = nullptr;
  return reinterpret_cast<PyObject*>(self);
}

PyObject* ce_enter(PyObject* self_obj, PyObject* ctx) {
  auto* self = reinterpret_cast<ContextExitObject*>(self_obj);
  if (self->exit != nullptr) {
    PyErr_SetString(PyExc_RuntimeError, "ContextExit.enter: an exit is held already");
    return nullptr;
  }
  PyObject* enter = lookup_special(ctx, g_enter_name);
  if (enter == nullptr) {
    if (!PyErr_Occurred()) {
      PyErr_Format(PyExc_TypeError, "'%.200s' object does not support the context manager protocol",
                   Py_TYPE(ctx)->tp_name);
    }
    return nullptr;
  }
  PyObject* exit = lookup_special(ctx, g_exit_name);
  if (exit == nullptr) {
    if (!PyErr_Occurred()) {
      PyErr_Format(
          PyExc_TypeError,
          "'%.200s' object does not support the context manager protocol (missed __exit__ method)",
          Py_TYPE(ctx)->tp_name);
    }
    Py_DECREF(enter);
    return nullptr;
  }
  PyObject* result = PyObject_CallNoArgs(enter);
  Py_DECREF(enter);
  if (result == nullptr) {
    Py_DECREF(exit);
    return nullptr;
  }
  self->exit = exit;  // held before control returns to any Python code
  return result;
}

PyObject* ce_hold(PyObject* self_obj, PyObject* fn) {
  auto* self = reinterpret_cast<ContextExitObject*>(self_obj);
  if (!PyCallable_Check(fn)) {
    PyErr_Format(PyExc_TypeError, "ContextExit.hold: %.100s is not callable", Py_TYPE(fn)->tp_name);
    return nullptr;
  }
  Py_XSETREF(self->exit, Py_NewRef(fn));
  Py_RETURN_NONE;
}

PyObject* ce_discard(PyObject* self_obj, PyObject*) {
  Py_CLEAR(reinterpret_cast<ContextExitObject*>(self_obj)->exit);
  Py_RETURN_NONE;
}

PyObject* ce_fn(PyObject* self_obj, void*) {
  PyObject* fn = reinterpret_cast<ContextExitObject*>(self_obj)->exit;
  return Py_NewRef(fn != nullptr ? fn : Py_None);
}

PyObject* ce_active(PyObject* self_obj, void*) {
  return PyBool_FromLong(reinterpret_cast<ContextExitObject*>(self_obj)->exit != nullptr);
}

PyObject* ce_repr(PyObject* self_obj) {
  auto* self = reinterpret_cast<ContextExitObject*>(self_obj);
  if (self->exit == nullptr) return PyUnicode_FromString("<xcompile ContextExit (none held)>");
  return PyUnicode_FromFormat("<xcompile ContextExit holding %R>", self->exit);
}

int ce_traverse(PyObject* self_obj, visitproc visit, void* arg) {
  Py_VISIT(reinterpret_cast<ContextExitObject*>(self_obj)->exit);
  Py_VISIT(Py_TYPE(self_obj));
  return 0;
}

int ce_clear(PyObject* self_obj) {
  Py_CLEAR(reinterpret_cast<ContextExitObject*>(self_obj)->exit);
  return 0;
}

void ce_dealloc(PyObject* self_obj) {
  PyTypeObject* tp = Py_TYPE(self_obj);
  PyObject_GC_UnTrack(self_obj);
  ce_clear(self_obj);
  tp->tp_free(self_obj);
  Py_DECREF(tp);
}

PyMethodDef ce_methods[] = {
    {"enter", ce_enter, METH_O, "Enter ctx (type(ctx).__enter__) and hold its __exit__."},
    {"hold", ce_hold, METH_O, "Hold an exit function made elsewhere."},
    {"discard", ce_discard, METH_NOARGS,
     "Drop the held exit without calling it (the block ended in a graph)."},
    {nullptr, nullptr, 0, nullptr}};

PyGetSetDef ce_getset[] = {{"active", ce_active, nullptr, "Whether an exit is held.", nullptr},
                           {"fn", ce_fn, nullptr, "The held exit, or None.", nullptr},
                           {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyMemberDef ce_members[] = {{"__vectorcalloffset__", T_PYSSIZET,
                             offsetof(ContextExitObject, vectorcall), READONLY, nullptr},
                            {nullptr, 0, 0, 0, nullptr}};

PyType_Slot ce_slots[] = {{Py_tp_new, (void*)ce_new},
                          {Py_tp_dealloc, (void*)ce_dealloc},
                          {Py_tp_traverse, (void*)ce_traverse},
                          {Py_tp_clear, (void*)ce_clear},
                          {Py_tp_call, (void*)PyVectorcall_Call},
                          {Py_tp_repr, (void*)ce_repr},
                          {Py_tp_methods, ce_methods},
                          {Py_tp_getset, ce_getset},
                          {Py_tp_members, ce_members},
                          {0, nullptr}};

PyType_Spec ce_spec = {"xcompile._C.ContextExit", sizeof(ContextExitObject), 0,
                       Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
                       ce_slots};

}  // namespace

bool init_context_exit(PyObject* module) {
  g_enter_name = PyUnicode_InternFromString("__enter__");
  g_exit_name = PyUnicode_InternFromString("__exit__");
  if (g_enter_name == nullptr || g_exit_name == nullptr) return false;
  PyObject* type = PyType_FromSpec(&ce_spec);
  if (type == nullptr) return false;
  int rc = PyModule_AddObjectRef(module, "ContextExit", type);
  Py_DECREF(type);
  return rc == 0;
}

}  // namespace xc
