// module.cpp of xcompile._C_graphs: GraphReplay (graph_replay.h), the one part of xcompile's C++
// that needs libtorch's C++ API and so is built against, and loaded only with, one torch minor
// version (ARCHITECTURE.md, "One _C for every torch"). Loaded lazily by kernels/cudagraphs.py
// through _torch_compat.graph_replay_extension().
#include <Python.h>

#include "graph_replay.h"

namespace {

PyModuleDef g_module = {PyModuleDef_HEAD_INIT, "_C_graphs",
                        "Recorded-graph replay (mode='reduce-overhead'), built per torch version.",
                        -1, nullptr};

}  // namespace

PyMODINIT_FUNC PyInit__C_graphs() {
  PyObject* m = PyModule_Create(&g_module);
  if (m == nullptr) return nullptr;
  if (!xc::init_graph_replay(m)) {
    Py_DECREF(m);
    return nullptr;
  }
  return m;
}
