// frame_hook.h — the PEP 523 eval-frame function and the per-thread callback.
//
//   thread A: t_state.callback ──strong──► cb (Python callable) or NULL
//   thread B: t_state.callback ──────────► NULL
//   interpreter: eval_frame = eval_frame_hook   while >= 1 thread has a callback
//                             (previous function) otherwise, so uncompiled code runs at full speed
//
// The hook, for one frame (callback set on this thread):
//   skip? (throwflag, generator/coroutine, module/class body, not owned by the thread,
//          code state SKIP)                      ─► _PyEval_EvalFrameDefault
//   walk the code's cache entries (cache_entry.h) ─► hit: result, the frame is never evaluated
//   miss, state NORMAL ─► callback(...) ─► entry whose guard passes: run it; else evaluate
//   miss, state NO_NEW ─► evaluate
//
// All state here is touched with the GIL held.
#pragma once

#include <Python.h>

namespace xc {

// Per-thread state. Plain data so that access is a single TLS load.
struct ThreadState {
  PyObject* callback;        // strong or NULL: the compile callback of this thread
  PyObject* skip_code_once;  // borrowed identity only, or NULL: the next hooked frame, if it runs
                             // this code object, is evaluated without a cache lookup (its
                             // lookup was already done by CompiledFunction)
};
extern __thread ThreadState t_state;

// Replaces this thread's callback. `cb` is a new reference that is stolen (or NULL); returns the
// previous callback as a new reference (or NULL). Installs the eval-frame hook when the first
// thread gets a callback and removes it when the last one drops its callback.
PyObject* swap_callback(PyObject* cb);

// True while our eval-frame function is the interpreter's.
bool hook_installed();

// set_stance("force_eager"): process-wide, compiled code is neither run nor made; every frame
// and CompiledFunction call runs its original code (checked once per hooked frame / call).
extern bool g_force_eager;

// Sets this thread's callback for a C++ scope and restores the previous one when the scope ends
// (also on error paths). `cb` is borrowed; NULL means "no callback". A no-op when unchanged.
class CallbackScope {
 public:
  explicit CallbackScope(PyObject* cb) {
    if (t_state.callback == cb) return;
    Py_XINCREF(cb);
    prev_ = swap_callback(cb);
    active_ = true;
  }
  ~CallbackScope() {
    if (!active_) return;
    PyObject* cur = swap_callback(prev_);  // steals prev_
    Py_XDECREF(cur);
  }
  CallbackScope(const CallbackScope&) = delete;
  CallbackScope& operator=(const CallbackScope&) = delete;

 private:
  PyObject* prev_ = nullptr;  // strong while active_
  bool active_ = false;
};

}  // namespace xc
