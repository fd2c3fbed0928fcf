// code_cache.h — per-code-object cache entries, stored on the code object's extra slot.
//
//   PyCodeObject ──co_extra[index]──► CodeExtra (owned by the code object; freed by
//   │                                  free_code_extra when the code object dies)
//   │                                  ├─ entries: [EntryRef ...]  most recently hit first
//   │                                  │    EntryRef.obj   strong ref to the Python CacheEntry
//   │                                  │    EntryRef.entry borrowed C++ view of obj (lives as long)
//   │                                  ├─ state: NORMAL | SKIP | NO_NEW | SKIP_ALL
//   │                                  └─ generation: bumped on every change of `entries`
//   └─ registry: every live CodeExtra, so cache_clear_all() can reach them all.
//
// Entries are walked by cache_entry.cpp. Code run while a walk is in progress (a guard's
// getattr, a compiled function) may add or clear entries; walkers hold a strong ref to the
// entry they are using and compare `generation` before touching the list again.
#pragma once

#include <Python.h>

#include <cstdint>
#include <vector>

namespace xc {

struct CacheEntry;

// SKIP_ALL: evaluated with the thread's callback unset, so nothing it calls is compiled either
// (torch's higher-order ops, which run torch.compile themselves when run eagerly).
enum CodeState : int { STATE_NORMAL = 0, STATE_SKIP = 1, STATE_NO_NEW = 2, STATE_SKIP_ALL = 3 };

struct EntryRef {
  PyObject* obj;      // strong
  CacheEntry* entry;  // borrowed from obj
};

struct CodeExtra {
  std::vector<EntryRef> entries;
  int state = STATE_NORMAL;
  uint64_t generation = 0;
};

extern Py_ssize_t g_code_extra_index;

// Requests the code extra index. Call once at module init. Returns false with an error set.
bool init_code_cache();

// Borrowed, or NULL when the code object has no cache state yet. Never raises.
CodeExtra* get_code_extra(PyObject* code);
// Borrowed; creates the state on first use. NULL with an error set on failure.
CodeExtra* get_or_create_code_extra(PyObject* code);

// Inserts at the front. `obj` is borrowed (a new reference is taken).
void cache_add(CodeExtra* extra, PyObject* obj, CacheEntry* entry);
// Removes the entry `obj` (borrowed) if present; returns whether it was there. The reference is
// released after the list no longer holds it (deallocation may run arbitrary code).
bool cache_remove(CodeExtra* extra, PyObject* obj);
// Moves entries[i] to the front.
void cache_move_to_front(CodeExtra* extra, size_t i);
// Removes all entries of one code / of every code. Entry objects are released only after the
// lists are empty (their deallocation may run arbitrary code). Codes in state NO_NEW return to
// NORMAL; SKIP is kept (it marks code that must never be compiled).
void cache_clear(CodeExtra* extra);
void cache_clear_all();

}  // namespace xc
