// guard_leaves.cpp — type, id, equals, length, dict-unchanged and module-tree leaves
// (see guard_leaves.h). Torch-free: tensor leaves are in guard_tensor.cpp.
#include "guard_leaves.h"

#include <pybind11/pybind11.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <unordered_set>

#include "py_compat.h"

namespace xc {

namespace {

// ---- small helpers --------------------------------------------------------------------------

// The pending Python error -> C++ exception (re-raised as itself by pybind11).
[[noreturn]] void throw_python_error() { throw pybind11::error_already_set(); }

// Owns one strong reference.
struct Ref {
  PyObject* o = nullptr;
  Ref() = default;
  explicit Ref(PyObject* p) : o(p) { Py_XINCREF(o); }
  Ref(Ref&& r) noexcept : o(r.o) { r.o = nullptr; }
  Ref& operator=(Ref&& r) noexcept {
    std::swap(o, r.o);
    return *this;
  }
  Ref(const Ref&) = delete;
  ~Ref() { Py_XDECREF(o); }
};

// An object compared by identity, held through a weak reference when its type takes one (else
// strongly: ints, strings, tuples, None...). is(v): v is that object and it is still alive, so an
// object that died never matches a new one at its address, and the guard keeps nothing alive.
class WeakId {
 public:
  explicit WeakId(PyObject* obj) : ptr_(obj) {
    if (PyType_SUPPORTS_WEAKREFS(Py_TYPE(obj))) {
      ref_ = PyWeakref_NewRef(obj, nullptr);
      if (ref_ == nullptr) throw_python_error();
      weak_ = true;
    } else {
      Py_INCREF(obj);
      ref_ = obj;
    }
  }
  WeakId(WeakId&& o) noexcept : ptr_(o.ptr_), ref_(o.ref_), weak_(o.weak_) { o.ref_ = nullptr; }
  WeakId(const WeakId&) = delete;
  WeakId& operator=(const WeakId&) = delete;
  ~WeakId() { Py_XDECREF(ref_); }

  bool is(PyObject* v) const { return v == ptr_ && (!weak_ || weakref_target(ref_) == v); }
  // Borrowed; NULL once the object died.
  PyObject* get() const {
    if (!weak_) return ptr_;
    PyObject* o = weakref_target(ref_);
    return o == Py_None ? nullptr : o;
  }
  void weak_objects(std::vector<PyObject*>& out) const {
    if (PyObject* o = weak_ ? get() : nullptr) out.push_back(o);
  }

 private:
  PyObject* ptr_;  // identity only (never dereferenced unless alive)
  PyObject* ref_;  // the weak reference, or the object itself (strong)
  bool weak_ = false;
};

// ---- type / id / length ---------------------------------------------------------------------

class TypeMatch final : public Leaf {
 public:
  TypeMatch(PyObject* tp, std::string desc) : Leaf(std::move(desc)), tp_(tp) {}
  bool check(PyObject* v) override { return tp_.is((PyObject*)Py_TYPE(v)); }
  void weak_objects(std::vector<PyObject*>& out) const override { tp_.weak_objects(out); }

 private:
  WeakId tp_;
};

class IdMatch final : public Leaf {
 public:
  IdMatch(PyObject* obj, std::string desc) : Leaf(std::move(desc)), obj_(obj) {}
  bool check(PyObject* v) override { return obj_.is(v); }
  void weak_objects(std::vector<PyObject*>& out) const override { obj_.weak_objects(out); }

 private:
  WeakId obj_;
};

class LengthCheck final : public Leaf {
 public:
  LengthCheck(Py_ssize_t n, std::string desc) : Leaf(std::move(desc)), n_(n) {}
  bool check(PyObject* v) override {
    Py_ssize_t n;
    if (PyList_CheckExact(v)) {
      n = PyList_GET_SIZE(v);
    } else if (PyTuple_CheckExact(v)) {
      n = PyTuple_GET_SIZE(v);
    } else if (PyDict_Check(v)) {
      n = PyDict_GET_SIZE(v);
    } else {
      n = PyObject_Size(v);
      if (n < 0) {
        clear_guard_error();
        return false;
      }
    }
    return n == n_;
  }

 private:
  Py_ssize_t n_;
};

// Keys of a dict, in insertion order. A key compares by identity (interned strings, small ints),
// else by exact type and ==; a raising == fails the guard. A key that hashes by identity (a
// tensor, a module: `by_identity`) compares by identity only: Tensor.__eq__ is elementwise, and
// a one-element tensor equal to the one guarded would pass as it.
class DictKeys final : public Leaf {
 public:
  DictKeys(PyObject* keys, std::vector<bool> by_identity, std::string desc)
      : Leaf(std::move(desc)), keys_(keys), by_identity_(std::move(by_identity)) {}
  bool check(PyObject* v) override {
    if (!PyDict_Check(v)) return false;
    const Py_ssize_t n = PyTuple_GET_SIZE(keys_.o);
    if (PyDict_GET_SIZE(v) != n) return false;
    PyObject *k, *val;
    Py_ssize_t pos = 0, i = 0;
    while (PyDict_Next(v, &pos, &k, &val)) {
      PyObject* want = PyTuple_GET_ITEM(keys_.o, i);
      const bool identity_only = by_identity_[i++];
      if (k == want) continue;
      if (identity_only || Py_TYPE(k) != Py_TYPE(want)) return false;
      int eq = PyObject_RichCompareBool(k, want, Py_EQ);
      if (eq != 1) {
        if (eq < 0) clear_guard_error();
        return false;
      }
    }
    return i == n;
  }

 private:
  Ref keys_;
  std::vector<bool> by_identity_;
};

// ---- equals ---------------------------------------------------------------------------------

// A constant compiled into a comparator tree at construction.
class ConstMatcher {
 public:
  explicit ConstMatcher(PyObject* value) : type_((PyObject*)Py_TYPE(value)), value_(value) {
    PyTypeObject* tp = Py_TYPE(value);
    if (value == Py_None || tp == &PyBool_Type) {
      kind_ = IDENTITY;  // None, True, False are singletons
    } else if (tp == &PyLong_Type || tp == &PyUnicode_Type || tp == &PyBytes_Type) {
      kind_ = RICH;  // C-level comparison of exact builtin types
    } else if (tp == &PyFloat_Type) {
      kind_ = FLOAT;
      f_ = PyFloat_AS_DOUBLE(value);
    } else if (std::strcmp(tp->tp_name, "torch.dtype") == 0) {
      kind_ = IDENTITY;  // one object per dtype
    } else if (std::strcmp(tp->tp_name, "torch.device") == 0) {
      kind_ = RICH;  // THPDevice_rc, C-level
    } else if (tp == &PyTuple_Type) {
      kind_ = TUPLE;
      for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(value); i++) {
        items_.emplace_back(PyTuple_GET_ITEM(value, i));
      }
    } else {
      throw pybind11::type_error(std::string("add_equals_match: unsupported constant type ") +
                                 tp->tp_name);
    }
  }

  bool match(PyObject* v) const {
    if (v == value_.o) return true;
    if ((PyObject*)Py_TYPE(v) != type_.o) return false;
    switch (kind_) {
      case IDENTITY:
        return false;
      case FLOAT: {
        double d = PyFloat_AS_DOUBLE(v);
        if (std::isnan(f_)) return std::isnan(d);
        return d == f_ && std::signbit(d) == std::signbit(f_);
      }
      case RICH: {
        int r = PyObject_RichCompareBool(v, value_.o, Py_EQ);
        if (r < 0) clear_guard_error();
        return r == 1;
      }
      case TUPLE: {
        if (PyTuple_GET_SIZE(v) != (Py_ssize_t)items_.size()) return false;
        for (size_t i = 0; i < items_.size(); i++) {
          if (!items_[i].match(PyTuple_GET_ITEM(v, i))) return false;
        }
        return true;
      }
    }
    return false;
  }

 private:
  enum Kind { IDENTITY, RICH, FLOAT, TUPLE };
  Ref type_;
  Ref value_;
  Kind kind_ = IDENTITY;
  double f_ = 0.0;
  std::vector<ConstMatcher> items_;
};

class EqualsMatch final : public Leaf {
 public:
  EqualsMatch(PyObject* value, std::string desc) : Leaf(std::move(desc)), m_(value) {}
  bool check(PyObject* v) override { return m_.match(v); }

 private:
  ConstMatcher m_;
};

// ---- float relations -----------------------------------------------------------------------

// A symbolic float's relations to constants, as Python compares (NaN: only != holds).
class FloatCompare final : public Leaf {
 public:
  FloatCompare(std::vector<std::pair<int, double>> relations, std::string desc)
      : Leaf(std::move(desc)), relations_(std::move(relations)) {}
  bool check(PyObject* v) override {
    if (!PyFloat_CheckExact(v)) return false;
    double d = PyFloat_AS_DOUBLE(v);
    for (const auto& [op, c] : relations_) {
      if (!holds(op, d, c)) return false;
    }
    return true;
  }

  static bool holds(int op, double d, double c) {
    switch (op) {
      case FLOAT_LT:
        return d < c;
      case FLOAT_LE:
        return d <= c;
      case FLOAT_GT:
        return d > c;
      case FLOAT_GE:
        return d >= c;
      case FLOAT_NE:
        return d != c;
    }
    return false;
  }

 private:
  std::vector<std::pair<int, double>> relations_;
};

// ---- dict watching --------------------------------------------------------------------------

// A dict and a snapshot of its (key, value) pairs. The dict is held strongly (a dict given to
// DictUnchanged, a plain dict found in a watched dict: _parameters, _modules...), weakly (dicts
// that take weak references: OrderedDict hook tables), or not at all when it is a module's
// __dict__: then the module is held weakly and the dict is only read while the module is alive
// and that dict is still its __dict__. (A hook table empty when watched is held strongly: a hook
// added later that refers to the module keeps it alive until the entry goes, as before.) Snapshot
// values that take weak references (modules, tensors, functions, bound methods) are held weakly,
// the rest strongly. So a watch never keeps a module alive, not even through a cycle (a bound
// method of the module in its own __dict__ or hook table), and a dead value never compares equal to
// a new object at its address.
class DictWatch {
 public:
  enum Hold { STRONG, WEAK, MODULE_DICT };

  // `owner`: the module whose __dict__ `d` is (hold MODULE_DICT), else NULL.
  DictWatch(PyObject* d, Hold hold, PyObject* owner = nullptr) : ptr_(d), hold_(hold) {
    if (hold == STRONG) {
      Py_INCREF(d);
      ref_ = d;
    } else {
      ref_ = PyWeakref_NewRef(hold == WEAK ? d : owner, nullptr);
      if (ref_ == nullptr) throw_python_error();
      // where the module keeps its __dict__ (inside the module object: valid while it lives)
      if (hold == MODULE_DICT) slot_ = _PyObject_GetDictPtr(owner);
    }
    snapshot();
  }
  DictWatch(DictWatch&& o) noexcept
      : ptr_(o.ptr_),
        ref_(o.ref_),
        slot_(o.slot_),
        hold_(o.hold_),
        gates_(o.gates_),
        version_(o.version_),
        snap_(std::move(o.snap_)) {
    o.ref_ = nullptr;
  }
  DictWatch(const DictWatch&) = delete;
  DictWatch& operator=(const DictWatch&) = delete;
  ~DictWatch() { Py_XDECREF(ref_); }
  // A dict found as a value: held weakly if it takes weak references and holds something (a hook
  // table with a bound method of the module), else strongly: an empty dict cannot close a cycle,
  // and a strong one costs no weak-reference load per check (modules carry ~11 empty hook tables).
  static DictWatch of_value(PyObject* d) {
    return DictWatch(
        d, PyType_SUPPORTS_WEAKREFS(Py_TYPE(d)) && PyDict_GET_SIZE(d) > 0 ? WEAK : STRONG);
  }

  // Borrowed; NULL when it died or (MODULE_DICT) is no longer its module's __dict__.
  PyObject* dict() const {
    if (hold_ == STRONG) return ptr_;
    PyObject* target = weakref_target(ref_);
    if (hold_ == WEAK) return target == ptr_ ? ptr_ : nullptr;
    if (target == Py_None || slot_ == nullptr) return nullptr;  // MODULE_DICT: the module died
    return *slot_ == ptr_ ? ptr_ : nullptr;                     // ... or has another __dict__
  }
  // Identity of the dict (never dereferenced: for bookkeeping of what is watched).
  PyObject* id() const { return ptr_; }
  bool is_module_dict() const { return hold_ == MODULE_DICT; }
  // A module's _forward_hooks / _forward_pre_hooks table, empty when watched, whose side tables
  // (with_kwargs, always_called) were left unwatched (ModuleTree, lazy): see skip_table.
  bool gates_side_tables() const { return gates_; }
  void set_gates_side_tables(bool g) { gates_ = g; }

  // Inlined into the per-call walk (hundreds of dicts for a big tree), its slow path kept out
  // of line: GCC left the whole of it a called function on 3.13, doubling the walk.
  __attribute__((always_inline)) bool unchanged() {
    PyObject* d = dict();
    if (d == nullptr) return false;
    if (dict_version_read_before(d) == version_)
      return true;  // snapshot() read it (3.13: detached it)
    return unchanged_slow(d);
  }

  __attribute__((noinline)) bool unchanged_slow(PyObject* d) {
    const std::vector<Ref>& keys = snap_->keys;
    const std::vector<WeakId>& values = snap_->values;
    if (PyDict_GET_SIZE(d) != (Py_ssize_t)keys.size()) return false;
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    size_t i = 0;
    while (PyDict_Next(d, &pos, &k, &v)) {
      if (i >= keys.size() || keys[i].o != k || !values[i].is(v)) return false;
      i++;
    }
    if (i != keys.size()) return false;
    // same contents: remember the new version (read again through dict_version: on 3.13 a dict
    // its snapshot could not detach gets a version no read equals, so it never passes unread)
    version_ = dict_version(d);
    return true;
  }

  // Takes the dict's current contents as the baseline; false when the dict is gone.
  bool snapshot() {
    PyObject* d = dict();
    if (!snap_) snap_ = std::make_unique<Snapshot>();
    snap_->keys.clear();
    snap_->values.clear();
    if (d == nullptr) return false;
    version_ = dict_version(d);
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (PyDict_Next(d, &pos, &k, &v)) {
      snap_->keys.emplace_back(k);
      snap_->values.emplace_back(v);
    }
    return true;
  }

 private:
  PyObject* ptr_;  // the dict (identity; read only while dict() says it lives)
  PyObject* ref_;  // STRONG: the dict; WEAK: a weakref to it; MODULE_DICT: to the module
  PyObject** slot_ = nullptr;  // MODULE_DICT: the module's __dict__ slot
  Hold hold_;
  bool gates_ = false;  // packed next to hold_: the per-call walk reads ~1400 of these
  uint64_t version_ = 0;
  // Read only when the version changed: kept out of line, so the per-call walk over a big
  // tree's watches (hundreds) stays within the L1 cache.
  struct Snapshot {
    std::vector<Ref> keys;
    std::vector<WeakId> values;
  };
  std::unique_ptr<Snapshot> snap_;
};

class DictUnchanged final : public Leaf {
 public:
  DictUnchanged(PyObject* d, std::string desc)
      : Leaf(std::move(desc)), watch_(d, DictWatch::STRONG) {}
  bool check(PyObject* v) override { return v == watch_.dict() && watch_.unchanged(); }
  void rewatch() override {
    if (!watch_.unchanged()) watch_.snapshot();  // a globals dict is big: only when changed
  }

 private:
  DictWatch watch_;
};

// Which tables of a module's __dict__ a lazy tree leaves unwatched (the per-call cost of a
// tree is one version read per watched dict: 15 per module for all of them, 8 for the rest):
//  - the state_dict / load_state_dict hook tables: nn.Module's call never reads them (a trace
//    that read one asks for a full tree: SideEffects.reads_module_tables);
//  - the side tables of the forward (pre-)hooks (with_kwargs, always_called) while the hook
//    table they annotate is empty: nn.Module's call (and the frontend's inlined hooks) look up
//    only the ids of registered hooks in them. The hook table is watched; once it changes the
//    guard fails, and the next tree watches the side tables too (gates_side_tables).
// Returns 1: skip, 0: watch, 2: watch, and it gates side tables that were skipped.
int skip_table(PyObject* module_dict, PyObject* key) {
  static PyObject* names[8] = {nullptr};
  static const char* text[8] = {"_state_dict_hooks",
                                "_state_dict_pre_hooks",
                                "_load_state_dict_pre_hooks",
                                "_load_state_dict_post_hooks",
                                "_forward_hooks_with_kwargs",
                                "_forward_hooks_always_called",
                                "_forward_pre_hooks_with_kwargs",
                                "_forward_hooks"};
  static PyObject* pre_hooks = nullptr;
  if (names[0] == nullptr) {
    for (int i = 0; i < 8; i++) names[i] = PyUnicode_InternFromString(text[i]);
    pre_hooks = PyUnicode_InternFromString("_forward_pre_hooks");
  }
  if (!PyUnicode_Check(key)) return 0;
  auto empty_table = [&](PyObject* name) {
    PyObject* t = PyDict_GetItemWithError(module_dict, name);  // borrowed
    if (t == nullptr) PyErr_Clear();
    return t != nullptr && PyDict_Check(t) && PyDict_GET_SIZE(t) == 0;
  };
  auto is = [&](PyObject* name) {
    return key == name ||
           PyUnicode_Compare(key, name) == 0;  // keys are interned: rarely the slow way
  };
  for (int i = 0; i < 4; i++) {
    if (is(names[i])) return 1;
  }
  if (is(names[4]) || is(names[5])) return empty_table(names[7]) ? 1 : 0;
  if (is(names[6])) return empty_table(pre_hooks) ? 1 : 0;
  if (is(names[7]) || is(pre_hooks)) {
    PyObject* v = PyDict_GetItemWithError(module_dict, key);
    if (v == nullptr) PyErr_Clear();
    return v != nullptr && PyDict_Check(v) && PyDict_GET_SIZE(v) == 0 ? 2 : 0;
  }
  return 0;
}

class ModuleTree final : public Leaf {
 public:
  ModuleTree(PyObject* module, std::string desc, bool lazy)
      : Leaf(std::move(desc)), module_(module), lazy_(lazy) {
    if (!watch_tree()) throw_python_error();
  }

  // The entry's own effects changed module state: plain attributes only (the frontend allows
  // a rewatch only then, never for parameters, buffers or submodules), so the tree's shape is
  // the same. Each dict that changed is snapshotted again, and dicts newly stored in it
  // (`self.state = {...}`) are watched too. A version check per dict, no Python call: this
  // runs after every call of such an entry (a static KV cache's bookkeeping in generate()).
  // A submodule that is new to the tree (not expected, but cheap to notice) re-enumerates it.
  void rewatch() override {
    size_t n = watches_.size();
    std::unordered_set<PyObject*> seen;
    for (size_t i = 0; i < n; ++i) {
      if (watches_[i].unchanged()) continue;
      if (seen.empty()) {
        for (const DictWatch& w : watches_) {
          if (PyObject* d = w.dict()) seen.insert(d);
        }
      }
      if (watches_[i].gates_side_tables()) return rewatch_all();  // a hook table changed
      if (!watches_[i].snapshot()) continue;                      // gone: the check keeps failing
      PyObject* d = watches_[i].dict();
      const bool module_dict = lazy_ && watches_[i].is_module_dict();
      PyObject *k, *v;
      Py_ssize_t pos = 0;
      while (PyDict_Next(d, &pos, &k, &v)) {
        if (PyDict_Check(v) && (!module_dict || skip_table(d, k) == 0) && seen.insert(v).second) {
          watches_.push_back(DictWatch::of_value(v));
        }
        if (is_new_module(v, seen)) return rewatch_all();
      }
    }
  }

  void weak_objects(std::vector<PyObject*>& out) const override { module_.weak_objects(out); }

  bool check(PyObject* v) override {
    if (!module_.is(v)) return false;
    for (DictWatch& w : watches_) {
      if (!w.unchanged()) return false;
    }
    return true;
  }

 private:
  void rewatch_all() {
    std::vector<DictWatch> old;
    old.swap(watches_);
    if (!watch_tree()) {
      PyErr_Clear();
      watches_.swap(old);  // keep the old baseline: the guard fails and the frame recompiles
    }
  }

  // Whether `v` is an nn.Module whose __dict__ is not watched yet.
  static bool is_new_module(PyObject* v, const std::unordered_set<PyObject*>& seen) {
    static PyObject* module_type = nullptr;
    if (module_type == nullptr) {
      PyObject* mod = PyImport_GetModule(PyUnicode_InternFromString("torch.nn.modules.module"));
      if (mod == nullptr) {
        PyErr_Clear();
        return false;
      }
      module_type = PyObject_GetAttrString(mod, "Module");  // kept for the process
      Py_DECREF(mod);
      if (module_type == nullptr) {
        PyErr_Clear();
        return false;
      }
    }
    int is_module = PyObject_IsInstance(v, module_type);
    if (is_module <= 0) {
      PyErr_Clear();
      return false;
    }
    PyObject* d = PyObject_GenericGetDict(v, nullptr);
    if (d == nullptr) {
      PyErr_Clear();
      return true;
    }
    bool is_new = seen.count(d) == 0;
    Py_DECREF(d);
    return is_new;
  }

  // Watches the __dict__ of every module of the tree, the dicts in them, and the global hook
  // dicts. False with a Python error set on failure.
  bool watch_tree() {
    std::unordered_set<PyObject*> seen;
    auto watch = [&](PyObject* d) {
      if (seen.insert(d).second) watches_.push_back(DictWatch::of_value(d));
    };
    PyObject* module = module_.get();
    if (module == nullptr) {
      PyErr_SetString(PyExc_ReferenceError, "module_tree: the module died");
      return false;
    }
    PyObject* it = PyObject_CallMethod(module, "modules", nullptr);
    if (!it) return false;
    PyObject* iter = PyObject_GetIter(it);
    Py_DECREF(it);
    if (!iter) return false;
    while (PyObject* m = PyIter_Next(iter)) {
      PyObject* d = PyObject_GetAttrString(m, "__dict__");
      if (!d) {
        Py_DECREF(m);
        break;
      }
      PyObject** dp = _PyObject_GetDictPtr(m);
      const bool own_dict = PyDict_Check(d) && dp != nullptr && *dp == d;
      if (own_dict && seen.insert(d).second) {
        watches_.emplace_back(d, DictWatch::MODULE_DICT, m);  // read only while m lives
      } else if (PyDict_Check(d)) {
        watch(d);
      }
      Py_DECREF(m);
      if (PyDict_Check(d)) {
        PyObject *k, *v;
        Py_ssize_t pos = 0;
        while (PyDict_Next(d, &pos, &k, &v)) {
          if (!PyDict_Check(v)) continue;
          const int skip = lazy_ && own_dict ? skip_table(d, k) : 0;
          if (skip == 1) continue;
          if (seen.count(v) == 0) {
            watch(v);
            watches_.back().set_gates_side_tables(skip == 2);
          }
        }
      }
      Py_DECREF(d);
    }
    Py_DECREF(iter);
    if (PyErr_Occurred()) return false;
    PyObject* mod = PyImport_ImportModule("torch.nn.modules.module");
    if (!mod) return false;
    PyObject* md = PyModule_GetDict(mod);  // borrowed
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (PyDict_Next(md, &pos, &k, &v)) {
      const char* name = PyUnicode_Check(k) ? PyUnicode_AsUTF8(k) : nullptr;
      if (name && std::strncmp(name, "_global_", 8) == 0 && PyDict_Check(v)) watch(v);
    }
    Py_DECREF(mod);
    return !PyErr_Occurred();
  }

  WeakId module_;
  bool lazy_;
  std::vector<DictWatch> watches_;
};

}  // namespace

std::unique_ptr<Leaf> make_type_match(PyObject* type, std::string desc) {
  if (!PyType_Check(type)) throw pybind11::type_error("add_type_match: expected a type");
  return std::make_unique<TypeMatch>(type, std::move(desc));
}

std::unique_ptr<Leaf> make_id_match(PyObject* obj, std::string desc) {
  return std::make_unique<IdMatch>(obj, std::move(desc));
}

std::unique_ptr<Leaf> make_equals_match(PyObject* value, std::string desc) {
  return std::make_unique<EqualsMatch>(value, std::move(desc));
}

std::unique_ptr<Leaf> make_float_compare(std::vector<std::pair<int, double>> relations,
                                         std::string desc) {
  for (const auto& r : relations) {
    if (r.first < FLOAT_LT || r.first > FLOAT_NE)
      throw pybind11::value_error("add_float_compare: unknown relation");
  }
  return std::make_unique<FloatCompare>(std::move(relations), std::move(desc));
}

std::unique_ptr<Leaf> make_length_check(Py_ssize_t n, std::string desc) {
  return std::make_unique<LengthCheck>(n, std::move(desc));
}

std::unique_ptr<Leaf> make_dict_keys(PyObject* keys, std::vector<bool> by_identity,
                                     std::string desc) {
  if (!PyTuple_Check(keys)) throw pybind11::type_error("add_dict_keys: expected a tuple of keys");
  if (by_identity.empty()) by_identity.assign(PyTuple_GET_SIZE(keys), false);
  if ((Py_ssize_t)by_identity.size() != PyTuple_GET_SIZE(keys))
    throw pybind11::value_error("add_dict_keys: by_identity needs one flag per key");
  return std::make_unique<DictKeys>(keys, std::move(by_identity), std::move(desc));
}

std::unique_ptr<Leaf> make_dict_unchanged(PyObject* dict, std::string desc) {
  if (!PyDict_Check(dict)) throw pybind11::type_error("add_dict_unchanged: expected a dict");
  return std::make_unique<DictUnchanged>(dict, std::move(desc));
}

std::unique_ptr<Leaf> make_module_tree(PyObject* module, std::string desc, bool lazy) {
  return std::make_unique<ModuleTree>(module, std::move(desc), lazy);
}

}  // namespace xc
