// code_cache.cpp — see code_cache.h for the ownership diagram.
#include "code_cache.h"

#include <algorithm>
#include <unordered_set>

#include "py_compat.h"

namespace xc {

Py_ssize_t g_code_extra_index = -1;

namespace {

// Every CodeExtra alive. Mutated only with the GIL held.
std::unordered_set<CodeExtra*>& registry() {
  static auto* r = new std::unordered_set<CodeExtra*>();  // leaked: outlives interpreter teardown
  return *r;
}

void release_entries(std::vector<EntryRef>& refs) {
  for (EntryRef& r : refs) Py_DECREF(r.obj);
  refs.clear();
}

// Called by CPython when a code object is deallocated (GIL held).
// NB: CPython 3.11/3.12 call every registered free function for every code object that has
// any co_extra at all (another user's, e.g. torch's dynamo), passing NULL for our empty slot.
void free_code_extra(void* p) {
  if (p == nullptr) return;
  auto* extra = static_cast<CodeExtra*>(p);
  registry().erase(extra);
  std::vector<EntryRef> refs;
  refs.swap(extra->entries);
  delete extra;
  release_entries(refs);  // may free other code objects, which re-enter free_code_extra
}

}  // namespace

bool init_code_cache() {
  if (g_code_extra_index >= 0) return true;
  g_code_extra_index = code_request_extra_index(free_code_extra);
  if (g_code_extra_index < 0) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "no free code extra index");
    return false;
  }
  return true;
}

CodeExtra* get_code_extra(PyObject* code) {
  return static_cast<CodeExtra*>(code_get_extra(code, g_code_extra_index));
}

CodeExtra* get_or_create_code_extra(PyObject* code) {
  if (!PyCode_Check(code)) {
    PyErr_SetString(PyExc_TypeError, "expected a code object");
    return nullptr;
  }
  CodeExtra* extra = get_code_extra(code);
  if (extra) return extra;
  extra = new CodeExtra();
  if (code_set_extra(code, g_code_extra_index, extra) < 0) {
    delete extra;
    return nullptr;
  }
  registry().insert(extra);
  return extra;
}

void cache_add(CodeExtra* extra, PyObject* obj, CacheEntry* entry) {
  Py_INCREF(obj);
  extra->entries.insert(extra->entries.begin(), EntryRef{obj, entry});
  extra->generation++;
}

bool cache_remove(CodeExtra* extra, PyObject* obj) {
  auto it = std::find_if(extra->entries.begin(), extra->entries.end(),
                         [obj](const EntryRef& r) { return r.obj == obj; });
  if (it == extra->entries.end()) return false;
  extra->entries.erase(it);
  extra->generation++;
  Py_DECREF(obj);
  return true;
}

void cache_move_to_front(CodeExtra* extra, size_t i) {
  if (i == 0 || i >= extra->entries.size()) return;
  auto first = extra->entries.begin();
  std::rotate(first, first + i, first + i + 1);
  extra->generation++;
}

void cache_clear(CodeExtra* extra) {
  std::vector<EntryRef> refs;
  refs.swap(extra->entries);
  extra->generation++;
  if (extra->state == STATE_NO_NEW) extra->state = STATE_NORMAL;
  release_entries(refs);
}

void cache_clear_all() {
  std::vector<EntryRef> refs;
  for (CodeExtra* extra : registry()) {
    refs.insert(refs.end(), extra->entries.begin(), extra->entries.end());
    extra->entries.clear();
    extra->generation++;
    if (extra->state == STATE_NO_NEW) extra->state = STATE_NORMAL;
  }
  release_entries(refs);
}

}  // namespace xc
