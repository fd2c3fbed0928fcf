// torch_compat.h — the one C++ header that knows torch (issue #30, step 2: one _C for torch 2.11
// to 2.14). No torch header is included by xcompile._C: what it reads from torch goes through
// the functions and the few layout facts below, and each of them is one of
//   - a C function of torch's stable shim (`aoti_torch_*`, torch/csrc/inductor/aoti_torch/c/
//     shim.h: the C ABI AOTInductor's compiled models rely on across torch versions);
//   - a C++ function torch exports from its libraries whose declaration is the same in 2.11,
//     2.12, 2.13 and 2.14 (declared, one by one, in torch_compat.cpp; the linker names them);
//   - a field read at an offset that torch_compat.cpp is told at import time
//     (`_torch_compat.init_c_abi`, from a table per torch minor) and checks there against what
//     torch's Python API says for a set of probe tensors; a torch whose layout does not match
//     gets an ImportError, never a wrong read.
// The reasoning, and what moved between 2.12 and 2.13 (TensorImpl lost 8 bytes: its dispatch
// key set, sizes, dtype and device all sit 8 bytes earlier; the DispatchKey numbering changed),
// are in ARCHITECTURE.md, "One _C for every torch".
#pragma once

#include <Python.h>
#include <pybind11/pybind11.h>

#include <cstddef>
#include <cstdint>

// torch's stable C shim: the declarations are those of shim.h (identical in 2.11 and 2.14).
extern "C" {
struct AtenTensorOpaque;
typedef struct AtenTensorOpaque* AtenTensorHandle;
typedef int32_t AOTITorchError;  // 0: success
AOTITorchError aoti_torch_get_dim(AtenTensorHandle tensor, int64_t* ret_dim);
AOTITorchError aoti_torch_get_sizes(AtenTensorHandle tensor, int64_t** ret_sizes);
AOTITorchError aoti_torch_get_strides(AtenTensorHandle tensor, int64_t** ret_strides);
AOTITorchError aoti_torch_get_storage_offset(AtenTensorHandle tensor, int64_t* ret_storage_offset);
AOTITorchError aoti_torch_get_dtype(AtenTensorHandle tensor, int32_t* ret_dtype);
AOTITorchError aoti_torch_get_device_type(AtenTensorHandle tensor, int32_t* ret_device_type);
AOTITorchError aoti_torch_get_device_index(AtenTensorHandle tensor, int32_t* ret_device_index);
AOTITorchError aoti_torch_get_layout(AtenTensorHandle tensor, int32_t* ret_layout);
bool aoti_torch_grad_mode_is_enabled();
}

namespace xc::tc {

// Where torch keeps what _C reads; set once by init_c_abi (`_C._abi_configure`).
struct Layout {
  // TensorImpl: the dispatch key set (a uint64 bit set) and the Storage (a StorageImpl*).
  size_t impl_key_set = 0;
  size_t impl_storage = 0;
  // StorageImpl: the size in bytes (a SymInt: an int64 when concrete, as at run time).
  size_t storage_nbytes = 0;
  // The default thread-local include / exclude sets torch stores its TLS relative to (the TLS
  // holds `set ^ default`), and the backend bits `DispatchKeySet::operator-` keeps.
  uint64_t tls_default_included = 0;
  uint64_t tls_default_excluded = 0;
  uint64_t backend_mask = 0;
  bool ready = false;
};
extern Layout g_layout;

// THPVariable is { PyObject_HEAD; at::Tensor cdata; ... }: the at::Tensor (one
// intrusive_ptr<TensorImpl>, the AtenTensorHandle the shim takes) sits right after the header.
// Unchanged 2.11 to 2.14 (torch/csrc/autograd/python_variable.h is the same file); checked at
// import against `t._cdata` before anything is read through it.
constexpr size_t kTHPTensor = sizeof(PyObject);

// Whether `obj` is a torch.Tensor (THPVariable_Check: torch._C.TensorBase, its subclasses).
bool is_tensor(PyObject* obj);

// The tensor of a torch.Tensor `obj` (is_tensor(obj) must hold).
inline AtenTensorHandle handle(PyObject* obj) {
  return reinterpret_cast<AtenTensorHandle>(reinterpret_cast<char*>(obj) + kTHPTensor);
}
inline const char* impl(PyObject* obj) {
  return *reinterpret_cast<const char* const*>(reinterpret_cast<char*>(obj) + kTHPTensor);
}

// This thread's local dispatch key sets, decoded (included, excluded).
void tls_dispatch_keys(uint64_t* included, uint64_t* excluded);

// The dispatch keys an op on this tensor would see with this thread's include/exclude sets:
// (key_set | included) - excluded, as c10::DispatchKeySet computes it (backend bits stay). The
// bits' meaning differs between torch versions (2.13 renumbered the keys); guards only compare
// two sets read under the same torch.
inline uint64_t effective_keys(const char* tensor_impl, uint64_t included, uint64_t excluded) {
  uint64_t keys = *reinterpret_cast<const uint64_t*>(tensor_impl + g_layout.impl_key_set);
  return (keys | included) & (g_layout.backend_mask | ~excluded);
}

// The StorageImpl of the tensor (nullptr: none) and its size in bytes (read only when not null).
inline const void* storage(const char* tensor_impl) {
  return *reinterpret_cast<const void* const*>(tensor_impl + g_layout.impl_storage);
}
inline int64_t storage_nbytes(const void* storage_impl) {
  return *reinterpret_cast<const int64_t*>(static_cast<const char*>(storage_impl) +
                                           g_layout.storage_nbytes);
}

// c10::TensorImpl::requires_grad() (exported).
bool requires_grad(const char* tensor_impl);

// Thread-local and process-wide state a trace bakes in (GlobalState guard). Dtypes are
// c10::ScalarType values, compared only with values read under the same torch.
inline bool grad_enabled() { return aoti_torch_grad_mode_is_enabled(); }
bool inference_enabled();
int64_t dispatch_mode_stack_len();
int default_dtype();
bool deterministic_algorithms();
bool deterministic_fill_uninitialized_memory();
constexpr int kCPU = 0;   // c10::DeviceType::CPU
constexpr int kCUDA = 1;  // c10::DeviceType::CUDA
bool autocast_enabled(int device_type);
int autocast_dtype(int device_type);
// The torch-function mode stack (at::impl::PythonTorchFunctionTLS): its length, its disabled
// state (an enum: ENABLED, SUBCLASSES_DISABLED, ALL_DISABLED) and its modes (borrowed).
int64_t torch_function_stack_len();
int torch_function_disabled_state();
PyObject* torch_function_mode_at(int64_t i);

}  // namespace xc::tc

namespace xc {
// Adds _abi_tls_raw, _abi_configure and _abi_read (torch_compat.cpp).
void init_torch_compat(pybind11::module_& m);
}  // namespace xc
