// graph_replay.cpp — GraphReplay: recorded-graph replay with its input copies, pointer checks
// and output liveness in C++ (see graph_replay.h).
#include "graph_replay.h"

#include <ATen/Functions.h>
#include <ATen/core/Tensor.h>
#include <c10/core/GradMode.h>
#include <c10/core/StorageImpl.h>
#include <c10/util/intrusive_ptr.h>
#include <structmember.h>
#include <torch/csrc/autograd/python_variable.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace xc {
namespace {

using StoragePtr = c10::intrusive_ptr<c10::StorageImpl>;
using WeakStorage = c10::weak_intrusive_ptr<c10::StorageImpl>;

// One storage of the recorded outputs: the memory every replay writes, and the storage last
// handed out over it (weak: alive only while the caller holds an output).
struct OutStorage {
  StoragePtr owner;  // the recorded output's storage: keeps the memory
  void* ptr;
  size_t nbytes;
  c10::Device device;
  std::optional<WeakStorage> last;
};

struct Recording {
  PyObject* replay = nullptr;              // strong; called with no arguments
  std::vector<at::Tensor> inputs;          // what the recording reads
  std::vector<char> pointer_checked;       // used in place: same data pointer, or record again
  std::vector<const void*> recorded_ptrs;  // the data pointers the recording reads (a static
                                           // input is the caller's tensor: `.data =` moves it)
  std::vector<at::Tensor> outputs;         // undefined where out_group == -1
  std::vector<PyObject*> passthrough;      // strong or NULL: returned as is (out_group == -1)
  std::vector<int> out_group;              // index into storages; -1: passthrough; -2 - j: the
                                           // caller's argument j (or a view of it, as recorded)
  std::vector<OutStorage> storages;
  bool out_list = false;

  ~Recording() {
    Py_XDECREF(replay);
    for (PyObject* o : passthrough) Py_XDECREF(o);
  }
};

enum State { PENDING = 0, RECORDED = 1, EAGER = 2 };

struct GraphReplayObject {
  PyObject_HEAD vectorcallfunc vectorcall;
  PyObject* fn;      // strong: the compiled artifact
  PyObject* record;  // strong: record(self, args) -> (recorded, result)
  PyObject* pool;    // strong: list of GraphReplay in recording order
  Py_ssize_t n_inputs;
  int state;
  int copy_live;                    // held outputs: copied out (1) or made to raise on access (0)
  std::shared_ptr<Recording>* rec;  // owned holder, or NULL; a replay keeps its own copy
  long long replays, copies_in, copy_outs, direct_calls, rerecords;
};

PyTypeObject* g_type = nullptr;  // strong

void deleter(void* ctx) { delete static_cast<StoragePtr*>(ctx); }

// The caller still holds `live`, a storage over `s`'s memory: it gets a copy of that memory.
void copy_out(OutStorage& s, c10::StorageImpl* live) {
  auto opts = at::TensorOptions().dtype(at::kByte).device(s.device);
  at::Tensor fresh = at::empty({static_cast<int64_t>(s.nbytes)}, opts);
  at::Tensor src = at::from_blob(s.ptr, {static_cast<int64_t>(s.nbytes)}, opts);
  fresh.copy_(src);
  c10::DataPtr dp =
      fresh.storage().unsafeGetStorageImpl()->set_data_ptr(c10::DataPtr(nullptr, s.device));
  live->set_data_ptr_noswap(std::move(dp));
}

const char* kOverwritten =
    "Error: accessing tensor output of CUDAGraphs that has been overwritten by a subsequent run. "
    "To prevent overwriting, clone the tensor outside of xcompile.compile() before calling the "
    "compiled function again, or set xcompile.config.cudagraph_live_outputs = \"copy\" (held "
    "outputs are then copied out before a replay).";

// Every held output of `g`'s last replay is copied out (or, copy_live off, made to raise on
// access). Returns how many storages that was.
long long release_live(GraphReplayObject* g) {
  if (g->state != RECORDED || !g->rec) return 0;
  long long n = 0;
  for (OutStorage& s : (*g->rec)->storages) {
    if (!s.last) continue;
    StoragePtr live = s.last->lock();
    s.last.reset();
    if (live && s.nbytes) {
      if (g->copy_live) {
        copy_out(s, live.get());
      } else {
        live->release_data_and_set_meta_custom_data_ptr_error_msg_(std::string(kOverwritten));
      }
      ++n;
    }
  }
  return n;
}

void drop_recording(GraphReplayObject* g) {
  if (!g->rec) return;
  delete g->rec;  // outputs handed out keep their memory through their own storage; a replay in
                  // progress keeps the recording through its own shared_ptr
  g->rec = nullptr;
}

bool same_meta(const at::Tensor& a, const at::Tensor& b) {
  return a.dtype() == b.dtype() && a.device() == b.device() && a.sizes() == b.sizes() &&
         a.strides() == b.strides();
}

PyObject* call_fn(GraphReplayObject* g, PyObject* const* args, Py_ssize_t nargs) {
  ++g->direct_calls;
  return PyObject_Vectorcall(g->fn, args, nargs, nullptr);
}

PyObject* replay(GraphReplayObject* g, PyObject* const* args, Py_ssize_t nargs, bool* rerecord);

PyObject* gr_call(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames);

// The caller's reference may go while the graph runs (a weakref callback dropping its cache
// entry): the call holds its own.
PyObject* gr_vectorcall(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  Py_INCREF(self);
  PyObject* out = gr_call(self, args, nargsf, kwnames);
  Py_DECREF(self);
  return out;
}

PyObject* gr_call(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  auto* g = reinterpret_cast<GraphReplayObject*>(self);
  Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  if (kwnames && PyTuple_GET_SIZE(kwnames)) {
    return PyObject_Vectorcall(g->fn, args, nargsf, kwnames);
  }
  for (int attempt = 0; attempt < 3; ++attempt) {
    if (g->state == EAGER) return call_fn(g, args, nargs);
    if (g->state == PENDING) {
      PyObject* tup = PyTuple_New(nargs);
      if (!tup) return nullptr;
      for (Py_ssize_t i = 0; i < nargs; ++i) PyTuple_SET_ITEM(tup, i, Py_NewRef(args[i]));
      PyObject* r = PyObject_CallFunctionObjArgs(g->record, self, tup, nullptr);
      Py_DECREF(tup);
      if (!r) return nullptr;
      if (!PyTuple_Check(r) || PyTuple_GET_SIZE(r) != 2) {
        Py_DECREF(r);
        PyErr_SetString(PyExc_TypeError, "GraphReplay: record() must return (recorded, result)");
        return nullptr;
      }
      int recorded = PyObject_IsTrue(PyTuple_GET_ITEM(r, 0));
      if (recorded <= 0) {
        PyObject* out = recorded < 0 ? nullptr : Py_NewRef(PyTuple_GET_ITEM(r, 1));
        Py_DECREF(r);
        return out;
      }
      Py_DECREF(r);
      if (g->state != RECORDED || !g->rec) {
        PyErr_SetString(PyExc_RuntimeError, "GraphReplay: record() said recorded but set nothing");
        return nullptr;
      }
    }
    bool rerecord = false;
    PyObject* out = replay(g, args, nargs, &rerecord);
    if (!rerecord) return out;
    ++g->rerecords;  // a static input moved: record again (record() decides whether to)
    drop_recording(g);
    g->state = PENDING;
  }
  return call_fn(g, args, nargs);
}

PyObject* replay(GraphReplayObject* g, PyObject* const* args, Py_ssize_t nargs, bool* rerecord) {
  std::shared_ptr<Recording> keep = *g->rec;  // the replay may run Python that drops it
  Recording& rec = *keep;
  if (nargs != static_cast<Py_ssize_t>(rec.inputs.size())) return call_fn(g, args, nargs);
  try {
    c10::AutoGradMode no_grad(false);
    // checks first: nothing is written unless the whole call replays
    for (Py_ssize_t i = 0; i < nargs; ++i) {
      if (!THPVariable_Check(args[i])) return call_fn(g, args, nargs);
      const at::Tensor& t = THPVariable_Unpack(args[i]);
      const at::Tensor& s = rec.inputs[i];
      if (rec.pointer_checked[i]) {
        if (t.data_ptr() != rec.recorded_ptrs[i] || !same_meta(t, s)) {
          *rerecord = true;
          return nullptr;
        }
      } else if (!same_meta(t, s)) {
        return call_fn(g, args, nargs);
      }
    }
    for (Py_ssize_t i = 0; i < nargs; ++i) {
      if (rec.pointer_checked[i]) continue;
      const at::Tensor& t = THPVariable_Unpack(args[i]);
      at::Tensor& s = rec.inputs[i];
      if (t.data_ptr() == s.data_ptr()) continue;
      s.copy_(t);
      ++g->copies_in;
    }
    // held outputs: this graph's, and those of graphs recorded after it in the pool
    g->copy_outs += release_live(g);
    if (PyList_Check(g->pool)) {
      Py_ssize_t n = PyList_GET_SIZE(g->pool);
      Py_ssize_t k = 0;
      while (k < n && PyList_GET_ITEM(g->pool, k) != reinterpret_cast<PyObject*>(g)) ++k;
      for (++k; k < n; ++k) {
        PyObject* other = PyList_GET_ITEM(g->pool, k);
        if (Py_TYPE(other) != g_type) continue;
        auto* o = reinterpret_cast<GraphReplayObject*>(other);
        o->copy_outs += release_live(o);
      }
    }
    // an input used in place that was itself such a held output has just moved (in error mode,
    // lost its memory: reading it raises the overwritten-output error): the recording would
    // read the old place
    for (Py_ssize_t i = 0; i < nargs; ++i) {
      if (rec.pointer_checked[i] &&
          THPVariable_Unpack(args[i]).data_ptr() != rec.recorded_ptrs[i]) {
        *rerecord = true;
        return nullptr;
      }
    }
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
  PyObject* r = PyObject_CallNoArgs(rec.replay);
  if (!r) return nullptr;
  Py_DECREF(r);
  ++g->replays;
  size_t n_out = rec.out_group.size();
  PyObject* out = rec.out_list ? PyList_New(n_out) : PyTuple_New(n_out);
  if (!out) return nullptr;
  try {
    std::vector<StoragePtr> fresh(rec.storages.size());
    for (size_t k = 0; k < rec.storages.size(); ++k) {
      OutStorage& s = rec.storages[k];
      c10::DataPtr dp(s.ptr, new StoragePtr(s.owner), &deleter, s.device);
      fresh[k] = c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(),
                                                       static_cast<int64_t>(s.nbytes),
                                                       std::move(dp), nullptr, false);
      s.last.emplace(fresh[k]);
    }
    for (size_t i = 0; i < n_out; ++i) {
      PyObject* item;
      int grp = rec.out_group[i];
      if (grp == -1) {
        item = Py_NewRef(rec.passthrough[i] ? rec.passthrough[i] : Py_None);
      } else if (grp < -1) {
        Py_ssize_t j = -2 - grp;  // checked against nargs in _set_recording's callers' calls
        const at::Tensor& a = THPVariable_Unpack(args[j]);
        const at::Tensor& so = rec.outputs[i];
        int64_t offset = a.storage_offset() + so.storage_offset() - rec.inputs[j].storage_offset();
        // the recording returned its input itself: the caller's tensor; else (``x.detach()``,
        // an alias of the same geometry included) a new view of it, as eager makes
        if (so.is_same(rec.inputs[j]) && so.sizes() == a.sizes() && so.strides() == a.strides() &&
            offset == a.storage_offset()) {
          item = Py_NewRef(args[j]);
        } else {
          item = THPVariable_Wrap(a.as_strided(so.sizes(), so.strides(), offset));
        }
      } else {
        const at::Tensor& so = rec.outputs[i];
        at::Tensor t = at::detail::make_tensor<c10::TensorImpl>(
            c10::Storage(fresh[grp]), so.options().computeDispatchKey(), so.dtype());
        t.unsafeGetTensorImpl()->set_sizes_and_strides(so.sizes(), so.strides(),
                                                       so.storage_offset());
        item = THPVariable_Wrap(std::move(t));
        if (!item) {
          Py_DECREF(out);
          return nullptr;
        }
      }
      if (rec.out_list) {
        PyList_SET_ITEM(out, i, item);
      } else {
        PyTuple_SET_ITEM(out, i, item);
      }
    }
  } catch (const std::exception& e) {
    Py_DECREF(out);
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
  return out;
}

// ---- construction and the Python-side methods -------------------------------------------

PyObject* gr_new(PyTypeObject* type, PyObject* args, PyObject* kwds) {
  static const char* kw[] = {"fn", "record", "n_inputs", "pool", "copy_live", nullptr};
  PyObject *fn, *record, *pool;
  Py_ssize_t n_inputs;
  int copy_live = 1;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOnO|p:GraphReplay", const_cast<char**>(kw), &fn,
                                   &record, &n_inputs, &pool, &copy_live)) {
    return nullptr;
  }
  if (!PyCallable_Check(fn) || !PyCallable_Check(record) || !PyList_Check(pool)) {
    PyErr_SetString(PyExc_TypeError,
                    "GraphReplay(fn, record, n_inputs, pool): two callables and a list");
    return nullptr;
  }
  auto* self = reinterpret_cast<GraphReplayObject*>(type->tp_alloc(type, 0));
  if (!self) return nullptr;
  self->vectorcall = gr_vectorcall;
  self->fn = Py_NewRef(fn);
  self->record = Py_NewRef(record);
  self->pool = Py_NewRef(pool);
  self->n_inputs = n_inputs;
  self->state = PENDING;
  self->copy_live = copy_live;
  self->rec = nullptr;
  return reinterpret_cast<PyObject*>(self);
}

bool tensor_list(PyObject* seq, std::vector<at::Tensor>* out, bool allow_none, const char* what) {
  PyObject* fast = PySequence_Fast(seq, what);
  if (!fast) return false;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* o = PySequence_Fast_GET_ITEM(fast, i);
    if (THPVariable_Check(o)) {
      out->push_back(THPVariable_Unpack(o));
    } else if (allow_none) {
      out->emplace_back();
    } else {
      Py_DECREF(fast);
      PyErr_Format(PyExc_TypeError, "%s: item %zd is not a tensor", what, i);
      return false;
    }
  }
  Py_DECREF(fast);
  return true;
}

// _set_recording(replay, inputs, pointer_checked, outputs, out_groups, out_list)
//   outputs[i] for out_groups[i] >= 0 is a tensor over the recorded memory; any other output is
//   returned as is. Outputs in one group share a storage (views of one another).
PyObject* gr_set_recording(PyObject* self, PyObject* args) {
  auto* g = reinterpret_cast<GraphReplayObject*>(self);
  PyObject *replay_fn, *inputs, *checked, *outputs, *groups;
  int out_list;
  if (!PyArg_ParseTuple(args, "OOOOOp:_set_recording", &replay_fn, &inputs, &checked, &outputs,
                        &groups, &out_list)) {
    return nullptr;
  }
  auto rec = std::make_unique<Recording>();
  rec->out_list = out_list;
  if (!PyCallable_Check(replay_fn)) {
    PyErr_SetString(PyExc_TypeError, "_set_recording: replay must be callable");
    return nullptr;
  }
  rec->replay = Py_NewRef(replay_fn);
  if (!tensor_list(inputs, &rec->inputs, false, "_set_recording inputs")) return nullptr;
  PyObject* fc = PySequence_Fast(checked, "pointer_checked");
  PyObject* fo = PySequence_Fast(outputs, "outputs");
  PyObject* fg = PySequence_Fast(groups, "out_groups");
  auto done = [&](bool ok) {
    Py_XDECREF(fc);
    Py_XDECREF(fo);
    Py_XDECREF(fg);
    return ok;
  };
  if (!fc || !fo || !fg) return done(false), nullptr;
  Py_ssize_t n_in = static_cast<Py_ssize_t>(rec->inputs.size());
  Py_ssize_t n_out = PySequence_Fast_GET_SIZE(fo);
  if (PySequence_Fast_GET_SIZE(fc) != n_in || PySequence_Fast_GET_SIZE(fg) != n_out) {
    PyErr_SetString(PyExc_ValueError, "_set_recording: lengths differ");
    return done(false), nullptr;
  }
  for (Py_ssize_t i = 0; i < n_in; ++i) {
    int b = PyObject_IsTrue(PySequence_Fast_GET_ITEM(fc, i));
    if (b < 0) return done(false), nullptr;
    rec->pointer_checked.push_back(static_cast<char>(b));
    rec->recorded_ptrs.push_back(rec->inputs[i].data_ptr());
  }
  for (Py_ssize_t i = 0; i < n_out; ++i) {
    PyObject* o = PySequence_Fast_GET_ITEM(fo, i);
    long grp = PyLong_AsLong(PySequence_Fast_GET_ITEM(fg, i));
    if (grp == -1 && PyErr_Occurred()) return done(false), nullptr;
    rec->out_group.push_back(static_cast<int>(grp));
    if (grp < -1) {
      if (-2 - grp >= n_in || !THPVariable_Check(o)) {
        PyErr_Format(PyExc_ValueError, "_set_recording: output %zd names no input", i);
        return done(false), nullptr;
      }
      rec->outputs.push_back(THPVariable_Unpack(o));
      rec->passthrough.push_back(nullptr);
      continue;
    }
    if (grp < 0) {
      rec->outputs.emplace_back();
      rec->passthrough.push_back(Py_NewRef(o));
      continue;
    }
    if (!THPVariable_Check(o)) {
      PyErr_Format(PyExc_TypeError, "_set_recording: output %zd is not a tensor", i);
      return done(false), nullptr;
    }
    const at::Tensor& t = THPVariable_Unpack(o);
    rec->outputs.push_back(t);
    rec->passthrough.push_back(nullptr);
    if (static_cast<size_t>(grp) >= rec->storages.size())
      rec->storages.resize(
          grp + 1, OutStorage{StoragePtr(), nullptr, 0, c10::Device(c10::kCPU), std::nullopt});
    OutStorage& s = rec->storages[grp];
    c10::StorageImpl* impl = t.storage().unsafeGetStorageImpl();
    if (!s.owner) {
      s.owner = c10::intrusive_ptr<c10::StorageImpl>::reclaim_copy(impl);
      s.ptr = impl->mutable_data();
      s.nbytes = impl->nbytes();
      s.device = t.device();
    } else if (s.owner.get() != impl) {
      PyErr_Format(PyExc_ValueError, "_set_recording: output %zd is not in storage group %ld", i,
                   grp);
      return done(false), nullptr;
    }
  }
  for (const OutStorage& s : rec->storages) {
    if (!s.owner) {
      PyErr_SetString(PyExc_ValueError, "_set_recording: an empty storage group");
      return done(false), nullptr;
    }
  }
  done(true);
  drop_recording(g);
  g->rec = new std::shared_ptr<Recording>(std::move(rec));
  g->state = RECORDED;
  Py_RETURN_NONE;
}

PyObject* gr_fallback(PyObject* self, PyObject*) {
  auto* g = reinterpret_cast<GraphReplayObject*>(self);
  drop_recording(g);
  g->state = EAGER;
  Py_RETURN_NONE;
}

PyObject* gr_drop(PyObject* self, PyObject*) {
  auto* g = reinterpret_cast<GraphReplayObject*>(self);
  drop_recording(g);
  if (g->state == RECORDED) g->state = PENDING;
  Py_RETURN_NONE;
}

PyObject* gr_stats(PyObject* self, void*) {
  auto* g = reinterpret_cast<GraphReplayObject*>(self);
  static const char* names[] = {"pending", "recorded", "eager"};
  return Py_BuildValue("{s:s,s:L,s:L,s:L,s:L,s:L}", "state", names[g->state], "replays", g->replays,
                       "copies_in", g->copies_in, "released_outputs", g->copy_outs, "direct_calls",
                       g->direct_calls, "rerecords", g->rerecords);
}

int gr_traverse(PyObject* self, visitproc visit, void* arg) {
  auto* g = reinterpret_cast<GraphReplayObject*>(self);
  Py_VISIT(g->fn);
  Py_VISIT(g->record);
  Py_VISIT(g->pool);
  if (g->rec) {
    Py_VISIT((*g->rec)->replay);
    for (PyObject* o : (*g->rec)->passthrough) Py_VISIT(o);
  }
  Py_VISIT(Py_TYPE(self));
  return 0;
}

int gr_clear(PyObject* self) {
  auto* g = reinterpret_cast<GraphReplayObject*>(self);
  Py_CLEAR(g->fn);
  Py_CLEAR(g->record);
  Py_CLEAR(g->pool);
  drop_recording(g);
  return 0;
}

void gr_dealloc(PyObject* self) {
  PyTypeObject* tp = Py_TYPE(self);
  PyObject_GC_UnTrack(self);
  gr_clear(self);
  tp->tp_free(self);
  Py_DECREF(tp);
}

PyObject* gr_repr(PyObject* self) {
  auto* g = reinterpret_cast<GraphReplayObject*>(self);
  static const char* names[] = {"pending", "recorded", "eager"};
  return PyUnicode_FromFormat("<xcompile GraphReplay %s of %R>", names[g->state], g->fn);
}

// unowned(t): a tensor over t's memory (its sizes and strides) that does not keep it alive: what
// a recording reads an in-place input through (it replays only when the caller's tensor is at
// that address, so the memory is alive then; holding t would keep the storage of an output of
// an earlier replay alive and make every replay copy it out).
PyObject* gr_unowned(PyObject*, PyObject* arg) {
  if (!THPVariable_Check(arg)) {
    PyErr_SetString(PyExc_TypeError, "GraphReplay.unowned expects a tensor");
    return nullptr;
  }
  try {
    const at::Tensor& t = THPVariable_Unpack(arg);
    return THPVariable_Wrap(at::from_blob(t.data_ptr(), t.sizes(), t.strides(), t.options()));
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
}

PyMethodDef gr_methods[] = {
    {"unowned", gr_unowned, METH_O | METH_STATIC, "a tensor over t's memory that does not own it"},
    {"_set_recording", gr_set_recording, METH_VARARGS,
     "_set_recording(replay, inputs, pointer_checked, outputs, out_groups, out_list)"},
    {"_fallback", gr_fallback, METH_NOARGS, "run fn from now on"},
    {"_drop_recording", gr_drop, METH_NOARGS, "forget the recording (the next call records)"},
    {nullptr, nullptr, 0, nullptr}};

PyGetSetDef gr_getset[] = {{"stats", gr_stats, nullptr, "state and counters", nullptr},
                           {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyMemberDef gr_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(GraphReplayObject, vectorcall), READONLY,
     nullptr},
    {"__wrapped__", T_OBJECT, offsetof(GraphReplayObject, fn), READONLY, nullptr},
    {"pool", T_OBJECT, offsetof(GraphReplayObject, pool), READONLY, nullptr},
    {"recorder", T_OBJECT, offsetof(GraphReplayObject, record), READONLY, nullptr},
    {"n_inputs", T_PYSSIZET, offsetof(GraphReplayObject, n_inputs), READONLY, nullptr},
    {nullptr, 0, 0, 0, nullptr}};

PyType_Slot gr_slots[] = {{Py_tp_new, (void*)gr_new},
                          {Py_tp_dealloc, (void*)gr_dealloc},
                          {Py_tp_traverse, (void*)gr_traverse},
                          {Py_tp_clear, (void*)gr_clear},
                          {Py_tp_call, (void*)PyVectorcall_Call},
                          {Py_tp_repr, (void*)gr_repr},
                          {Py_tp_methods, gr_methods},
                          {Py_tp_getset, gr_getset},
                          {Py_tp_members, gr_members},
                          {0, nullptr}};

PyType_Spec gr_spec = {"xcompile._C_graphs.GraphReplay", sizeof(GraphReplayObject), 0,
                       Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_HAVE_GC,
                       gr_slots};

}  // namespace

bool init_graph_replay(PyObject* module) {
  g_type = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&gr_spec));
  if (!g_type) return false;
  return PyModule_AddObjectRef(module, "GraphReplay", reinterpret_cast<PyObject*>(g_type)) == 0;
}

}  // namespace xc
