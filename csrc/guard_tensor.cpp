// guard_tensor.cpp — tensor-metadata and global-state leaves (torch headers: here and
// tensor_alias.cpp). Metadata is read from at::TensorImpl directly (no Python attribute access).
#include <ATen/Context.h>
#include <ATen/PythonTorchFunctionTLS.h>
#include <ATen/autocast_mode.h>
#include <c10/core/DefaultDtype.h>
#include <c10/core/GradMode.h>
#include <c10/core/InferenceMode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/core/impl/TorchDispatchModeTLS.h>
#include <pybind11/pybind11.h>
#include <torch/csrc/PyInterpreter.h>
#include <torch/csrc/autograd/python_variable.h>

#include <stdexcept>

#include "guard_leaves.h"

namespace xc {

namespace {

constexpr int64_t kAny = INT64_MIN;  // dimension not checked (dynamic)

// The dispatch keys an op on this tensor would see, with this thread's include/exclude sets.
c10::DispatchKeySet effective_keys(c10::TensorImpl* impl) {
  c10::impl::LocalDispatchKeySet local = c10::impl::tls_local_dispatch_key_set();
  return (impl->key_set() | local.included_) - local.excluded_;
}

std::vector<int64_t> dims(c10::IntArrayRef actual, const DimSpec& spec, const char* what) {
  std::vector<int64_t> out(actual.begin(), actual.end());
  if (!spec) return out;
  if (spec->size() != out.size()) {
    throw std::invalid_argument(std::string("add_tensor_match: ") + what +
                                " has the wrong number of dimensions");
  }
  for (size_t i = 0; i < out.size(); i++) out[i] = (*spec)[i] ? *(*spec)[i] : kAny;
  return out;
}

bool dims_match(c10::IntArrayRef actual, const std::vector<int64_t>& expected) {
  const size_t n = expected.size();
  if (actual.size() != n) return false;
  for (size_t i = 0; i < n; i++) {
    if (expected[i] != actual[i] && expected[i] != kAny) return false;
  }
  return true;
}

class TensorMatch final : public Leaf {
 public:
  TensorMatch(PyObject* example, std::string desc, const DimSpec& sizes, const DimSpec& strides)
      : Leaf(std::move(desc)), type_((PyObject*)Py_TYPE(example)) {
    if (!THPVariable_Check(example)) throw pybind11::type_error("add_tensor_match: not a tensor");
    const at::Tensor& t = THPVariable_Unpack(example);
    c10::TensorImpl* impl = t.unsafeGetTensorImpl();
    keys_ = effective_keys(impl);
    dtype_ = impl->dtype();
    device_ = impl->device();
    requires_grad_ = impl->requires_grad();
    strided_ = impl->layout() == c10::kStrided;
    try {
      sizes_ = dims(impl->sizes(), sizes, "sizes");
      if (strided_) strides_ = dims(impl->strides(), strides, "strides");
    } catch (const c10::Error& e) {
      throw std::invalid_argument(std::string("add_tensor_match: example has no concrete sizes: ") +
                                  e.what_without_backtrace());
    }
    Py_INCREF(type_);
  }
  ~TensorMatch() override { Py_DECREF(type_); }

  bool check(PyObject* v) override {
    if ((PyObject*)Py_TYPE(v) != type_) return false;
    const at::Tensor& t = THPVariable_Unpack(v);
    c10::TensorImpl* impl = t.unsafeGetTensorImpl();
    if (effective_keys(impl) != keys_) return false;
    if (impl->dtype() != dtype_) return false;
    if (impl->requires_grad() != requires_grad_) return false;
    try {
      if (impl->device() != device_) return false;
      if (!dims_match(impl->sizes(), sizes_)) return false;
      if (strided_ && !dims_match(impl->strides(), strides_)) return false;
    } catch (const c10::Error&) {
      return false;  // e.g. a subclass with symbolic sizes
    }
    return true;
  }

 private:
  PyObject* type_;  // strong
  c10::DispatchKeySet keys_;
  caffe2::TypeMeta dtype_;
  c10::Device device_{c10::kCPU};
  bool requires_grad_ = false;
  bool strided_ = true;
  std::vector<int64_t> sizes_;
  std::vector<int64_t> strides_;
};

// Thread-local modes that change what a graph computes. Autocast dtypes only matter (and are
// only read) while autocast is on for that device.
struct GlobalStateValues {
  bool grad = false;
  bool inference = false;
  bool autocast_cpu = false;
  bool autocast_cuda = false;
  at::ScalarType autocast_cpu_dtype = at::kFloat;
  at::ScalarType autocast_cuda_dtype = at::kFloat;
  // Process-wide settings a trace bakes in: torch.ones(3) takes the default dtype, and
  // torch.use_deterministic_algorithms changes what some ops do (issue #19 item 5).
  at::ScalarType default_dtype = at::kFloat;
  bool deterministic = false;
  bool deterministic_fill = false;
  // TorchDispatchModes see every ATen op: a frame met under one runs eagerly (convert_frame), so
  // a graph traced without one must not run under one (issue #31). One length read per call.
  int64_t dispatch_modes = 0;

  static GlobalStateValues now() {
    GlobalStateValues s;
    s.default_dtype = c10::typeMetaToScalarType(c10::get_default_dtype());
    s.deterministic = at::globalContext().deterministicAlgorithms();
    s.deterministic_fill = at::globalContext().deterministicFillUninitializedMemory();
    s.dispatch_modes = c10::impl::TorchDispatchModeTLS::stack_len();
    s.grad = c10::GradMode::is_enabled();
    s.inference = c10::InferenceMode::is_enabled();
    s.autocast_cpu = at::autocast::is_autocast_enabled(at::kCPU);
    s.autocast_cuda = at::autocast::is_autocast_enabled(at::kCUDA);
    if (s.autocast_cpu) s.autocast_cpu_dtype = at::autocast::get_autocast_dtype(at::kCPU);
    if (s.autocast_cuda) s.autocast_cuda_dtype = at::autocast::get_autocast_dtype(at::kCUDA);
    return s;
  }
  // Same as `now() == *this`, reading only what it has to.
  bool matches_now() const {
    if (c10::GradMode::is_enabled() != grad || c10::InferenceMode::is_enabled() != inference ||
        c10::impl::TorchDispatchModeTLS::stack_len() != dispatch_modes) {
      return false;
    }
    if (c10::typeMetaToScalarType(c10::get_default_dtype()) != default_dtype ||
        at::globalContext().deterministicAlgorithms() != deterministic ||
        at::globalContext().deterministicFillUninitializedMemory() != deterministic_fill) {
      return false;
    }
    if (at::autocast::is_autocast_enabled(at::kCPU) != autocast_cpu ||
        at::autocast::is_autocast_enabled(at::kCUDA) != autocast_cuda) {
      return false;
    }
    if (autocast_cpu && at::autocast::get_autocast_dtype(at::kCPU) != autocast_cpu_dtype)
      return false;
    if (autocast_cuda && at::autocast::get_autocast_dtype(at::kCUDA) != autocast_cuda_dtype) {
      return false;
    }
    return true;
  }
};

// The torch-function mode stack a trace ran under. `with torch.device(d)` and
// torch.set_default_device push a DeviceContext (compared by its device: each `with` makes a new
// one); any other mode is compared by identity. An empty stack costs one length read per call.
class ModeStack {
 public:
  ModeStack() {
    disabled_ = at::impl::PythonTorchFunctionTLS::get_disabled_state();
    int64_t n = at::impl::PythonTorchFunctionTLS::stack_len();
    for (int64_t i = 0; i < n; ++i) {
      PyObject* mode = at::impl::PythonTorchFunctionTLS::get_stack_at(i)->ptr(getPyInterpreter());
      Entry e;
      e.type = pybind11::reinterpret_borrow<pybind11::object>((PyObject*)Py_TYPE(mode));
      e.mode = pybind11::reinterpret_borrow<pybind11::object>(mode);
      if (std::string(Py_TYPE(mode)->tp_name) == "DeviceContext" &&
          PyObject_HasAttrString(mode, "device")) {
        e.device =
            pybind11::reinterpret_steal<pybind11::object>(PyObject_GetAttrString(mode, "device"));
        e.mode = pybind11::object();  // (not kept alive: the next `with` makes another)
      }
      entries_.push_back(std::move(e));
    }
  }
  bool matches_now() const {
    if (at::impl::PythonTorchFunctionTLS::stack_len() != static_cast<int64_t>(entries_.size()))
      return false;
    if (entries_.empty())
      return at::impl::PythonTorchFunctionTLS::get_disabled_state() == disabled_;
    if (at::impl::PythonTorchFunctionTLS::get_disabled_state() != disabled_) return false;
    for (size_t i = 0; i < entries_.size(); ++i) {
      PyObject* mode = at::impl::PythonTorchFunctionTLS::get_stack_at(static_cast<int64_t>(i))
                           ->ptr(getPyInterpreter());
      const Entry& e = entries_[i];
      if ((PyObject*)Py_TYPE(mode) != e.type.ptr()) return false;
      if (!e.device) {
        if (mode != e.mode.ptr()) return false;
        continue;
      }
      PyObject* device = PyObject_GetAttrString(mode, "device");
      if (device == nullptr) {
        PyErr_Clear();
        return false;
      }
      int same = PyObject_RichCompareBool(device, e.device.ptr(), Py_EQ);
      Py_DECREF(device);
      if (same != 1) {
        if (same < 0) PyErr_Clear();
        return false;
      }
    }
    return true;
  }

 private:
  struct Entry {
    pybind11::object type, mode, device;
  };
  at::impl::TorchFunctionDisabledState disabled_ = at::impl::TorchFunctionDisabledState::ENABLED;
  std::vector<Entry> entries_;
};

class GlobalState final : public RootLeaf {
 public:
  explicit GlobalState(std::string desc)
      : RootLeaf(std::move(desc)), at_trace_(GlobalStateValues::now()) {}
  bool needs_slots() const override { return false; }
  bool check(PyObject* const*) override { return at_trace_.matches_now() && modes_.matches_now(); }

 private:
  GlobalStateValues at_trace_;
  ModeStack modes_;
};

}  // namespace

std::unique_ptr<Leaf> make_tensor_match(PyObject* example, std::string desc, const DimSpec& sizes,
                                        const DimSpec& strides) {
  return std::make_unique<TensorMatch>(example, std::move(desc), sizes, strides);
}

std::unique_ptr<RootLeaf> make_global_state(std::string desc) {
  return std::make_unique<GlobalState>(std::move(desc));
}

}  // namespace xc
