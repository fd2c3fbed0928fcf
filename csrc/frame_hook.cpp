// frame_hook.cpp — the PEP 523 eval-frame function and the per-thread callback (frame_hook.h).
#include "frame_hook.h"

#include "cache_entry.h"
#include "code_cache.h"
#include "py_compat.h"

namespace xc {

__thread ThreadState t_state = {nullptr, nullptr};

namespace {

// Both protected by the GIL.
int g_threads_with_callback = 0;
EvalFrameFn g_previous_eval_frame = nullptr;  // what was installed before us

constexpr int kNeverHooked = CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR;
constexpr int kFunctionBody = CO_OPTIMIZED | CO_NEWLOCALS;

PyObject* eval_frame_hook(PyThreadState* tstate, Frame* frame, int throwflag);

void install() {
  EvalFrameFn cur = get_eval_frame();
  if (cur == eval_frame_hook) return;
  g_previous_eval_frame = cur;
  set_eval_frame(eval_frame_hook);
}

void uninstall() {
  if (get_eval_frame() != eval_frame_hook) return;  // someone replaced us: leave theirs alone
  set_eval_frame(g_previous_eval_frame ? g_previous_eval_frame : eval_frame_default);
  g_previous_eval_frame = nullptr;
}

// Owns one strong reference for the lifetime of the hook's work on a frame.
struct Hold {
  explicit Hold(PyObject* o) : o(o) { Py_INCREF(o); }
  ~Hold() { Py_DECREF(o); }
  PyObject* o;
};

PyObject* eval_frame_hook(PyThreadState* tstate, Frame* frame, int throwflag) {
  PyObject* callback = t_state.callback;  // borrowed
  PyObject* skip_once = t_state.skip_code_once;
  t_state.skip_code_once = nullptr;
  PyCodeObject* code = frame_code(frame);
  if (callback == nullptr || g_force_eager || throwflag || skip_once == (PyObject*)code ||
      (code->co_flags & kNeverHooked) || (code->co_flags & kFunctionBody) != kFunctionBody ||
      !frame_owned_by_thread(frame) || frame_has_frame_object(frame)) {
    return eval_frame_default(tstate, frame, throwflag);
  }
  CodeExtra* extra = get_code_extra((PyObject*)code);
  const int state = extra ? extra->state : STATE_NORMAL;
  if (state == STATE_SKIP) return eval_frame_default(tstate, frame, throwflag);
  if (state == STATE_SKIP_ALL) {
    CallbackScope off(nullptr);
    return eval_frame_default(tstate, frame, throwflag);
  }

  Hold hold(callback);  // the walk may swap the thread's callback
  PyFunctionObject* func = frame_func(frame);
  FrameView view{frame_localsplus(frame), code_nargs(code), frame_globals(frame),
                 frame_builtins(frame), func ? func->func_closure : nullptr};
  PyObject* result = nullptr;
  bool done = run_cached(extra, view, callback, &result);
  if (!done && state == STATE_NORMAL) done = run_callback(callback, code, view, &result);
  if (!done) return eval_frame_default(tstate, frame, 0);
  frame_finish_skipped(tstate, frame);  // the frame is never evaluated
  return result;
}

}  // namespace

PyObject* swap_callback(PyObject* cb) {
  PyObject* prev = t_state.callback;
  t_state.callback = cb;
  if (prev == nullptr && cb != nullptr) {
    if (g_threads_with_callback++ == 0) install();
  } else if (prev != nullptr && cb == nullptr) {
    if (--g_threads_with_callback == 0) uninstall();
  }
  return prev;
}

bool hook_installed() { return get_eval_frame() == eval_frame_hook; }

bool g_force_eager = false;

}  // namespace xc
