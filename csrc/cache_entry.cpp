// cache_entry.cpp — entries, output plans, the cache walk and the miss path (see cache_entry.h).
#include "cache_entry.h"

#include <stdexcept>
#include <string>

#include "frame_hook.h"
#include "py_compat.h"

namespace py = pybind11;

namespace xc {

// ---- OutputPlan -----------------------------------------------------------------------------

namespace {

[[noreturn]] void bad_plan(const std::string& why) {
  throw std::invalid_argument("output_plan: " + why);
}

Py_ssize_t plan_int(py::handle h, const char* what) {
  if (!PyLong_Check(h.ptr())) bad_plan(std::string(what) + " must be an int");
  Py_ssize_t v = PyLong_AsSsize_t(h.ptr());
  if (v == -1 && PyErr_Occurred()) throw py::error_already_set();
  if (v < 0) bad_plan(std::string(what) + " must be >= 0");
  return v;
}

}  // namespace

OutputPlan::OutputPlan(py::handle plan, int n_slots) {
  if (!PyTuple_Check(plan.ptr()) || PyTuple_GET_SIZE(plan.ptr()) < 2) {
    bad_plan("each node is a tuple (kind, ...), got " + std::string(py::repr(plan)));
  }
  py::tuple t = py::reinterpret_borrow<py::tuple>(plan);
  std::string kind = py::cast<std::string>(t[0]);
  auto parse_items = [&](py::handle seq) {
    if (!PyList_Check(seq.ptr()) && !PyTuple_Check(seq.ptr())) bad_plan(kind + " needs a list");
    for (py::handle item : seq) items_.emplace_back(item, n_slots);
  };
  if (kind == "out") {
    kind_ = OUT;
    index_ = plan_int(t[1], "out index");
  } else if (kind == "const") {
    kind_ = CONST;
    value_ = py::reinterpret_borrow<py::object>(t[1]);
  } else if (kind == "slot") {
    kind_ = SLOT;
    index_ = plan_int(t[1], "slot index");
    if (index_ >= n_slots) bad_plan("slot index out of range");
  } else if (kind == "tuple" || kind == "list") {
    kind_ = kind == "tuple" ? TUPLE : LIST;
    parse_items(t[1]);
  } else if (kind == "dict") {
    kind_ = DICT;
    if (t.size() != 3) bad_plan("dict is (\"dict\", [keys], [plans])");
    value_ = py::reinterpret_steal<py::object>(PySequence_Tuple(t[1].ptr()));
    if (!value_) throw py::error_already_set();
    parse_items(t[2]);
    if (items_.size() != (size_t)PyTuple_GET_SIZE(value_.ptr()))
      bad_plan("dict keys/values differ");
  } else if (kind == "namedtuple") {
    kind_ = NAMEDTUPLE;
    if (t.size() != 3 || !PyType_Check(t[1].ptr()) ||
        !PyType_IsSubtype((PyTypeObject*)t[1].ptr(), &PyTuple_Type)) {
      bad_plan("namedtuple is (\"namedtuple\", tuple subclass, [plans])");
    }
    value_ = py::reinterpret_borrow<py::object>(t[1]);
    // namedtuples take their fields as arguments; structseqs and torch.Size take one tuple
    structseq_ = !py::hasattr(value_, "_fields");
    parse_items(t[2]);
  } else {
    bad_plan("unknown kind '" + kind + "'");
  }
}

PyObject* OutputPlan::build(PyObject* outs, PyObject* const* slots) const {
  switch (kind_) {
    case OUT: {
      Py_ssize_t n = PySequence_Fast_GET_SIZE(outs);
      if (index_ >= n) {
        PyErr_Format(PyExc_IndexError, "output_plan: output %zd of %zd", index_, n);
        return nullptr;
      }
      PyObject* v = PySequence_Fast_GET_ITEM(outs, index_);
      Py_INCREF(v);
      return v;
    }
    case CONST:
      return Py_NewRef(value_.ptr());
    case SLOT: {
      PyObject* v = slots[index_];
      if (v == nullptr) {
        PyErr_Format(PyExc_RuntimeError, "output_plan: slot %zd was not filled by the guard",
                     index_);
        return nullptr;
      }
      return Py_NewRef(v);
    }
    case NAMEDTUPLE: {
      const Py_ssize_t n = (Py_ssize_t)items_.size();
      PyObject* parts = PyTuple_New(n);
      if (!parts) return nullptr;
      for (Py_ssize_t i = 0; i < n; i++) {
        PyObject* v = items_[i].build(outs, slots);
        if (!v) {
          Py_DECREF(parts);
          return nullptr;
        }
        PyTuple_SET_ITEM(parts, i, v);
      }
      PyObject* r = structseq_ ? PyObject_CallOneArg(value_.ptr(), parts)
                               : PyObject_Call(value_.ptr(), parts, nullptr);
      Py_DECREF(parts);
      return r;
    }
    case TUPLE:
    case LIST: {
      const Py_ssize_t n = (Py_ssize_t)items_.size();
      PyObject* r = kind_ == TUPLE ? PyTuple_New(n) : PyList_New(n);
      if (!r) return nullptr;
      for (Py_ssize_t i = 0; i < n; i++) {
        PyObject* v = items_[i].build(outs, slots);
        if (!v) {
          Py_DECREF(r);
          return nullptr;
        }
        if (kind_ == TUPLE) {
          PyTuple_SET_ITEM(r, i, v);
        } else {
          PyList_SET_ITEM(r, i, v);
        }
      }
      return r;
    }
    case DICT: {
      PyObject* r = PyDict_New();
      if (!r) return nullptr;
      for (size_t i = 0; i < items_.size(); i++) {
        PyObject* v = items_[i].build(outs, slots);
        if (!v || PyDict_SetItem(r, PyTuple_GET_ITEM(value_.ptr(), i), v) < 0) {
          Py_XDECREF(v);
          Py_DECREF(r);
          return nullptr;
        }
        Py_DECREF(v);
      }
      return r;
    }
  }
  return nullptr;
}

// ---- CacheEntry -----------------------------------------------------------------------------

std::shared_ptr<CacheEntry> CacheEntry::graph(std::shared_ptr<RootGuard> guard,
                                              py::object compiled_fn, int n_inputs,
                                              py::object output_plan) {
  if (!guard) throw std::invalid_argument("guard must be a RootGuard");
  if (!PyCallable_Check(compiled_fn.ptr())) throw std::invalid_argument("compiled_fn not callable");
  if (n_inputs < 0 || n_inputs > guard->n_slots()) {
    throw std::invalid_argument("n_inputs must be within 0..guard.n_slots");
  }
  auto e = std::make_shared<CacheEntry>();
  e->kind = GRAPH;
  e->plan = std::make_unique<OutputPlan>(output_plan, guard->n_slots());
  e->guard = std::move(guard);
  e->fn = std::move(compiled_fn);
  e->n_inputs = n_inputs;
  e->plan_object = std::move(output_plan);
  e->owner = py::none();
  e->tag = py::none();
  e->deps = py::none();
  return e;
}

std::shared_ptr<CacheEntry> CacheEntry::code(std::shared_ptr<RootGuard> guard, py::object runner) {
  if (!guard) throw std::invalid_argument("guard must be a RootGuard");
  if (!PyCallable_Check(runner.ptr())) throw std::invalid_argument("runner not callable");
  auto e = std::make_shared<CacheEntry>();
  e->kind = CODE;
  e->guard = std::move(guard);
  e->fn = std::move(runner);
  e->plan_object = py::none();
  e->owner = py::none();
  e->tag = py::none();
  e->deps = py::none();
  return e;
}

PyObject* CacheEntry::run(const FrameView& view, PyObject* const* slots, PyObject* callback) {
  if (kind == CODE) {
    CallbackScope scope(callback);
    if (view.closure == nullptr) {
      return PyObject_Vectorcall(fn.ptr(), view.locals, (size_t)view.n_locals, nullptr);
    }
    // Code with free variables: the runner also needs the function's cells (the frame's
    // closure differs between function objects that share this code object).
    std::vector<PyObject*> args(view.locals, view.locals + view.n_locals);
    args.push_back(view.closure);
    return PyObject_Vectorcall(fn.ptr(), args.data(), args.size(), nullptr);
  }
  for (int i = 0; i < n_inputs; i++) {
    if (slots[i] == nullptr) {
      PyErr_Format(PyExc_RuntimeError, "graph input slot %d was not filled by the guard", i);
      return nullptr;
    }
  }
  CallbackScope scope(nullptr);  // graphs and output building (namedtuple classes) never traced
  PyObject* outs = PyObject_Vectorcall(fn.ptr(), slots, (size_t)n_inputs, nullptr);
  if (outs == nullptr) return nullptr;
  if (!PyTuple_Check(outs) && !PyList_Check(outs)) {
    PyErr_Format(PyExc_TypeError, "compiled_fn must return a tuple or list, not %.100s",
                 Py_TYPE(outs)->tp_name);
    Py_DECREF(outs);
    return nullptr;
  }
  PyObject* result = plan->build(outs, slots);
  Py_DECREF(outs);
  return result;
}

CacheEntry* as_cache_entry(PyObject* obj) {
  py::handle h(obj);
  if (!py::isinstance<CacheEntry>(h)) return nullptr;
  return h.cast<CacheEntry*>();
}

// ---- the walk and the miss path -------------------------------------------------------------

namespace {

// The callback's backend key, borrowed, or NULL (no callback, or one that matches any entry).
// The last callback asked about is remembered per thread through a weak reference (it may not
// outlive its user, and a dead one cannot be confused with a new object at the same address),
// so the hot path is one dereference and one compare. Callbacks that take no weak references
// are asked every time.
__thread PyObject* t_key_callback = nullptr;  // weakref to the callback, strong, or NULL
__thread PyObject* t_key = nullptr;           // strong or NULL

PyObject* backend_key_of(PyObject* callback) {
  if (callback == nullptr) return nullptr;
  if (t_key_callback != nullptr && PyWeakref_GetObject(t_key_callback) == callback) return t_key;
  PyObject* key = PyObject_GetAttrString(callback, "_xc_backend_key");
  if (key == nullptr) PyErr_Clear();
  if (key == Py_None) Py_CLEAR(key);
  Py_XSETREF(t_key, key);
  PyObject* ref = PyWeakref_NewRef(callback, nullptr);
  if (ref == nullptr) PyErr_Clear();
  Py_XSETREF(t_key_callback, ref);
  return t_key;
}

}  // namespace

bool run_cached(CodeExtra* extra, const FrameView& view, PyObject* callback, PyObject** out) {
  if (extra == nullptr || extra->entries.empty()) return false;
  PyObject* key = backend_key_of(callback);
  CallbackScope no_callback(nullptr);  // guards may run Python code (getattr): never traced
  for (size_t i = 0; i < extra->entries.size(); i++) {
    EntryRef ref = extra->entries[i];
    if (!ref.entry->usable_by(key)) continue;  // another backend's
    Py_INCREF(ref.obj);                        // the walk may clear the cache under us
    const uint64_t generation = extra->generation;
    SlotBuffer slots(ref.entry->guard->n_slots());
    if (ref.entry->guard->check(view, slots.data())) {
      if (extra->generation == generation) cache_move_to_front(extra, i);
      ref.entry->hits++;
      *out = ref.entry->run(view, slots.data(), callback);
      Py_DECREF(ref.obj);
      return true;
    }
    Py_DECREF(ref.obj);
    if (extra->generation != generation) return false;  // changed under us: treat as a miss
  }
  return false;
}

bool run_callback(PyObject* callback, PyCodeObject* code, const FrameView& view, PyObject** out) {
  PyObject* f_locals = PyDict_New();
  if (!f_locals) {
    *out = nullptr;
    return true;
  }
  for (Py_ssize_t i = 0; i < view.n_locals; i++) {
    if (view.locals[i] == nullptr) continue;
    if (PyDict_SetItem(f_locals, code_arg_name(code, (int)i), view.locals[i]) < 0) {
      Py_DECREF(f_locals);
      *out = nullptr;
      return true;
    }
  }
  PyObject* result;
  {
    CallbackScope no_callback(nullptr);
    PyObject* args[5] = {(PyObject*)code, f_locals, view.globals, view.builtins,
                         view.closure ? view.closure : Py_None};
    result = PyObject_Vectorcall(callback, args, 5, nullptr);
  }
  Py_DECREF(f_locals);
  if (result == nullptr) {
    *out = nullptr;
    return true;
  }
  if (result == Py_None) {
    Py_DECREF(result);
    return false;
  }
  CacheEntry* entry = as_cache_entry(result);
  if (entry == nullptr) {
    PyErr_Format(PyExc_TypeError, "compile callback must return a CacheEntry or None, not %.100s",
                 Py_TYPE(result)->tp_name);
    Py_DECREF(result);
    *out = nullptr;
    return true;
  }
  SlotBuffer slots(entry->guard->n_slots());
  bool ok;
  {
    CallbackScope no_callback(nullptr);
    ok = entry->guard->check(view, slots.data());
  }
  if (!ok) {
    Py_DECREF(result);
    return false;
  }
  *out = entry->run(view, slots.data(), callback);
  Py_DECREF(result);
  return true;
}

}  // namespace xc
