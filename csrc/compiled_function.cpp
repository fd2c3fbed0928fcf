// compiled_function.cpp — CompiledFunction and the module-call trampoline (compiled_function.h).
#include "compiled_function.h"

#include <structmember.h>

#include <cstring>
#include <vector>

#include "cache_entry.h"
#include "code_cache.h"
#include "frame_hook.h"
#include "py_compat.h"

namespace xc {

namespace {

// ---- hook dicts -----------------------------------------------------------------------------

// Dicts whose non-emptiness sends a call down the eager hooks path.
struct HookDicts {
  PyObject* module_dict = nullptr;  // strong: hooks_module.__dict__
  PyObject* global_dict = nullptr;  // strong: torch.nn.modules.module.__dict__
  uint64_t module_version = 0;
  uint64_t global_version = 0;
  std::vector<PyObject*> dicts;  // strong
  // The module's forward when the CompiledFunction was made: the object in its __dict__, or
  // (forward_in_instance false) what its type resolves. Another one now (`m.forward = g`, or
  // the class's forward replaced) sends the call down the module's own __call__, where the new
  // forward's frame is compiled (issue #19 item 6: the old forward kept running).
  PyObject* forward = nullptr;  // strong
  bool forward_in_instance = false;

  ~HookDicts() {
    release();
    Py_XDECREF(module_dict);
    Py_XDECREF(global_dict);
    Py_XDECREF(forward);
  }
  void remember_forward(PyObject* module) {
    PyObject* inst = PyDict_GetItemWithError(module_dict, forward_name());
    forward_in_instance = inst != nullptr;
    PyObject* cur = inst ? inst : _PyType_Lookup(Py_TYPE(module), forward_name());
    PyErr_Clear();
    Py_XINCREF(cur);
    Py_XSETREF(forward, cur);
  }
  bool forward_replaced(PyObject* module) {
    PyObject* inst = PyDict_GetItemWithError(module_dict, forward_name());
    if (inst == nullptr && PyErr_Occurred()) {
      PyErr_Clear();
      return true;
    }
    if (forward_in_instance || inst != nullptr) return inst != forward;
    return _PyType_Lookup(Py_TYPE(module), forward_name()) != forward;
  }
  static PyObject* forward_name() {
    static PyObject* name = PyUnicode_InternFromString("forward");
    return name;
  }
  void release() {
    for (PyObject* d : dicts) Py_DECREF(d);
    dicts.clear();
  }
  // Re-reads the hook dicts from both owners (only when one of them changed).
  void collect() {
    release();
    collect_from(module_dict, "_forward", "_backward");
    collect_from(global_dict, "_global_forward", "_global_backward");
    module_version = dict_version(module_dict);
    global_version = dict_version(global_dict);
  }
  void collect_from(PyObject* owner, const char* p1, const char* p2) {
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (PyDict_Next(owner, &pos, &k, &v)) {
      if (!PyUnicode_Check(k) || !PyDict_Check(v)) continue;
      const char* name = PyUnicode_AsUTF8(k);
      if (!name) {
        PyErr_Clear();
        continue;
      }
      if ((std::strncmp(name, p1, std::strlen(p1)) == 0 ||
           std::strncmp(name, p2, std::strlen(p2)) == 0) &&
          std::strstr(name, "hooks") != nullptr) {
        Py_INCREF(v);
        dicts.push_back(v);
      }
    }
  }
  bool any() {
    if (dict_version(module_dict) != module_version ||
        dict_version(global_dict) != global_version) {
      collect();
    }
    for (PyObject* d : dicts) {
      if (PyDict_GET_SIZE(d) != 0) return true;
    }
    return false;
  }
};

// ---- CompiledFunction -----------------------------------------------------------------------

struct CompiledFunctionObject {
  PyObject_HEAD vectorcallfunc vectorcall;
  PyObject* fn;            // strong, a function
  PyObject* callback;      // strong or NULL
  PyObject* bound_self;    // strong or NULL
  PyObject* hooks_module;  // strong or NULL
  PyObject* dict;          // strong or NULL (__dict__)
  PyObject* weakrefs;
  HookDicts* hooks;  // owned or NULL
};

PyTypeObject* g_compiled_function_type = nullptr;  // strong
PyObject* g_xc_call_name = nullptr;                // strong, interned "_xc_call"

constexpr int kSlowFlags =
    CO_VARARGS | CO_VARKEYWORDS | CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR;
constexpr int kSmallArgs = 16;

// A [bound_self, *args] array when bound_self is set, else args itself.
class Prepended {
 public:
  Prepended(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    if (self == nullptr) {
      data_ = args;
      nargs_ = nargs;
      return;
    }
    Py_ssize_t total = nargs + nkw + 1;
    PyObject** buf = small_;
    if (total > kSmallArgs) {
      big_.resize(total);
      buf = big_.data();
    }
    buf[0] = self;
    for (Py_ssize_t i = 0; i < nargs + nkw; i++) buf[i + 1] = args[i];
    data_ = buf;
    nargs_ = nargs + 1;
  }
  PyObject* const* data() const { return data_; }
  Py_ssize_t nargs() const { return nargs_; }

 private:
  PyObject* small_[kSmallArgs];
  std::vector<PyObject*> big_;
  PyObject* const* data_;
  Py_ssize_t nargs_;
};

// fn(*args, **kw) with the function's callback set. `skip_lookup`: the cache was already
// consulted for this call, so the hook evaluates fn's frame without looking again.
PyObject* call_with_callback(CompiledFunctionObject* self, PyObject* const* args, Py_ssize_t nargs,
                             PyObject* kwnames, bool skip_lookup) {
  CallbackScope scope(self->callback);
  if (skip_lookup) t_state.skip_code_once = PyFunction_GET_CODE(self->fn);
  PyObject* r = PyObject_Vectorcall(self->fn, args, (size_t)nargs, kwnames);
  t_state.skip_code_once = nullptr;
  return r;
}

PyObject* cf_vectorcall(PyObject* self_obj, PyObject* const* args, size_t nargsf,
                        PyObject* kwnames) {
  auto* self = reinterpret_cast<CompiledFunctionObject*>(self_obj);
  const Py_ssize_t nargs_in = PyVectorcall_NARGS(nargsf);
  if (self->fn == nullptr) {  // cleared by the garbage collector
    PyErr_SetString(PyExc_RuntimeError, "CompiledFunction was cleared");
    return nullptr;
  }
  if (g_force_eager) {  // set_stance("force_eager"): the original, nothing compiled or run
    CallbackScope off(nullptr);
    if (self->hooks) return PyObject_Vectorcall(self->hooks_module, args, nargsf, kwnames);
    Prepended all(self->bound_self, args, nargs_in, kwnames);
    return PyObject_Vectorcall(self->fn, all.data(), (size_t)all.nargs(), kwnames);
  }
  if (self->hooks && (self->hooks->any() || self->hooks->forward_replaced(self->hooks_module))) {
    CallbackScope scope(self->callback);
    return PyObject_Vectorcall(self->hooks_module, args, nargsf, kwnames);
  }
  Prepended all(self->bound_self, args, nargs_in, kwnames);
  const Py_ssize_t nargs = all.nargs();
  auto* fn = reinterpret_cast<PyFunctionObject*>(self->fn);
  auto* code = reinterpret_cast<PyCodeObject*>(fn->func_code);
  const int argcount = code->co_argcount;
  const int nbound = argcount + code->co_kwonlyargcount;
  if ((kwnames && PyTuple_GET_SIZE(kwnames)) || (code->co_flags & kSlowFlags) || nargs > argcount ||
      nbound > kSmallArgs) {
    return call_with_callback(self, all.data(), nargs, kwnames, false);
  }

  // Bind: positionals, then positional defaults, then keyword-only defaults (all borrowed; the
  // defaults containers are held for the duration of the call).
  PyObject* bound[kSmallArgs];
  for (Py_ssize_t i = 0; i < nargs; i++) bound[i] = all.data()[i];
  PyObject* defaults = fn->func_defaults;
  PyObject* kwdefaults = fn->func_kwdefaults;
  if (nargs < argcount) {
    Py_ssize_t ndef = defaults ? PyTuple_GET_SIZE(defaults) : 0;
    Py_ssize_t first = argcount - ndef;
    if (nargs < first) return call_with_callback(self, all.data(), nargs, kwnames, false);
    for (Py_ssize_t i = nargs; i < argcount; i++) bound[i] = PyTuple_GET_ITEM(defaults, i - first);
  }
  for (int i = argcount; i < nbound; i++) {
    PyObject* v =
        kwdefaults ? PyDict_GetItemWithError(kwdefaults, code_arg_name(code, i)) : nullptr;
    if (v == nullptr) {
      if (PyErr_Occurred()) return nullptr;
      return call_with_callback(self, all.data(), nargs, kwnames, false);
    }
    bound[i] = v;
  }
  Py_XINCREF(defaults);
  Py_XINCREF(kwdefaults);
  struct Release {
    PyObject* a;
    PyObject* b;
    ~Release() {
      Py_XDECREF(a);
      Py_XDECREF(b);
    }
  } release{defaults, kwdefaults};

  CodeExtra* extra = get_code_extra((PyObject*)code);
  const int state = extra ? extra->state : STATE_NORMAL;
  if (state == STATE_SKIP_ALL) {
    CallbackScope off(nullptr);
    return PyObject_Vectorcall(self->fn, all.data(), (size_t)nargs, nullptr);
  }
  if (state == STATE_SKIP) return call_with_callback(self, all.data(), nargs, nullptr, true);
  FrameView view{bound, nbound, fn->func_globals, fn->func_builtins, fn->func_closure};
  PyObject* out = nullptr;
  if (run_cached(extra, view, self->callback, &out)) return out;
  if (state == STATE_NORMAL && self->callback) {
    if (run_callback(self->callback, code, view, &out)) return out;
  }
  return call_with_callback(self, all.data(), nargs, nullptr, true);
}

int cf_traverse(PyObject* self_obj, visitproc visit, void* arg) {
  auto* self = reinterpret_cast<CompiledFunctionObject*>(self_obj);
  Py_VISIT(Py_TYPE(self_obj));
  Py_VISIT(self->fn);
  Py_VISIT(self->callback);
  Py_VISIT(self->bound_self);
  Py_VISIT(self->hooks_module);
  Py_VISIT(self->dict);
  return 0;
}

int cf_clear(PyObject* self_obj) {
  auto* self = reinterpret_cast<CompiledFunctionObject*>(self_obj);
  Py_CLEAR(self->fn);
  Py_CLEAR(self->callback);
  Py_CLEAR(self->bound_self);
  Py_CLEAR(self->hooks_module);
  Py_CLEAR(self->dict);
  delete self->hooks;
  self->hooks = nullptr;
  return 0;
}

void cf_dealloc(PyObject* self_obj) {
  auto* self = reinterpret_cast<CompiledFunctionObject*>(self_obj);
  PyTypeObject* tp = Py_TYPE(self_obj);
  PyObject_GC_UnTrack(self_obj);
  if (self->weakrefs) PyObject_ClearWeakRefs(self_obj);
  cf_clear(self_obj);
  tp->tp_free(self_obj);
  Py_DECREF(tp);
}

HookDicts* make_hook_dicts(PyObject* module) {
  PyObject* mdict = PyObject_GenericGetDict(module, nullptr);
  if (!mdict) return nullptr;
  PyObject* torch_module = PyImport_ImportModule("torch.nn.modules.module");
  if (!torch_module) {
    Py_DECREF(mdict);
    return nullptr;
  }
  auto* h = new HookDicts();
  h->module_dict = mdict;
  h->global_dict = Py_NewRef(PyModule_GetDict(torch_module));
  Py_DECREF(torch_module);
  h->collect();
  h->remember_forward(module);
  return h;
}

PyObject* cf_new(PyTypeObject* type, PyObject* args, PyObject* kwds) {
  static const char* kwlist[] = {"fn", "callback", "bound_self", "hooks_module", nullptr};
  PyObject *fn, *callback, *bound_self = Py_None, *hooks_module = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO|OO:CompiledFunction", (char**)kwlist, &fn,
                                   &callback, &bound_self, &hooks_module)) {
    return nullptr;
  }
  if (!PyFunction_Check(fn)) {
    PyErr_Format(PyExc_TypeError, "CompiledFunction: fn must be a function, not %.100s",
                 Py_TYPE(fn)->tp_name);
    return nullptr;
  }
  if (callback != Py_None && !PyCallable_Check(callback)) {
    PyErr_SetString(PyExc_TypeError, "CompiledFunction: callback must be callable or None");
    return nullptr;
  }
  HookDicts* hooks = nullptr;
  if (hooks_module != Py_None) {
    hooks = make_hook_dicts(hooks_module);
    if (!hooks) return nullptr;
  }
  auto* self = reinterpret_cast<CompiledFunctionObject*>(type->tp_alloc(type, 0));
  if (!self) {
    delete hooks;
    return nullptr;
  }
  self->vectorcall = cf_vectorcall;
  self->fn = Py_NewRef(fn);
  self->callback = callback == Py_None ? nullptr : Py_NewRef(callback);
  self->bound_self = bound_self == Py_None ? nullptr : Py_NewRef(bound_self);
  self->hooks_module = hooks_module == Py_None ? nullptr : Py_NewRef(hooks_module);
  self->hooks = hooks;
  return reinterpret_cast<PyObject*>(self);
}

PyObject* cf_descr_get(PyObject* self, PyObject* obj, PyObject*) {
  if (obj == nullptr || obj == Py_None) return Py_NewRef(self);
  return PyMethod_New(self, obj);
}

PyObject* cf_repr(PyObject* self_obj) {
  auto* self = reinterpret_cast<CompiledFunctionObject*>(self_obj);
  PyObject* name = self->fn ? PyObject_GetAttrString(self->fn, "__qualname__") : nullptr;
  if (!name) {
    PyErr_Clear();
    name = PyUnicode_FromString("?");
  }
  PyObject* r = PyUnicode_FromFormat("<xcompile.CompiledFunction %U%s at %p>", name,
                                     self->bound_self ? " (bound)" : "", self_obj);
  Py_DECREF(name);
  return r;
}

PyObject* get_or_none(PyObject* o) { return Py_NewRef(o ? o : Py_None); }
PyObject* cf_get_callback(PyObject* s, void*) {
  return get_or_none(reinterpret_cast<CompiledFunctionObject*>(s)->callback);
}
PyObject* cf_get_bound_self(PyObject* s, void*) {
  return get_or_none(reinterpret_cast<CompiledFunctionObject*>(s)->bound_self);
}
PyObject* cf_get_hooks_module(PyObject* s, void*) {
  return get_or_none(reinterpret_cast<CompiledFunctionObject*>(s)->hooks_module);
}

PyMemberDef cf_members[] = {
    {"fn", T_OBJECT, offsetof(CompiledFunctionObject, fn), READONLY, "the wrapped function"},
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(CompiledFunctionObject, vectorcall), READONLY,
     nullptr},
    {"__dictoffset__", T_PYSSIZET, offsetof(CompiledFunctionObject, dict), READONLY, nullptr},
    {"__weaklistoffset__", T_PYSSIZET, offsetof(CompiledFunctionObject, weakrefs), READONLY,
     nullptr},
    {nullptr, 0, 0, 0, nullptr}};

PyGetSetDef cf_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, nullptr, nullptr},
    {"callback", cf_get_callback, nullptr, "the compile callback (None: never compiles)", nullptr},
    {"bound_self", cf_get_bound_self, nullptr, "prepended to every call, or None", nullptr},
    {"hooks_module", cf_get_hooks_module, nullptr, "module whose hooks force eager calls", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyType_Slot cf_slots[] = {
    {Py_tp_new, (void*)cf_new},
    {Py_tp_dealloc, (void*)cf_dealloc},
    {Py_tp_traverse, (void*)cf_traverse},
    {Py_tp_clear, (void*)cf_clear},
    {Py_tp_call, (void*)PyVectorcall_Call},
    {Py_tp_descr_get, (void*)cf_descr_get},
    {Py_tp_repr, (void*)cf_repr},
    {Py_tp_members, cf_members},
    {Py_tp_getset, cf_getset},
    {Py_tp_doc, (void*)"CompiledFunction(fn, callback, bound_self=None, hooks_module=None)"},
    {0, nullptr}};

PyType_Spec cf_spec = {"xcompile._C.CompiledFunction", sizeof(CompiledFunctionObject), 0,
                       Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL |
                           Py_TPFLAGS_METHOD_DESCRIPTOR,
                       cf_slots};

// ---- module_call_trampoline -----------------------------------------------------------------

struct TrampolineObject {
  PyObject_HEAD vectorcallfunc vectorcall;
};

PyObject* tramp_vectorcall(PyObject*, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  const Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  if (nargs < 1) {
    PyErr_SetString(PyExc_TypeError, "module_call_trampoline needs the module as first argument");
    return nullptr;
  }
  PyObject* mod = args[0];
  PyObject* dict = PyObject_GenericGetDict(mod, nullptr);
  if (!dict) return nullptr;
  PyObject* call = PyDict_GetItemWithError(dict, g_xc_call_name);
  Py_XINCREF(call);
  Py_DECREF(dict);
  if (!call) {
    if (!PyErr_Occurred()) {
      PyErr_Format(PyExc_AttributeError, "'%.100s' object has no '_xc_call' in its __dict__",
                   Py_TYPE(mod)->tp_name);
    }
    return nullptr;
  }
  PyObject* r;
  if (Py_TYPE(call) == g_compiled_function_type) {
    r = cf_vectorcall(call, args + 1, (size_t)(nargs - 1), kwnames);
  } else {
    r = PyObject_Vectorcall(call, args + 1, (size_t)(nargs - 1), kwnames);
  }
  Py_DECREF(call);
  return r;
}

PyObject* tramp_descr_get(PyObject* self, PyObject* obj, PyObject*) {
  if (obj == nullptr || obj == Py_None) return Py_NewRef(self);
  return PyMethod_New(self, obj);
}

PyObject* tramp_repr(PyObject*) {
  return PyUnicode_FromString("<xcompile module_call_trampoline>");
}

void tramp_dealloc(PyObject* self) {
  PyTypeObject* tp = Py_TYPE(self);
  tp->tp_free(self);
  Py_DECREF(tp);
}

PyMemberDef tramp_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(TrampolineObject, vectorcall), READONLY, nullptr},
    {nullptr, 0, 0, 0, nullptr}};

PyType_Slot tramp_slots[] = {{Py_tp_dealloc, (void*)tramp_dealloc},
                             {Py_tp_call, (void*)PyVectorcall_Call},
                             {Py_tp_descr_get, (void*)tramp_descr_get},
                             {Py_tp_repr, (void*)tramp_repr},
                             {Py_tp_members, tramp_members},
                             {0, nullptr}};

PyType_Spec tramp_spec = {"xcompile._C.ModuleCallTrampoline", sizeof(TrampolineObject), 0,
                          Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL |
                              Py_TPFLAGS_METHOD_DESCRIPTOR | Py_TPFLAGS_DISALLOW_INSTANTIATION,
                          tramp_slots};

// ---- untraced(fn): fn called with this thread's compile callback unset ---------------------

struct UntracedObject {
  PyObject_HEAD vectorcallfunc vectorcall;
  PyObject* fn;  // strong
};

PyObject* untraced_vectorcall(PyObject* self, PyObject* const* args, size_t nargsf,
                              PyObject* kwnames) {
  CallbackScope no_callback(nullptr);
  return PyObject_Vectorcall(reinterpret_cast<UntracedObject*>(self)->fn, args, nargsf, kwnames);
}

PyObject* untraced_new(PyTypeObject* type, PyObject* args, PyObject* kwds) {
  PyObject* fn;
  if ((kwds && PyDict_GET_SIZE(kwds)) || !PyArg_UnpackTuple(args, "untraced", 1, 1, &fn)) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "untraced(fn) takes one argument");
    return nullptr;
  }
  if (!PyCallable_Check(fn)) {
    PyErr_SetString(PyExc_TypeError, "untraced: expected a callable");
    return nullptr;
  }
  auto* self = reinterpret_cast<UntracedObject*>(type->tp_alloc(type, 0));
  if (!self) return nullptr;
  self->fn = Py_NewRef(fn);
  self->vectorcall = untraced_vectorcall;
  return reinterpret_cast<PyObject*>(self);
}

int untraced_traverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(reinterpret_cast<UntracedObject*>(self)->fn);
  Py_VISIT(Py_TYPE(self));
  return 0;
}

int untraced_clear(PyObject* self) {
  Py_CLEAR(reinterpret_cast<UntracedObject*>(self)->fn);
  return 0;
}

void untraced_dealloc(PyObject* self) {
  PyTypeObject* tp = Py_TYPE(self);
  PyObject_GC_UnTrack(self);
  untraced_clear(self);
  tp->tp_free(self);
  Py_DECREF(tp);
}

PyObject* untraced_repr(PyObject* self) {
  return PyUnicode_FromFormat("<xcompile untraced %R>",
                              reinterpret_cast<UntracedObject*>(self)->fn);
}

PyMemberDef untraced_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(UntracedObject, vectorcall), READONLY, nullptr},
    {"__wrapped__", T_OBJECT, offsetof(UntracedObject, fn), READONLY, nullptr},
    {nullptr, 0, 0, 0, nullptr}};

PyType_Slot untraced_slots[] = {
    {Py_tp_new, (void*)untraced_new},           {Py_tp_dealloc, (void*)untraced_dealloc},
    {Py_tp_traverse, (void*)untraced_traverse}, {Py_tp_clear, (void*)untraced_clear},
    {Py_tp_call, (void*)PyVectorcall_Call},     {Py_tp_repr, (void*)untraced_repr},
    {Py_tp_members, untraced_members},          {0, nullptr}};

PyType_Spec untraced_spec = {"xcompile._C.untraced", sizeof(UntracedObject), 0,
                             Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_HAVE_GC,
                             untraced_slots};

}  // namespace

bool init_compiled_function(PyObject* module) {
  g_xc_call_name = PyUnicode_InternFromString("_xc_call");
  if (!g_xc_call_name) return false;
  g_compiled_function_type = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&cf_spec));
  if (!g_compiled_function_type) return false;
  if (PyModule_AddObjectRef(module, "CompiledFunction", (PyObject*)g_compiled_function_type) < 0) {
    return false;
  }
  auto* tramp_type = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&tramp_spec));
  if (!tramp_type) return false;
  auto* tramp = PyObject_New(TrampolineObject, tramp_type);
  Py_DECREF(tramp_type);  // the instance holds the type
  if (!tramp) return false;
  tramp->vectorcall = tramp_vectorcall;
  int rc = PyModule_AddObjectRef(module, "module_call_trampoline", (PyObject*)tramp);
  Py_DECREF(tramp);
  if (rc < 0) return false;
  auto* untraced_type = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&untraced_spec));
  if (!untraced_type) return false;
  rc = PyModule_AddObjectRef(module, "untraced", (PyObject*)untraced_type);
  Py_DECREF(untraced_type);
  return rc == 0;
}

}  // namespace xc
