// Torch-free stand-ins for guard_tensor.cpp, guard_shapes.cpp, tensor_alias.cpp,
// torch_compat.cpp and kernel_launch.cpp, linked only
// into the CPython 3.12 test build of the runtime (check_py312_compile.sh), where no torch is
// installed. Not part of xcompile._C.
#include <stdexcept>

#include "guard_leaves.h"
#include "kernel_launch.h"
#include "tensor_alias.h"
#include "torch_compat.h"

namespace xc {

std::unique_ptr<Leaf> make_tensor_match(PyObject*, std::string, const DimSpec&, const DimSpec&) {
  throw std::runtime_error("tensor guards are not available in the torch-free test build");
}

std::unique_ptr<RootLeaf> make_global_state(std::string) {
  throw std::runtime_error("global-state guards are not available in the torch-free test build");
}

std::unique_ptr<RootLeaf> make_shape_check(std::vector<ShapeRead>, std::vector<int64_t>, int,
                                           std::string) {
  throw std::runtime_error("shape guards are not available in the torch-free test build");
}

void init_tensor_alias(pybind11::module_&) {}  // no shares_storage in the torch-free build

void init_torch_compat(pybind11::module_&) {}  // no _abi_* in the torch-free build

bool init_kernel_launch(PyObject*) { return true; }  // no KernelLauncher in the torch-free build

}  // namespace xc
