// tensor_alias.h — call-time storage-sharing checks for compiled graphs that write into inputs.
#pragma once

#include <pybind11/pybind11.h>

namespace xc {

// Adds shares_storage(primals, written) to the module (see tensor_alias.cpp).
void init_tensor_alias(pybind11::module_& m);

}  // namespace xc
