// compiled_function.h — the per-call fast path users hit: CompiledFunction and the
// module-call trampoline, both plain CPython types with vectorcall.
//
//   CompiledFunction (GC-tracked)
//   ├─ fn            strong  the user's types.FunctionType; fn.__code__ carries the cache
//   ├─ callback      strong  compile callback (or NULL for None)
//   ├─ bound_self    strong  or NULL; prepended to every call
//   ├─ hooks_module  strong  or NULL; nn.Module whose hooks force the eager __call__ path
//   ├─ hooks         owned   HookDicts: the hook dicts of hooks_module and of
//   │                        torch.nn.modules.module (strong refs), re-collected when either
//   │                        owner's __dict__ version changes
//   └─ __dict__      strong  so Python can set __wrapped__, __name__, __doc__ ...
//
// __call__(*args, **kw):
//   hooks present ─► hooks_module(*args, **kw) with the callback set (eager hooks)
//   plain binding? (no kwargs, no *args/**kwargs in fn, not a generator, defaults fill the rest)
//     no  ─► fn(*args, **kw) with the callback set; the eval-frame hook handles the frame
//     yes ─► state SKIP: fn(...) with the callback set
//            walk the cache ─► graph hit: compiled_fn(*slots) directly, no Python frame for fn
//                           ─► code hit: runner(*args) with the callback set
//            miss ─► NORMAL: callback(...) ─► entry run | fn(...) with the callback set
//                    NO_NEW: fn(...) with the callback set
//   ("fn(...) with the callback set" after a lookup skips the hook's own lookup of that frame.)
//
// untraced(fn): a callable that calls fn with this thread's compile callback unset (what a frame
// with graph breaks calls its compiled graph through: nothing a graph or backend runs is traced).
//
// module_call_trampoline: a method descriptor that OptimizedModule uses as __call__; called as
// (opt_mod, *args, **kw), it finds opt_mod.__dict__["_xc_call"] and vectorcalls it with the rest.
#pragma once

#include <Python.h>

namespace xc {

// Creates the types and adds CompiledFunction, module_call_trampoline and untraced to `module`.
// Returns false with an error set.
bool init_compiled_function(PyObject* module);

}  // namespace xc
