// guard_tensor.cpp — tensor-metadata and global-state leaves. What they read from torch goes
// through torch_compat.h (torch's stable C shim, a few exported functions, the dispatch key set
// at the offset init_c_abi checked): no Python attribute access, no torch header.
#include <pybind11/pybind11.h>

#include <algorithm>
#include <stdexcept>

#include "guard_leaves.h"
#include "torch_compat.h"

namespace xc {

namespace {

constexpr int64_t kAny = INT64_MIN;  // dimension not checked (dynamic)

// The dispatch keys an op on this tensor would see, with this thread's include/exclude sets.
uint64_t effective_keys(PyObject* tensor) {
  uint64_t inc, exc;
  tc::tls_dispatch_keys(&inc, &exc);
  return tc::effective_keys(tc::impl(tensor), inc, exc);
}

// The tensor's sizes or strides (false: it has none concrete, e.g. symbolic sizes).
bool read_dims(PyObject* tensor, bool strides, const int64_t** out, int64_t* n) {
  AtenTensorHandle h = tc::handle(tensor);
  int64_t* p = nullptr;
  if (aoti_torch_get_dim(h, n) != 0) return false;
  if ((strides ? aoti_torch_get_strides(h, &p) : aoti_torch_get_sizes(h, &p)) != 0) return false;
  *out = p;
  return true;
}

std::vector<int64_t> dims(const int64_t* actual, int64_t n, const DimSpec& spec, const char* what) {
  std::vector<int64_t> out(actual, actual + n);
  if (!spec) return out;
  if (spec->size() != out.size()) {
    throw std::invalid_argument(std::string("add_tensor_match: ") + what +
                                " has the wrong number of dimensions");
  }
  for (size_t i = 0; i < out.size(); i++) out[i] = (*spec)[i] ? *(*spec)[i] : kAny;
  return out;
}

bool dims_match(const int64_t* actual, int64_t actual_n, const std::vector<int64_t>& expected) {
  const size_t n = expected.size();
  if (static_cast<size_t>(actual_n) != n) return false;
  for (size_t i = 0; i < n; i++) {
    if (expected[i] != actual[i] && expected[i] != kAny) return false;
  }
  return true;
}

class TensorMatch final : public Leaf {
 public:
  TensorMatch(PyObject* example, std::string desc, const DimSpec& sizes, const DimSpec& strides)
      : Leaf(std::move(desc)), type_((PyObject*)Py_TYPE(example)) {
    if (!tc::is_tensor(example)) throw pybind11::type_error("add_tensor_match: not a tensor");
    if (!tc::g_layout.ready) throw std::runtime_error("add_tensor_match: _C is not configured");
    AtenTensorHandle h = tc::handle(example);
    keys_ = effective_keys(example);
    int32_t layout = 0;
    if (aoti_torch_get_dtype(h, &dtype_) != 0 || aoti_torch_get_layout(h, &layout) != 0) {
      throw std::invalid_argument("add_tensor_match: cannot read the example's dtype and layout");
    }
    requires_grad_ = tc::requires_grad(tc::impl(example));
    strided_ = layout == 0;  // c10::kStrided
    const int64_t* p = nullptr;
    int64_t n = 0;
    if (aoti_torch_get_device_type(h, &device_type_) != 0 ||
        aoti_torch_get_device_index(h, &device_index_) != 0 || !read_dims(example, false, &p, &n)) {
      throw std::invalid_argument("add_tensor_match: example has no concrete sizes");
    }
    sizes_ = dims(p, n, sizes, "sizes");
    if (strided_) {
      if (!read_dims(example, true, &p, &n)) {
        throw std::invalid_argument("add_tensor_match: example has no concrete sizes");
      }
      strides_ = dims(p, n, strides, "strides");
    }
    // The fast reads (torch_compat.h) where the example's sizes, strides and device are
    // TensorImpl's own fields, and where they agree with the shim's for it.
    const char* impl = tc::impl(example);
    uint64_t word = tc::dtype_device_word(impl);
    if (tc::default_policy(word)) {
      dtype_device_ = word & tc::g_layout.dtype_device_mask;
      int64_t rn = 0;
      const int64_t* raw_strides = nullptr;
      const int64_t* raw = tc::sizes_strides(impl, &rn, &raw_strides);
      fast_ =
          tc::requires_grad_fast(impl) == requires_grad_ && read_dims(example, false, &p, &n) &&
          n == rn && std::equal(p, p + n, raw) &&
          (!strided_ || (read_dims(example, true, &p, &n) && std::equal(p, p + n, raw_strides)));
    }
    Py_INCREF(type_);
  }
  ~TensorMatch() override { Py_DECREF(type_); }

  bool check(PyObject* v) override {
    if ((PyObject*)Py_TYPE(v) != type_) return false;
    if (effective_keys(v) != keys_) return false;
    const char* impl = tc::impl(v);
    uint64_t word = tc::dtype_device_word(impl);
    if (fast_ && tc::default_policy(word)) {
      if ((word & tc::g_layout.dtype_device_mask) != dtype_device_) return false;
      if (tc::requires_grad_fast(impl) != requires_grad_) return false;
      int64_t n = 0;
      const int64_t* st = nullptr;
      const int64_t* p = tc::sizes_strides(impl, &n, &st);
      return dims_match(p, n, sizes_) && (!strided_ || dims_match(st, n, strides_));
    }
    AtenTensorHandle h = tc::handle(v);
    int32_t dtype, device_type, device_index;
    if (aoti_torch_get_dtype(h, &dtype) != 0 || dtype != dtype_) return false;
    if (tc::requires_grad(tc::impl(v)) != requires_grad_) return false;
    if (aoti_torch_get_device_type(h, &device_type) != 0 || device_type != device_type_ ||
        aoti_torch_get_device_index(h, &device_index) != 0 || device_index != device_index_) {
      return false;
    }
    const int64_t* p = nullptr;
    int64_t n = 0;
    if (!read_dims(v, false, &p, &n) || !dims_match(p, n, sizes_)) return false;
    if (strided_ && (!read_dims(v, true, &p, &n) || !dims_match(p, n, strides_))) return false;
    return true;
  }

 private:
  PyObject* type_;  // strong
  uint64_t keys_ = 0;
  int32_t dtype_ = 0;
  int32_t device_type_ = 0;
  int32_t device_index_ = -1;
  bool requires_grad_ = false;
  bool strided_ = true;
  bool fast_ = false;          // the example's fields are TensorImpl's own (default policy)
  uint64_t dtype_device_ = 0;  // its dtype and device bytes (fast_ only)
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
  int autocast_cpu_dtype = 0;  // c10::ScalarType values of this torch
  int autocast_cuda_dtype = 0;
  // Process-wide settings a trace bakes in: torch.ones(3) takes the default dtype, and
  // torch.use_deterministic_algorithms changes what some ops do (issue #19 item 5).
  int default_dtype = 0;
  bool deterministic = false;
  bool deterministic_fill = false;
  // TorchDispatchModes see every ATen op: a frame met under one runs eagerly (convert_frame), so
  // a graph traced without one must not run under one (issue #31). One length read per call.
  int64_t dispatch_modes = 0;

  static GlobalStateValues now() {
    GlobalStateValues s;
    s.default_dtype = tc::default_dtype();
    s.deterministic = tc::deterministic_algorithms();
    s.deterministic_fill = tc::deterministic_fill_uninitialized_memory();
    s.dispatch_modes = tc::dispatch_mode_stack_len();
    s.grad = tc::grad_enabled();
    s.inference = tc::inference_enabled();
    s.autocast_cpu = tc::autocast_enabled(tc::kCPU);
    s.autocast_cuda = tc::autocast_enabled(tc::kCUDA);
    if (s.autocast_cpu) s.autocast_cpu_dtype = tc::autocast_dtype(tc::kCPU);
    if (s.autocast_cuda) s.autocast_cuda_dtype = tc::autocast_dtype(tc::kCUDA);
    return s;
  }
  // Same as `now() == *this`, reading only what it has to.
  bool matches_now() const {
    if (tc::grad_enabled() != grad || tc::inference_enabled() != inference ||
        tc::dispatch_mode_stack_len() != dispatch_modes) {
      return false;
    }
    if (tc::default_dtype() != default_dtype || tc::deterministic_algorithms() != deterministic ||
        tc::deterministic_fill_uninitialized_memory() != deterministic_fill) {
      return false;
    }
    if (tc::autocast_enabled(tc::kCPU) != autocast_cpu ||
        tc::autocast_enabled(tc::kCUDA) != autocast_cuda) {
      return false;
    }
    if (autocast_cpu && tc::autocast_dtype(tc::kCPU) != autocast_cpu_dtype) return false;
    if (autocast_cuda && tc::autocast_dtype(tc::kCUDA) != autocast_cuda_dtype) return false;
    return true;
  }
};

// The torch-function mode stack a trace ran under. `with torch.device(d)` and
// torch.set_default_device push a DeviceContext (compared by its device: each `with` makes a new
// one); any other mode is compared by identity. An empty stack costs one length read per call.
class ModeStack {
 public:
  ModeStack() {
    disabled_ = tc::torch_function_disabled_state();
    int64_t n = tc::torch_function_stack_len();
    for (int64_t i = 0; i < n; ++i) {
      PyObject* mode = tc::torch_function_mode_at(i);
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
    if (tc::torch_function_stack_len() != static_cast<int64_t>(entries_.size())) return false;
    if (entries_.empty()) return tc::torch_function_disabled_state() == disabled_;
    if (tc::torch_function_disabled_state() != disabled_) return false;
    for (size_t i = 0; i < entries_.size(); ++i) {
      PyObject* mode = tc::torch_function_mode_at(static_cast<int64_t>(i));
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
  int disabled_ = 0;  // at::impl::TorchFunctionDisabledState::ENABLED
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
