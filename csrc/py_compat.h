// py_compat.h — every CPython-version difference xcompile._C depends on, in one place.
//
// This is the ONLY header with PY_VERSION_HEX #ifs and the ONLY one that includes CPython
// internals (Py_BUILD_CORE). Everything else calls the small inline functions below.
// Supported: CPython 3.11, 3.12 and 3.13.
//
// Frame layout at the moment the PEP 523 hook is entered (all three versions):
//
//   _PyInterpreterFrame (on the thread's data stack, pushed by _PyEval_Vector)
//   ├─ code        strong   3.11 and 3.12 f_code / 3.13 f_executable (the code object here)
//   ├─ function    strong   3.11 f_func / 3.12 and 3.13 f_funcobj  -> func_closure (free vars)
//   ├─ globals     borrowed f_globals      builtins  borrowed f_builtins
//   ├─ frame_obj   NULL at entry (nobody has asked for a PyFrameObject yet)
//   └─ localsplus  [arg0 .. argN-1, NULL...]  strong; MAKE_CELL / COPY_FREE_VARS have not run,
//                  so arguments sit raw in their slots in co_varnames order.
//
// Who pops a frame whose evaluation we skip (a cache hit returns without evaluating it):
//   3.11: _PyEval_Vector calls _PyEvalFrameClearAndPop after the eval function returns,
//         whatever it returned -> nothing to do.
//   3.12, 3.13: the evaluator pops its own frames (RETURN_VALUE / exit_unwind), _PyEval_Vector
//         does not -> we must clear and pop the frame ourselves (xc_frame_finish_skipped).
//
// Frame locals (PEP 667, 3.13) do not reach this file: the hook hands Python a new dict of the
// arguments read from localsplus, never a frame object's f_locals.
#pragma once

#include <Python.h>

#if PY_VERSION_HEX < 0x030B0000 || PY_VERSION_HEX >= 0x030E0000
#error "xcompile._C supports CPython 3.11 to 3.13 only"
#endif

#if PY_VERSION_HEX >= 0x030C0000
// Mixing core and non-core headers redefines this on 3.12 and 3.13 (cpython issue 105268).
#undef _PyGC_FINALIZED
#endif

#define Py_BUILD_CORE
#include <internal/pycore_frame.h>
#undef Py_BUILD_CORE

#include <cstdint>

namespace xc {

using Frame = _PyInterpreterFrame;
using EvalFrameFn = PyObject* (*)(PyThreadState*, _PyInterpreterFrame*, int);

// ---- frames ---------------------------------------------------------------------------------

// Borrowed.
inline PyCodeObject* frame_code(Frame* f) {
#if PY_VERSION_HEX >= 0x030D0000
  // f_executable is the code object for every frame that reaches the eval function.
  return (PyCodeObject*)f->f_executable;
#else
  return f->f_code;
#endif
}

// Borrowed. The function object being called (always set for frames owned by the thread).
inline PyFunctionObject* frame_func(Frame* f) {
#if PY_VERSION_HEX >= 0x030C0000
  return (PyFunctionObject*)f->f_funcobj;
#else
  return f->f_func;
#endif
}

inline PyObject* frame_globals(Frame* f) { return f->f_globals; }       // borrowed
inline PyObject* frame_builtins(Frame* f) { return f->f_builtins; }     // borrowed
inline PyObject** frame_localsplus(Frame* f) { return f->localsplus; }  // borrowed array

// True for a plain function-call frame that the caller owns on the thread's data stack.
inline bool frame_owned_by_thread(Frame* f) { return f->owner == FRAME_OWNED_BY_THREAD; }

// True if a PyFrameObject already exists for this frame (we then never skip evaluating it).
inline bool frame_has_frame_object(Frame* f) { return f->frame_obj != nullptr; }

// Finish a frame that our eval function decided not to evaluate (its result came from a cache
// entry, or an exception was raised before evaluation started). After this call `f` is gone.
inline void frame_finish_skipped(PyThreadState* tstate, Frame* f) {
#if PY_VERSION_HEX >= 0x030D0000
  // Mirror of CPython 3.13 clear_thread_frame() + _PyFrame_ClearExceptCode() (its
  // _PyFrame_ClearLocals part) + _PyThreadState_PopFrame(), which are not exported. frame_obj is
  // NULL here: the frame was never linked into the thread's frame chain, so nothing could have
  // materialized it (3.13's take_ownership branch cannot apply).
  tstate->c_recursion_remaining--;
  int stacktop = f->stacktop;
  f->stacktop = 0;
  for (int i = 0; i < stacktop; i++) Py_XDECREF(f->localsplus[i]);
  Py_CLEAR(f->f_locals);
  Py_DECREF(f->f_funcobj);
  Py_DECREF(f->f_executable);
  tstate->c_recursion_remaining++;
  PyObject** base = (PyObject**)f;
#elif PY_VERSION_HEX >= 0x030C0000
  // Mirror of CPython 3.12 clear_thread_frame() + _PyFrame_ClearExceptCode() +
  // _PyThreadState_PopFrame(), which are not exported. frame_obj is NULL here: the frame was
  // never linked into the thread's frame chain, so nothing could have materialized it.
  for (int i = 0; i < f->stacktop; i++) Py_XDECREF(f->localsplus[i]);
  Py_XDECREF(f->frame_obj);
  Py_XDECREF(f->f_locals);
  Py_DECREF(f->f_funcobj);
  Py_DECREF(f->f_code);
  PyObject** base = (PyObject**)f;
#endif
#if PY_VERSION_HEX >= 0x030C0000
  if (base == &tstate->datastack_chunk->data[0]) {
    _PyStackChunk* chunk = tstate->datastack_chunk;
    _PyStackChunk* previous = chunk->previous;
    tstate->datastack_top = &previous->data[previous->top];
    tstate->datastack_chunk = previous;
    PyObjectArenaAllocator alloc;
    PyObject_GetArenaAllocator(&alloc);
    alloc.free(alloc.ctx, chunk, chunk->size);
    tstate->datastack_limit = (PyObject**)(((char*)previous) + previous->size);
  } else {
    tstate->datastack_top = base;
  }
#else
  (void)tstate;
  (void)f;  // 3.11: _PyEval_Vector clears and pops it.
#endif
}

// ---- the interpreter's eval-frame function --------------------------------------------------

inline EvalFrameFn get_eval_frame() {
  return _PyInterpreterState_GetEvalFrameFunc(PyInterpreterState_Get());
}
// Setting _PyEval_EvalFrameDefault stores NULL in the interpreter (3.11 to 3.13), which turns
// CPython's inlined Python-to-Python calls back on.
inline void set_eval_frame(EvalFrameFn fn) {
  _PyInterpreterState_SetEvalFrameFunc(PyInterpreterState_Get(), fn);
}
inline PyObject* eval_frame_default(PyThreadState* ts, Frame* f, int throwflag) {
  return _PyEval_EvalFrameDefault(ts, f, throwflag);
}

// ---- code objects ---------------------------------------------------------------------------

inline Py_ssize_t code_request_extra_index(freefunc free_fn) {
#if PY_VERSION_HEX >= 0x030C0000
  return PyUnstable_Eval_RequestCodeExtraIndex(free_fn);
#else
  return _PyEval_RequestCodeExtraIndex(free_fn);
#endif
}
inline void* code_get_extra(PyObject* code, Py_ssize_t index) {
  void* extra = nullptr;
#if PY_VERSION_HEX >= 0x030C0000
  if (PyUnstable_Code_GetExtra(code, index, &extra) < 0) {
#else
  if (_PyCode_GetExtra(code, index, &extra) < 0) {
#endif
    PyErr_Clear();
    return nullptr;
  }
  return extra;
}
inline int code_set_extra(PyObject* code, Py_ssize_t index, void* extra) {
#if PY_VERSION_HEX >= 0x030C0000
  return PyUnstable_Code_SetExtra(code, index, extra);
#else
  return _PyCode_SetExtra(code, index, extra);
#endif
}

// Number of argument slots at the start of localsplus, in co_varnames order:
// positional + keyword-only + (*args) + (**kwargs).
inline int code_nargs(PyCodeObject* co) {
  return co->co_argcount + co->co_kwonlyargcount + ((co->co_flags & CO_VARARGS) ? 1 : 0) +
         ((co->co_flags & CO_VARKEYWORDS) ? 1 : 0);
}
// Borrowed. Name of argument slot i (i < code_nargs(co)); arguments lead co_localsplusnames.
inline PyObject* code_arg_name(PyCodeObject* co, int i) {
  return PyTuple_GET_ITEM(co->co_localsplusnames, i);
}

// ---- dicts ----------------------------------------------------------------------------------

// ma_version_tag changes on every mutation of a dict (3.11 to 3.13; deprecated but maintained on
// 3.12 and 3.13, where its low bits also carry watcher ids -- we only ever compare it for
// equality; 3.14 removes it).
//
// Except on 3.13, where an object whose __dict__ has been materialized may keep sharing its
// inline values with that dict: `obj.attr = v` then stores into those values directly, and
// neither ma_version_tag nor the dict's watchers hear of it (CPython 3.13.0). So on 3.13 a dict
// that still shares its owner's inline values is detached from them before its version is read,
// as `obj.__dict__ = obj.__dict__` does (_PyObject_SetManagedDict with the same dict: the dict
// takes a copy of the values and the object's inline values are marked invalid); the object
// keeps the same dict, and from then on every store goes through it and bumps its version.
#if PY_VERSION_HEX >= 0x030D0000
namespace detail {
// Mirror of the head of CPython 3.13's struct _dictvalues (internal/pycore_dict.h).
struct DictValuesHead {
  uint8_t capacity;
  uint8_t size;
  uint8_t embedded;
  uint8_t valid;
};
// A value no dict's version ever equals (CPython's count up from 0 in steps of 1 << 12).
inline uint64_t dict_unseen_version() {
  static uint64_t n = 0;
  return (uint64_t(3) << 62) | ++n;
}
}  // namespace detail
#endif

#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#endif
#if PY_VERSION_HEX >= 0x030D0000
namespace detail {
// The detach, once per dict (out of line and cold: inlined, its call made every guard's dict
// check a full function with saved registers, 2-2.7x the instructions of 3.11 per module tree).
#if defined(__GNUC__)
__attribute__((noinline, cold))
#endif
inline uint64_t dict_version_detaching(PyObject* d, DictValuesHead* values) {
  // the owner's inline values sit right after its PyObject header (_PyObject_InlineValues)
  PyObject* owner = (PyObject*)((char*)values - sizeof(PyObject));
  if (_PyObject_SetManagedDict(owner, d) < 0) {
    PyErr_Clear();
    return dict_unseen_version();  // never "unchanged" on the fast path
  }
  return ((PyDictObject*)d)->ma_version_tag;
}
}  // namespace detail
#endif

inline uint64_t dict_version(PyObject* d) {
#if PY_VERSION_HEX >= 0x030D0000
  auto* values = (detail::DictValuesHead*)((PyDictObject*)d)->ma_values;
  if (__builtin_expect(values != nullptr && values->embedded, 0)) {
    return detail::dict_version_detaching(d, values);
  }
#endif
  return ((PyDictObject*)d)->ma_version_tag;
}

// The version of a dict whose version dict_version() has read before: on 3.13 that read
// detached it from its owner's inline values, and a dict never shares them again (CPython
// materializes a new dict when an object with valid inline values needs one; a dict of its own
// is replaced, never re-embedded), so the per-call checks of watched dicts read the tag alone.
inline uint64_t dict_version_read_before(PyObject* d) { return ((PyDictObject*)d)->ma_version_tag; }
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

// ---- weak references ------------------------------------------------------------------------

// Borrowed: the referent of a weak reference, or None once it died (no call, no error).
inline PyObject* weakref_target(PyObject* ref) { return ((PyWeakReference*)ref)->wr_object; }

}  // namespace xc
