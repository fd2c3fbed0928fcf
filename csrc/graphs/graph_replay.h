// graph_replay.h — the per-call bookkeeping of recorded graphs (mode="reduce-overhead").
//
//   GraphReplay(fn, record, n_inputs, pool, copy_live=True)   a callable that stands for `fn`
//   ├─ PENDING   each call: record(self, args) -> (recorded, result). Python warms up, checks and
//   │            records (kernels/cudagraphs.py); False: `result` is this call's result; True:
//   │            the recording was set with _set_recording and this call replays it
//   ├─ RECORDED  each call, all in C++ (no Python but the recording's replay callable):
//   │              static inputs (parameters, buffers, marked ones): same data pointer, else the
//   │                recording is dropped and the call goes back to record()
//   │              other inputs: copied into the recording's input buffers (skipped when the
//   │                argument is the buffer); other sizes/strides/dtype/device: fn(*args)
//   │              outputs of earlier replays still held by the caller (of this graph, and of the
//   │                graphs recorded after it in the same pool, whose memory may overlap this
//   │                graph's): their storage gets a copy, so a replay never overwrites them
//   │              replay(); each output is a new tensor over the recorded output memory, whose
//   │                storage holds that memory (it outlives the recording)
//   └─ EAGER     fn(*args)
//
// pool: a Python list shared by the graphs of one compiled function, in recording order
// (kernels/cudagraphs.py appends a graph when it records it).
#pragma once

#include <Python.h>

namespace xc {

// Adds GraphReplay to `module`. Returns false with an error set.
bool init_graph_replay(PyObject* module);

}  // namespace xc
