// tensor_alias.cpp — does a tensor a compiled graph writes into share memory with another input?
//
// Functional graphs treat their inputs as independent: a graph compiled for `a.mul_(2); b + 1`
// reads b's old values when b is a view of a. The AOT runtime asks this before each call of a
// graph that writes into inputs and runs the graph eagerly when the answer is yes. One call
// per compiled call, no Python attribute access: StorageImpl pointers read off the TensorImpls
// (torch_compat.h).
#include "tensor_alias.h"

#include <algorithm>
#include <vector>

#include "torch_compat.h"

namespace py = pybind11;

namespace xc {

namespace {

// The storage of a dense tensor with memory, or nullptr (not a tensor, no storage, empty).
const void* storage_of(PyObject* obj) {
  if (!tc::is_tensor(obj)) return nullptr;
  const void* s = tc::storage(tc::impl(obj));
  if (s == nullptr || tc::storage_nbytes(s) <= 0) return nullptr;
  return s;
}

// True when some primals[k], k in written, shares its storage with another primal. One pass
// over the primals and a sort: a training graph may write a hundred BatchNorm buffers among
// several hundred parameters, where a compare of every pair would cost tens of microseconds.
bool shares_storage(py::handle primals_obj, py::handle written_obj) {
  py::object primals = py::reinterpret_steal<py::object>(
      PySequence_Fast(primals_obj.ptr(), "shares_storage: primals must be a sequence"));
  if (!primals) throw py::error_already_set();
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(primals.ptr());
  if (n < 2) return false;
  PyObject** items = PySequence_Fast_ITEMS(primals.ptr());
  std::vector<const void*> storages(static_cast<size_t>(n));
  std::vector<const void*> sorted;
  sorted.reserve(static_cast<size_t>(n));
  for (Py_ssize_t i = 0; i < n; i++) {
    storages[i] = storage_of(items[i]);
    if (storages[i] != nullptr) sorted.push_back(storages[i]);
  }
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end()) return false;  // all apart
  py::object written = py::reinterpret_steal<py::object>(
      PySequence_Fast(written_obj.ptr(), "shares_storage: written must be a sequence"));
  if (!written) throw py::error_already_set();
  const Py_ssize_t m = PySequence_Fast_GET_SIZE(written.ptr());
  PyObject** ks = PySequence_Fast_ITEMS(written.ptr());
  for (Py_ssize_t w = 0; w < m; w++) {
    const Py_ssize_t k = PyLong_AsSsize_t(ks[w]);
    if (k == -1 && PyErr_Occurred()) throw py::error_already_set();
    if (k < 0 || k >= n) throw py::index_error("shares_storage: written index out of range");
    const void* s = storages[k];
    if (s == nullptr) continue;
    auto range = std::equal_range(sorted.begin(), sorted.end(), s);
    if (range.second - range.first > 1) return true;
  }
  return false;
}

}  // namespace

void init_tensor_alias(py::module_& m) {
  m.def("shares_storage", &shares_storage, py::arg("primals"), py::arg("written"),
        "Whether a tensor primals[k] (k in written) shares its storage with another of primals.");
}

}  // namespace xc
