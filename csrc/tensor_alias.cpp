// tensor_alias.cpp — does a tensor a compiled graph writes into share memory with another input?
//
// Functional graphs treat their inputs as independent: a graph compiled for `a.mul_(2); b + 1`
// reads b's old values when b is a view of a. The AOT runtime asks this before each call of a
// graph that writes into inputs and runs the graph eagerly when the answer is yes. One call
// per compiled call, no Python attribute access: StorageImpl pointers read off the TensorImpls.
#include "tensor_alias.h"

#include <torch/csrc/autograd/python_variable.h>

#include <vector>

namespace py = pybind11;

namespace xc {

namespace {

// The storage of a dense tensor with memory, or nullptr (not a tensor, no storage, empty).
const c10::StorageImpl* storage_of(PyObject* obj) {
  if (!THPVariable_Check(obj)) return nullptr;
  const at::Tensor& t = THPVariable_Unpack(obj);
  if (!t.defined() || !t.has_storage()) return nullptr;
  const c10::StorageImpl* s = t.storage().unsafeGetStorageImpl();
  if (s == nullptr || s->nbytes() == 0) return nullptr;
  return s;
}

// True when some primals[k], k in written, shares its storage with another primal.
bool shares_storage(py::sequence primals, py::sequence written) {
  const Py_ssize_t n = py::len(primals);
  if (n < 2) return false;
  std::vector<const c10::StorageImpl*> storages(static_cast<size_t>(n));
  for (Py_ssize_t i = 0; i < n; i++) storages[i] = storage_of(primals[i].ptr());
  for (auto item : written) {
    const Py_ssize_t k = item.cast<Py_ssize_t>();
    if (k < 0 || k >= n) throw py::index_error("shares_storage: written index out of range");
    const c10::StorageImpl* s = storages[k];
    if (s == nullptr) continue;
    for (Py_ssize_t j = 0; j < n; j++) {
      if (j != k && storages[j] == s) return true;
    }
  }
  return false;
}

}  // namespace

void init_tensor_alias(py::module_& m) {
  m.def("shares_storage", &shares_storage, py::arg("primals"), py::arg("written"),
        "Whether a tensor primals[k] (k in written) shares its storage with another of primals.");
}

}  // namespace xc
