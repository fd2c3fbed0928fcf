// kernel_launch.h — KernelLauncher: calls a generated C++ kernel with the data pointers of the
// tensors it is given, with no Python-level call per argument.
#pragma once
#include <Python.h>

namespace xc {
bool init_kernel_launch(PyObject* module);
}
