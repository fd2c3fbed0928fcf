// context_exit.h — ContextExit: the __exit__ of a `with` block a graph-break runner enters again,
// held so that it runs at most once whoever calls it.
#pragma once
#include <Python.h>

namespace xc {
bool init_context_exit(PyObject* module);
}
