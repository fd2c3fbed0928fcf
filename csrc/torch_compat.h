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
  // TensorImpl: its SizesAndStrides ({size_t n; int64_t inline[10] or int64_t* out of line}),
  // the 8 bytes from its dtype on (TypeMeta, optional<Device>, then the bit fields that say
  // whether sizes, strides and device come from a virtual call: `policy_mask`), and its
  // autograd meta (null: requires_grad is false).
  size_t impl_sizes_strides = 0;
  size_t impl_dtype_device = 0;
  size_t impl_autograd_meta = 0;
  uint64_t dtype_device_mask = 0;
  uint64_t policy_mask = 0;
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

// The fast reads of the tensor-match guard (the inline accessors of TensorImpl, at the offsets of
// this torch): valid only where `(dtype_device_word & policy_mask) == 0`, i.e. sizes, strides and
// device are TensorImpl's own fields, not a subclass's virtual override; elsewhere the shim.
inline uint64_t dtype_device_word(const char* tensor_impl) {
  return *reinterpret_cast<const uint64_t*>(tensor_impl + g_layout.impl_dtype_device);
}
inline bool default_policy(uint64_t dtype_device_word) {
  return (dtype_device_word & g_layout.policy_mask) == 0;
}
// c10::impl::SizesAndStrides: {size_t n; union {int64_t* out_of_line; int64_t inline_[10];}}:
// up to 5 dimensions, sizes at inline_[0, n) and strides at inline_[5, 5 + n); more, sizes at
// out_of_line[0, n) and strides at out_of_line[n, 2n).
inline const int64_t* sizes_strides(const char* tensor_impl, int64_t* n, const int64_t** strides) {
  constexpr size_t kInline = 5;
  const char* ss = tensor_impl + g_layout.impl_sizes_strides;
  size_t size = *reinterpret_cast<const size_t*>(ss);
  *n = static_cast<int64_t>(size);
  if (size > kInline) {
    const int64_t* p = *reinterpret_cast<const int64_t* const*>(ss + sizeof(size_t));
    *strides = p + size;
    return p;
  }
  const int64_t* p = reinterpret_cast<const int64_t*>(ss + sizeof(size_t));
  *strides = p + kInline;
  return p;
}
inline bool requires_grad_fast(const char* tensor_impl) {
  return *reinterpret_cast<const void* const*>(tensor_impl + g_layout.impl_autograd_meta) !=
             nullptr &&
         requires_grad(tensor_impl);
}

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
