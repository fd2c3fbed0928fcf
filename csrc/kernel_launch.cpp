// kernel_launch.cpp — KernelLauncher: the call of one generated C++ kernel from the wrapper.
//
// A kernel wrapper (kernels/wrapper.py) calls each C++ kernel once per call of the graph, with
// one pointer per buffer it reads or writes: an optimizer step's kernels take hundreds. Through
// ctypes that was a `t.data_ptr()` call and a c_void_p conversion per pointer. A launcher takes
// the tensors themselves and reads each data pointer in C (torch's stable shim), then calls the
// kernel's packed entry with the GIL released (as ctypes did: other threads run meanwhile):
//
//   k = KernelLauncher(address, n_ptrs, n_sizes, keep)
//       address: of `int64_t kernel_packed(void* const* ptrs, const int64_t* sizes)`, the
//       generated kernel's entry that takes its pointers and sizes as two arrays; keep: the
//       loaded library (held: the code must not be unloaded while k lives)
//   k(t0, ..., t{n_ptrs-1}, s0, ..., s{n_sizes-1})
//       None when the kernel returns 0, else its error code (an index-check site)
//
// Every pointer argument is a torch.Tensor or an int, an address (a buffer the wrapper placed in
// one allocation of its own, kernels/plan.py's arena); anything else is a TypeError. Sizes are
// Python ints.
// A launcher accepts attributes (its __dict__): the warm cache records how to load it again.
#include "kernel_launch.h"

#include <structmember.h>

#include <cstdint>
#include <vector>

#include "torch_compat.h"

extern "C" AOTITorchError aoti_torch_get_data_ptr(AtenTensorHandle tensor, void** ret_data_ptr);

namespace xc {

namespace {

using PackedKernel = int64_t (*)(void* const*, const int64_t*);

struct LauncherObject {
  PyObject_HEAD vectorcallfunc vectorcall;
  PackedKernel fn;
  Py_ssize_t n_ptrs;
  Py_ssize_t n_sizes;
  PyObject* keep;  // strong
  PyObject* dict;  // strong or NULL
};

constexpr Py_ssize_t kStack = 64;

PyObject* kl_vectorcall(PyObject* self_obj, PyObject* const* args, size_t nargsf,
                        PyObject* kwnames) {
  auto* self = reinterpret_cast<LauncherObject*>(self_obj);
  const Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  if ((kwnames != nullptr && PyTuple_GET_SIZE(kwnames) != 0) ||
      nargs != self->n_ptrs + self->n_sizes) {
    PyErr_Format(PyExc_TypeError,
                 "KernelLauncher: expected %zd tensors and %zd sizes, got %zd arguments",
                 self->n_ptrs, self->n_sizes, nargs);
    return nullptr;
  }
  void* ptr_stack[kStack];
  int64_t size_stack[kStack];
  std::vector<void*> ptr_heap;
  std::vector<int64_t> size_heap;
  void** ptrs = ptr_stack;
  int64_t* sizes = size_stack;
  if (self->n_ptrs > kStack) {
    ptr_heap.resize(static_cast<size_t>(self->n_ptrs));
    ptrs = ptr_heap.data();
  }
  if (self->n_sizes > kStack) {
    size_heap.resize(static_cast<size_t>(self->n_sizes));
    sizes = size_heap.data();
  }
  for (Py_ssize_t i = 0; i < self->n_ptrs; i++) {
    PyObject* t = args[i];
    if (PyLong_CheckExact(t)) {  // an address (a buffer in the wrapper's arena)
      ptrs[i] = PyLong_AsVoidPtr(t);
      if (ptrs[i] == nullptr && PyErr_Occurred()) return nullptr;
      continue;
    }
    if (!tc::is_tensor(t)) {
      PyErr_Format(PyExc_TypeError, "KernelLauncher: argument %zd is a %s, not a tensor", i,
                   Py_TYPE(t)->tp_name);
      return nullptr;
    }
    if (aoti_torch_get_data_ptr(tc::handle(t), &ptrs[i]) != 0) {
      PyErr_Format(PyExc_RuntimeError, "KernelLauncher: no data pointer for argument %zd", i);
      return nullptr;
    }
  }
  for (Py_ssize_t i = 0; i < self->n_sizes; i++) {
    long long v = PyLong_AsLongLong(args[self->n_ptrs + i]);
    if (v == -1 && PyErr_Occurred()) return nullptr;
    sizes[i] = static_cast<int64_t>(v);
  }
  int64_t code;
  Py_BEGIN_ALLOW_THREADS code = self->fn(ptrs, sizes);
  Py_END_ALLOW_THREADS if (code == 0) Py_RETURN_NONE;
  return PyLong_FromLongLong(static_cast<long long>(code));
}

PyObject* kl_new(PyTypeObject* type, PyObject* args, PyObject* kwds) {
  PyObject* address = nullptr;
  Py_ssize_t n_ptrs = 0, n_sizes = 0;
  PyObject* keep = nullptr;
  static const char* kwlist[] = {"address", "n_ptrs", "n_sizes", "keep", nullptr};
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "OnnO", const_cast<char**>(kwlist), &address,
                                   &n_ptrs, &n_sizes, &keep)) {
    return nullptr;
  }
  void* fn = PyLong_AsVoidPtr(address);
  if (fn == nullptr) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "KernelLauncher: null address");
    return nullptr;
  }
  if (n_ptrs < 0 || n_sizes < 0) {
    PyErr_SetString(PyExc_ValueError, "KernelLauncher: negative argument count");
    return nullptr;
  }
  auto* self = reinterpret_cast<LauncherObject*>(type->tp_alloc(type, 0));
  if (self == nullptr) return nullptr;
  self->vectorcall = kl_vectorcall;
  self->fn = reinterpret_cast<PackedKernel>(fn);
  self->n_ptrs = n_ptrs;
  self->n_sizes = n_sizes;
  self->keep = Py_NewRef(keep);
  self->dict = nullptr;
  return reinterpret_cast<PyObject*>(self);
}

int kl_traverse(PyObject* self_obj, visitproc visit, void* arg) {
  auto* self = reinterpret_cast<LauncherObject*>(self_obj);
  Py_VISIT(self->keep);
  Py_VISIT(self->dict);
  Py_VISIT(Py_TYPE(self_obj));
  return 0;
}

int kl_clear(PyObject* self_obj) {
  auto* self = reinterpret_cast<LauncherObject*>(self_obj);
  Py_CLEAR(self->dict);
  return 0;  // (keep stays until dealloc: the code must outlive any call in flight)
}

void kl_dealloc(PyObject* self_obj) {
  PyTypeObject* tp = Py_TYPE(self_obj);
  PyObject_GC_UnTrack(self_obj);
  kl_clear(self_obj);
  Py_CLEAR(reinterpret_cast<LauncherObject*>(self_obj)->keep);
  tp->tp_free(self_obj);
  Py_DECREF(tp);
}

PyObject* kl_repr(PyObject* self_obj) {
  auto* self = reinterpret_cast<LauncherObject*>(self_obj);
  return PyUnicode_FromFormat("<KernelLauncher of %zd tensors and %zd sizes>", self->n_ptrs,
                              self->n_sizes);
}

PyMemberDef kl_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(LauncherObject, vectorcall), READONLY, nullptr},
    {"__dictoffset__", T_PYSSIZET, offsetof(LauncherObject, dict), READONLY, nullptr},
    {"n_ptrs", T_PYSSIZET, offsetof(LauncherObject, n_ptrs), READONLY, "tensors per call"},
    {"n_sizes", T_PYSSIZET, offsetof(LauncherObject, n_sizes), READONLY, "sizes per call"},
    {nullptr, 0, 0, 0, nullptr}};

PyGetSetDef kl_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, nullptr, nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyType_Slot kl_slots[] = {{Py_tp_new, (void*)kl_new},
                          {Py_tp_dealloc, (void*)kl_dealloc},
                          {Py_tp_traverse, (void*)kl_traverse},
                          {Py_tp_clear, (void*)kl_clear},
                          {Py_tp_call, (void*)PyVectorcall_Call},
                          {Py_tp_repr, (void*)kl_repr},
                          {Py_tp_members, kl_members},
                          {Py_tp_getset, kl_getset},
                          {0, nullptr}};

PyType_Spec kl_spec = {"xcompile._C.KernelLauncher", sizeof(LauncherObject), 0,
                       Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
                       kl_slots};

}  // namespace

bool init_kernel_launch(PyObject* module) {
  PyObject* type = PyType_FromSpec(&kl_spec);
  if (type == nullptr) return false;
  int rc = PyModule_AddObjectRef(module, "KernelLauncher", type);
  Py_DECREF(type);
  return rc == 0;
}

}  // namespace xc
