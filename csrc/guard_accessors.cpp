// guard_accessors.cpp — the accessor kinds (see guard_accessors.h).
#include "guard_accessors.h"

#include <stdexcept>

namespace xc {

std::string safe_repr(PyObject* obj) {
  PyObject* r = PyObject_Repr(obj);
  if (r == nullptr) {
    PyErr_Clear();
    return "<unprintable>";
  }
  const char* s = PyUnicode_AsUTF8(r);
  std::string out = s ? s : "<unprintable>";
  if (!s) PyErr_Clear();
  Py_DECREF(r);
  return out;
}

namespace {

std::string utf8(PyObject* str) {
  const char* s = PyUnicode_AsUTF8(str);
  if (!s) {
    PyErr_Clear();
    return "<?>";
  }
  return s;
}

// Owns one strong reference.
class Ref {
 public:
  explicit Ref(PyObject* o) : o_(o) { Py_XINCREF(o_); }
  ~Ref() { Py_XDECREF(o_); }
  Ref(const Ref&) = delete;
  Ref& operator=(const Ref&) = delete;
  PyObject* get() const { return o_; }

 private:
  PyObject* o_;
};

PyObject* interned(PyObject* name) {
  if (!PyUnicode_Check(name)) throw std::invalid_argument("name must be a str");
  Py_INCREF(name);
  PyUnicode_InternInPlace(&name);
  return name;  // new reference
}

// Same key: same exact type and equal (errors count as different).
bool same_key(PyObject* a, PyObject* b) {
  if (a == b) return true;
  if (Py_TYPE(a) != Py_TYPE(b)) return false;
  int r = PyObject_RichCompareBool(a, b, Py_EQ);
  if (r < 0) PyErr_Clear();
  return r == 1;
}

class LocalAccessor final : public Accessor {
 public:
  LocalAccessor(int index, std::string name) : index_(index), name_(std::move(name)) {}
  PyObject* fetch(PyObject*, const FrameView& f) const override {
    if (index_ >= f.n_locals) return nullptr;
    PyObject* v = f.locals[index_];
    Py_XINCREF(v);
    return v;
  }
  std::string path(const std::string&) const override { return "L['" + name_ + "']"; }
  bool same(const Accessor& o) const override {
    auto* p = dynamic_cast<const LocalAccessor*>(&o);
    return p && p->index_ == index_;
  }

 private:
  int index_;
  std::string name_;
};

class GlobalAccessor final : public Accessor {
 public:
  explicit GlobalAccessor(PyObject* name) : name_(name) { Py_DECREF(name); }  // steals `name`
  PyObject* fetch(PyObject*, const FrameView& f) const override {
    PyObject* v = lookup(f.globals);
    if (v == nullptr && !PyErr_Occurred()) v = lookup(f.builtins);
    Py_XINCREF(v);
    return v;
  }
  std::string path(const std::string&) const override { return "G['" + utf8(name_.get()) + "']"; }
  bool same(const Accessor& o) const override {
    auto* p = dynamic_cast<const GlobalAccessor*>(&o);
    return p && same_key(p->name_.get(), name_.get());
  }

 private:
  PyObject* lookup(PyObject* d) const {  // borrowed or NULL
    if (d == nullptr || !PyDict_Check(d)) return nullptr;
    return PyDict_GetItemWithError(d, name_.get());
  }
  Ref name_;
};

// The result of calling a held function with held constant arguments: a torch getter of global
// state that a trace folded into a constant (torch.get_num_threads(),
// torch._C._get_mkldnn_enabled(), torch.get_float32_matmul_precision()...). Called at every
// check of the entry that relied on it; the call may not run Python code of the user's.
class CallAccessor final : public Accessor {
 public:
  CallAccessor(PyObject* fn, PyObject* args, PyObject* kwargs, std::string name)
      : fn_(fn), args_(args), kwargs_(kwargs), name_(std::move(name)) {}
  PyObject* fetch(PyObject*, const FrameView&) const override {
    return PyObject_Call(fn_.get(), args_.get(), kwargs_.get());
  }
  std::string path(const std::string&) const override { return name_; }
  bool same(const Accessor& o) const override {
    auto* p = dynamic_cast<const CallAccessor*>(&o);
    if (p == nullptr || p->fn_.get() != fn_.get() || !same_key(p->args_.get(), args_.get())) {
      return false;
    }
    if (p->kwargs_.get() == nullptr || kwargs_.get() == nullptr) {
      return p->kwargs_.get() == kwargs_.get();
    }
    return same_key(p->kwargs_.get(), kwargs_.get());
  }

 private:
  Ref fn_;
  Ref args_;    // a tuple
  Ref kwargs_;  // a dict, or NULL
  std::string name_;
};

class ClosureAccessor final : public Accessor {
 public:
  // cell_only: the value is the cell object, not its contents.
  ClosureAccessor(int index, std::string name, bool cell_only)
      : index_(index), name_(std::move(name)), cell_only_(cell_only) {}
  PyObject* fetch(PyObject*, const FrameView& f) const override {
    if (f.closure == nullptr || !PyTuple_Check(f.closure)) return nullptr;
    if (index_ >= PyTuple_GET_SIZE(f.closure)) return nullptr;
    PyObject* cell = PyTuple_GET_ITEM(f.closure, index_);
    if (!PyCell_Check(cell)) return nullptr;
    PyObject* v = cell_only_ ? cell : PyCell_GET(cell);  // NULL for an empty cell
    Py_XINCREF(v);
    return v;
  }
  std::string path(const std::string&) const override {
    std::string p = "closure[" + std::to_string(index_) + "]";
    return cell_only_ ? p : p + "['" + name_ + "']";
  }
  bool same(const Accessor& o) const override {
    auto* p = dynamic_cast<const ClosureAccessor*>(&o);
    return p && p->index_ == index_ && p->cell_only_ == cell_only_;
  }

 private:
  int index_;
  std::string name_;
  bool cell_only_;
};

// nn.Module keeps parameters, buffers and submodules out of its __dict__ and serves them from
// a Python-level __getattr__, so PyObject_GetAttr on `mod.weight` costs a failed generic lookup
// (an AttributeError object) plus a Python frame. For types whose __getattribute__ is object's
// and whose __getattr__ is exactly torch.nn.Module.__getattr__, we run the same two steps in C:
// the generic lookup without raising, then Module.__getattr__'s three dict lookups.
class ModuleGetattr {
 public:
  // Whether `tp` resolves attributes exactly like nn.Module. Borrowed `tp`.
  static bool applies_to(PyTypeObject* tp) {
    PyObject* module_getattr = module_getattr_function();
    if (module_getattr == nullptr) return false;
    static PyObject* getattr_name = PyUnicode_InternFromString("__getattr__");
    static PyObject* getattribute_name = PyUnicode_InternFromString("__getattribute__");
    static PyObject* object_getattribute =
        _PyType_Lookup(&PyBaseObject_Type, getattribute_name);  // borrowed, immortal enough
    return _PyType_Lookup(tp, getattr_name) == module_getattr &&
           _PyType_Lookup(tp, getattribute_name) == object_getattribute;
  }

  // New reference or NULL (maybe with an error set). Same result as PyObject_GetAttr.
  static PyObject* get(PyObject* obj, PyObject* name) {
    PyObject* v = _PyObject_GenericGetAttrWithDict(obj, name, nullptr, /*suppress=*/1);
    if (v != nullptr || PyErr_Occurred()) return v;
    PyObject* dict = PyObject_GenericGetDict(obj, nullptr);
    if (dict == nullptr) return nullptr;
    static PyObject* keys[3] = {PyUnicode_InternFromString("_parameters"),
                                PyUnicode_InternFromString("_buffers"),
                                PyUnicode_InternFromString("_modules")};
    for (PyObject* key : keys) {
      PyObject* d = PyDict_GetItemWithError(dict, key);
      if (d == nullptr) {
        if (PyErr_Occurred()) break;
        continue;
      }
      if (!PyDict_Check(d)) {  // unusual: let Python answer
        Py_DECREF(dict);
        return PyObject_GetAttr(obj, name);
      }
      v = PyDict_GetItemWithError(d, name);
      if (v != nullptr || PyErr_Occurred()) break;
    }
    Py_XINCREF(v);
    Py_DECREF(dict);
    return v;
  }

 private:
  // Borrowed torch.nn.Module.__getattr__ (kept alive by a static strong ref), or NULL while
  // torch.nn is not imported. Never imports anything itself.
  static PyObject* module_getattr_function() {
    static PyObject* fn = nullptr;
    if (fn != nullptr) return fn;
    static PyObject* module_name = PyUnicode_InternFromString("torch.nn.modules.module");
    PyObject* mod = PyImport_GetModule(module_name);
    if (mod == nullptr) {
      PyErr_Clear();
      return nullptr;
    }
    PyObject* cls = PyObject_GetAttrString(mod, "Module");
    Py_DECREF(mod);
    if (cls == nullptr || !PyType_Check(cls)) {
      PyErr_Clear();
      Py_XDECREF(cls);
      return nullptr;
    }
    PyObject* f = PyDict_GetItemString(((PyTypeObject*)cls)->tp_dict, "__getattr__");
    Py_XINCREF(f);
    Py_DECREF(cls);
    fn = f;
    return fn;
  }
};

class AttrAccessor final : public Accessor {
 public:
  explicit AttrAccessor(PyObject* name) : name_(name) { Py_DECREF(name); }  // steals `name`
  ~AttrAccessor() override { Py_XDECREF(seen_type_); }
  PyObject* fetch(PyObject* parent, const FrameView&) const override {
    PyTypeObject* tp = Py_TYPE(parent);
    if (tp != seen_type_ || tp->tp_version_tag != seen_version_ || seen_version_ == 0) {
      classify(tp);
    }
    if (module_like_) return ModuleGetattr::get(parent, name_.get());
    return PyObject_GetAttr(parent, name_.get());
  }
  std::string path(const std::string& parent) const override {
    return parent + "." + utf8(name_.get());
  }
  bool same(const Accessor& o) const override {
    auto* p = dynamic_cast<const AttrAccessor*>(&o);
    return p && same_key(p->name_.get(), name_.get());
  }

 private:
  // Caches how `tp` resolves attributes; redone whenever the type (or any base) is modified,
  // which changes its version tag.
  void classify(PyTypeObject* tp) const {
    module_like_ = ModuleGetattr::applies_to(tp);  // _PyType_Lookup assigns a version tag
    Py_INCREF(tp);
    Py_XSETREF(seen_type_, tp);
    seen_version_ = (tp->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG) ? tp->tp_version_tag : 0;
  }

  Ref name_;
  mutable PyTypeObject* seen_type_ = nullptr;  // strong
  mutable unsigned int seen_version_ = 0;
  mutable bool module_like_ = false;
};

// object.__getattribute__(parent, name): the instance dict and the class, never a Python-level
// __getattribute__ or __getattr__. Attributes the frontend read through a class's own
// __getattribute__ (HF configs) are guarded this way, so checking the guard runs no Python code
// (running the class's __getattribute__ would reach the frame hook, and its compiled entry's
// guards would read the same attribute again).
class GenericAttrAccessor final : public Accessor {
 public:
  explicit GenericAttrAccessor(PyObject* name) : name_(name) { Py_DECREF(name); }  // steals `name`
  PyObject* fetch(PyObject* parent, const FrameView&) const override {
    return PyObject_GenericGetAttr(parent, name_.get());
  }
  std::string path(const std::string& parent) const override {
    return "object.__getattribute__(" + parent + ", '" + utf8(name_.get()) + "')";
  }
  bool same(const Accessor& o) const override {
    auto* p = dynamic_cast<const GenericAttrAccessor*>(&o);
    return p && same_key(p->name_.get(), name_.get());
  }

 private:
  Ref name_;
};

class ItemAccessor final : public Accessor {
 public:
  explicit ItemAccessor(PyObject* key) : key_(key) {
    if (PyLong_CheckExact(key)) {
      int overflow = 0;
      long long i = PyLong_AsLongLongAndOverflow(key, &overflow);
      if (!overflow && !(i == -1 && PyErr_Occurred())) {
        index_ = static_cast<Py_ssize_t>(i);
        is_index_ = true;
      }
      PyErr_Clear();
    }
  }
  PyObject* fetch(PyObject* parent, const FrameView&) const override {
    if (is_index_) {
      if (PyList_CheckExact(parent)) return sequence_item(PyList_GET_SIZE(parent), parent, true);
      if (PyTuple_CheckExact(parent)) return sequence_item(PyTuple_GET_SIZE(parent), parent, false);
    }
    if (PyDict_Check(parent)) {
      PyObject* v = PyDict_GetItemWithError(parent, key_.get());
      Py_XINCREF(v);
      return v;
    }
    return PyObject_GetItem(parent, key_.get());
  }
  std::string path(const std::string& parent) const override {
    return parent + "[" + safe_repr(key_.get()) + "]";
  }
  bool same(const Accessor& o) const override {
    auto* p = dynamic_cast<const ItemAccessor*>(&o);
    return p && same_key(p->key_.get(), key_.get());
  }

 private:
  PyObject* sequence_item(Py_ssize_t n, PyObject* seq, bool is_list) const {
    Py_ssize_t i = index_ < 0 ? index_ + n : index_;
    if (i < 0 || i >= n) return nullptr;
    PyObject* v = is_list ? PyList_GET_ITEM(seq, i) : PyTuple_GET_ITEM(seq, i);
    Py_INCREF(v);
    return v;
  }

  Ref key_;
  Py_ssize_t index_ = 0;
  bool is_index_ = false;
};

}  // namespace

std::unique_ptr<Accessor> make_local_accessor(int index, std::string name) {
  if (index < 0) throw std::out_of_range("local index must be >= 0");
  return std::make_unique<LocalAccessor>(index, std::move(name));
}

std::unique_ptr<Accessor> make_global_accessor(PyObject* name) {
  return std::make_unique<GlobalAccessor>(interned(name));
}

std::unique_ptr<Accessor> make_call_accessor(PyObject* fn, PyObject* args, PyObject* kwargs,
                                             std::string name) {
  if (!PyCallable_Check(fn)) throw std::invalid_argument("fn must be callable");
  if (!PyTuple_Check(args)) throw std::invalid_argument("args must be a tuple");
  if (kwargs != nullptr && !PyDict_Check(kwargs)) throw std::invalid_argument("kwargs: a dict");
  return std::make_unique<CallAccessor>(fn, args, kwargs, std::move(name));
}

std::unique_ptr<Accessor> make_closure_accessor(int index, std::string name) {
  if (index < 0) throw std::out_of_range("closure index must be >= 0");
  return std::make_unique<ClosureAccessor>(index, std::move(name), false);
}

std::unique_ptr<Accessor> make_closure_cell_accessor(int index, std::string name) {
  if (index < 0) throw std::out_of_range("closure index must be >= 0");
  return std::make_unique<ClosureAccessor>(index, std::move(name), true);
}

std::unique_ptr<Accessor> make_attr_accessor(PyObject* name) {
  return std::make_unique<AttrAccessor>(interned(name));
}

std::unique_ptr<Accessor> make_generic_attr_accessor(PyObject* name) {
  return std::make_unique<GenericAttrAccessor>(interned(name));
}

std::unique_ptr<Accessor> make_item_accessor(PyObject* key) {
  return std::make_unique<ItemAccessor>(key);
}

}  // namespace xc
