// torch_compat.cpp — the torch functions xcompile._C calls, declared here one by one (see
// torch_compat.h). Each declaration below is the same in torch 2.11, 2.12, 2.13 and 2.14's
// headers and each symbol is exported by libc10 / libtorch_cpu / libtorch_python of all four;
// no torch header is included, so nothing inline of one torch's headers (a field offset, an enum
// value) is compiled into _C. Return types are declared only as far as the calling convention
// needs (an enum class of the same underlying type; a reference).
#include "torch_compat.h"

#include <pybind11/pybind11.h>

#include <memory>

// ---- torch's exported C++ functions and data ----------------------------------------------
namespace c10 {
enum class ScalarType : int8_t;
enum class DeviceType : int8_t;
namespace impl {
struct PyInterpreter;
// c10/core/impl/LocalDispatchKeySet.h: the thread-local include/exclude sets, each stored as
// `set ^ default set`.
struct PODLocalDispatchKeySet {
  uint64_t included_;
  uint64_t excluded_;
};
extern thread_local PODLocalDispatchKeySet raw_local_dispatch_key_set;
struct TorchDispatchModeTLS {
  static int64_t stack_len();
};
}  // namespace impl
struct SafePyObject {
  PyObject* ptr(const impl::PyInterpreter* interpreter) const;
};
struct InferenceMode {
  static bool is_enabled();
};
ScalarType get_default_dtype_as_scalartype();
struct TensorImpl {
  bool requires_grad() const;
};
}  // namespace c10

namespace at {
struct Context {
  bool deterministicAlgorithms() const;
  bool deterministicFillUninitializedMemory() const;
};
Context& globalContext();
namespace autocast {
bool is_autocast_enabled(c10::DeviceType device_type);
c10::ScalarType get_autocast_dtype(c10::DeviceType device_type);
}  // namespace autocast
namespace impl {
enum TorchFunctionDisabledState { ENABLED, SUBCLASSES_DISABLED, ALL_DISABLED };
struct PythonTorchFunctionTLS {
  static int64_t stack_len();
  static TorchFunctionDisabledState get_disabled_state();
  static const std::shared_ptr<c10::SafePyObject>& get_stack_at(int64_t idx);
};
}  // namespace impl
}  // namespace at

c10::impl::PyInterpreter* getPyInterpreter();  // torch/csrc/PyInterpreter.h
extern PyObject* THPVariableClass;             // torch/csrc/autograd/python_variable.h
extern PyObject* ParameterClass;

namespace xc::tc {

Layout g_layout;

bool is_tensor(PyObject* obj) {
  if (THPVariableClass == nullptr) return false;
  PyTypeObject* tp = Py_TYPE(obj);
  if (tp == reinterpret_cast<PyTypeObject*>(THPVariableClass) ||
      tp == reinterpret_cast<PyTypeObject*>(ParameterClass)) {
    return true;
  }
  int r = PyObject_IsInstance(obj, THPVariableClass);
  if (r < 0) PyErr_Clear();
  return r == 1;
}

void tls_dispatch_keys(uint64_t* included, uint64_t* excluded) {
  const c10::impl::PODLocalDispatchKeySet& raw = c10::impl::raw_local_dispatch_key_set;
  *included = raw.included_ ^ g_layout.tls_default_included;
  *excluded = raw.excluded_ ^ g_layout.tls_default_excluded;
}

bool requires_grad(const char* tensor_impl) {
  return reinterpret_cast<const c10::TensorImpl*>(tensor_impl)->requires_grad();
}

bool inference_enabled() { return c10::InferenceMode::is_enabled(); }
int64_t dispatch_mode_stack_len() { return c10::impl::TorchDispatchModeTLS::stack_len(); }
int default_dtype() { return static_cast<int>(c10::get_default_dtype_as_scalartype()); }
bool deterministic_algorithms() { return at::globalContext().deterministicAlgorithms(); }
bool deterministic_fill_uninitialized_memory() {
  return at::globalContext().deterministicFillUninitializedMemory();
}
bool autocast_enabled(int device_type) {
  return at::autocast::is_autocast_enabled(static_cast<c10::DeviceType>(device_type));
}
int autocast_dtype(int device_type) {
  return static_cast<int>(
      at::autocast::get_autocast_dtype(static_cast<c10::DeviceType>(device_type)));
}
int64_t torch_function_stack_len() { return at::impl::PythonTorchFunctionTLS::stack_len(); }
int torch_function_disabled_state() {
  return static_cast<int>(at::impl::PythonTorchFunctionTLS::get_disabled_state());
}
PyObject* torch_function_mode_at(int64_t i) {
  return at::impl::PythonTorchFunctionTLS::get_stack_at(i)->ptr(getPyInterpreter());
}

}  // namespace xc::tc

namespace xc {

namespace py = pybind11;

// _C._abi_*: what _torch_compat.init_c_abi sets and checks at import (not for other callers).
void init_torch_compat(py::module_& m) {
  m.def(
      "_abi_tls_raw",
      []() {
        const c10::impl::PODLocalDispatchKeySet& raw = c10::impl::raw_local_dispatch_key_set;
        return py::make_tuple(raw.included_, raw.excluded_);
      },
      "This thread's raw local dispatch key sets (included, excluded), as torch stores them.");
  m.def(
      "_abi_configure",
      [](size_t impl_key_set, size_t impl_storage, size_t storage_nbytes, size_t impl_sizes_strides,
         size_t impl_dtype_device, size_t impl_autograd_meta, uint64_t dtype_device_mask,
         uint64_t policy_mask, uint64_t default_included, uint64_t default_excluded,
         uint64_t backend_mask) {
        tc::g_layout =
            tc::Layout{impl_key_set,      impl_storage,       storage_nbytes,    impl_sizes_strides,
                       impl_dtype_device, impl_autograd_meta, dtype_device_mask, policy_mask,
                       default_included,  default_excluded,   backend_mask,      true};
      },
      "Where this torch keeps what _C reads (_torch_compat.init_c_abi).");
  m.def(
      "_abi_impl",
      [](py::handle t) -> uintptr_t {
        if (!tc::is_tensor(t.ptr())) throw py::type_error("_abi_impl: not a tensor");
        return reinterpret_cast<uintptr_t>(tc::impl(t.ptr()));
      },
      "The TensorImpl* _C reads off a tensor (nothing read through it).");
  m.def(
      "_abi_read",
      [](py::handle t) -> py::object {
        if (!tc::g_layout.ready) throw std::runtime_error("_abi_read: _abi_configure first");
        if (!tc::is_tensor(t.ptr())) throw py::type_error("_abi_read: not a tensor");
        const char* impl = tc::impl(t.ptr());
        uint64_t inc, exc;
        tc::tls_dispatch_keys(&inc, &exc);
        const void* st = tc::storage(impl);
        py::object nbytes = py::none();
        if (st) nbytes = py::int_(tc::storage_nbytes(st));
        return py::make_tuple(reinterpret_cast<uintptr_t>(impl), reinterpret_cast<uintptr_t>(st),
                              nbytes,
                              *reinterpret_cast<const uint64_t*>(impl + tc::g_layout.impl_key_set),
                              tc::effective_keys(impl, inc, exc), tc::requires_grad(impl),
                              tc::requires_grad_fast(impl));
      },
      "(TensorImpl*, StorageImpl*, storage nbytes, key set, effective key set, requires_grad, "
      "requires_grad read fast) as _C reads them.");
  m.def(
      "_abi_fast",
      [](py::handle t) -> py::object {
        if (!tc::g_layout.ready) throw std::runtime_error("_abi_fast: _abi_configure first");
        if (!tc::is_tensor(t.ptr())) throw py::type_error("_abi_fast: not a tensor");
        const char* impl = tc::impl(t.ptr());
        uint64_t word = tc::dtype_device_word(impl);
        py::object dims = py::none();
        if (tc::default_policy(word)) {
          int64_t n = 0;
          const int64_t* st = nullptr;
          const int64_t* p = tc::sizes_strides(impl, &n, &st);
          py::tuple sizes(n), strides(n);
          for (int64_t i = 0; i < n; ++i) {
            sizes[i] = py::int_(p[i]);
            strides[i] = py::int_(st[i]);
          }
          dims = py::make_tuple(sizes, strides);
        }
        return py::make_tuple(word & tc::g_layout.dtype_device_mask,
                              (word & tc::g_layout.policy_mask) != 0, dims);
      },
      "(dtype and device bytes, custom policy, (sizes, strides) or None) as the tensor-match "
      "guard's fast path reads them (only after _abi_read's key set was found right: a wrong "
      "layout may point it anywhere).");
}

}  // namespace xc
