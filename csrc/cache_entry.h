// cache_entry.h — one compiled artifact behind its guard, and the walk that finds and runs it.
//
//   CacheEntry (Python object owned by pybind11; code_cache.h keeps strong refs to it)
//   ├─ kind     GRAPH: a wholly captured frame       CODE: a frame with graph breaks
//   ├─ guard    shared RootGuard (filled slots are the graph's inputs)
//   ├─ GRAPH: compiled_fn (strong), n_inputs, output_plan (strong) + its parsed OutputPlan
//   ├─ CODE:  runner (strong), called as runner(*frame arguments), plus the function's
//   │         closure tuple as one more last argument when the code has free variables
//   ├─ owner    the backend key it was compiled for (None: any); see run_cached
//   ├─ deps     kept for the compiler: weak references to the objects the guard holds weakly,
//   │           whose callbacks remove the entry from its code's cache (cache_remove)
//   └─ hits     times the cache walk selected this entry
//
// Hot path (both the eval-frame hook and CompiledFunction):
//   run_cached(extra, view)    walk entries most recently hit first; the first whose guard
//                              passes is moved to the front and run. Entries whose owner is
//                              not the callback's backend key (its `_xc_backend_key`
//                              attribute; None or absent: any) are passed over, so one code
//                              object compiled with two backends gets an entry for each
//   run_callback(cb, view)     on a miss: cb(code, f_locals, f_globals, f_builtins, closure)
//                              -> entry (guard checked, then run) or None
// Guards and graphs run with this thread's compile callback set to None (backend code and
// guard getattrs are never traced); code entries run with the callback given.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "code_cache.h"
#include "guard_tree.h"

namespace xc {

// Builds a call's return value from the artifact's flat outputs. Parsed once from
//   ("out", i) | ("const", v) | ("slot", k) | ("tuple", [p...]) | ("list", [p...])
//   | ("dict", [keys], [p...]) | ("namedtuple", cls, [p...])
// A namedtuple is rebuilt as cls(*parts); a structseq (torch.return_types.*, which has
// n_sequence_fields) as cls(parts).
class OutputPlan {
 public:
  enum Kind { OUT, CONST, SLOT, TUPLE, LIST, DICT, NAMEDTUPLE };
  OutputPlan(pybind11::handle plan, int n_slots);  // throws std::invalid_argument
  // New reference or NULL with an error. `outs` is a tuple or list; slots borrowed.
  PyObject* build(PyObject* outs, PyObject* const* slots) const;

 private:
  Kind kind_;
  Py_ssize_t index_ = 0;
  pybind11::object value_;  // CONST value; DICT keys (tuple); NAMEDTUPLE class
  bool structseq_ = false;  // NAMEDTUPLE: cls(parts) instead of cls(*parts)
  std::vector<OutputPlan> items_;
};

struct CacheEntry {
  enum Kind { GRAPH, CODE };

  static std::shared_ptr<CacheEntry> graph(std::shared_ptr<RootGuard> guard,
                                           pybind11::object compiled_fn, int n_inputs,
                                           pybind11::object output_plan);
  static std::shared_ptr<CacheEntry> code(std::shared_ptr<RootGuard> guard,
                                          pybind11::object runner);

  // Runs this entry for a frame whose guard check filled `slots`. New reference or NULL with
  // an error. `callback` (borrowed, may be NULL) is the one code entries run with.
  PyObject* run(const FrameView& view, PyObject* const* slots, PyObject* callback);

  Kind kind;
  std::shared_ptr<RootGuard> guard;
  pybind11::object fn;           // compiled_fn (GRAPH) or runner (CODE)
  pybind11::object plan_object;  // output_plan as given (GRAPH), else None
  std::unique_ptr<OutputPlan> plan;
  pybind11::object owner;  // backend key (see run_cached) or None
  pybind11::object tag;    // anything the compiler wants to note (Python-only; None)
  pybind11::object deps;   // what the compiler keeps with the entry (the weak references
                           // whose callbacks drop it when a guarded object dies); None
  int n_inputs = 0;
  int64_t hits = 0;

  // The one ownership rule: an entry is used under a callback whose backend key is `key`
  // (borrowed; NULL or None: a callback without a key, e.g. xcompile.run(), uses any entry)
  // when the entry has no owner or that owner.
  bool usable_by(PyObject* key) const {
    PyObject* o = owner.ptr();
    return key == nullptr || key == Py_None || o == Py_None || o == key;
  }
};

// Borrowed C++ view of a Python CacheEntry, or NULL if `obj` is not one.
CacheEntry* as_cache_entry(PyObject* obj);

// Walks `extra`'s entries (NULL: none). Returns true when an entry ran; *out is then its result
// (new reference) or NULL with an error set. False: miss, nothing ran, no error.
bool run_cached(CodeExtra* extra, const FrameView& view, PyObject* callback, PyObject** out);

// Miss path: calls `callback` (borrowed, not NULL) for `code` (borrowed). Returns true when
// *out is final: the result of the returned entry, or NULL with the callback's (or the entry's)
// error. False: the frame must run normally (callback returned None or the entry's guard
// failed), no error set.
bool run_callback(PyObject* callback, PyCodeObject* code, const FrameView& view, PyObject** out);

}  // namespace xc
