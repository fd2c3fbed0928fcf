// guard_tree.h — the guard tree of one cache entry, evaluated in C++ on every call.
//
//   RootGuard (n_slots)
//   ├─ pre leaves   RootLeaf*   frame-wide checks that need no values (global state)
//   ├─ children     GuardNode   one per frame accessor (local / global / closure), memoized
//   │   GuardNode
//   │   ├─ accessor   how to get this node's value from its parent's (guard_accessors.h)
//   │   ├─ leaves     Leaf*      checks on the value (guard_leaves.h); last failed first
//   │   ├─ children   GuardNode  attr / item edges, memoized by key
//   │   └─ slots      value is stored into slots[k] when the whole tree passes
//   └─ post leaves  RootLeaf*   checks over the filled slots (no aliasing, same object)
//
// Ownership: the root owns its children (shared_ptr, so Python handles to nodes stay valid), a
// node owns its accessor, leaves and children. Leaves own strong refs to whatever they compare
// against, except user objects compared by identity (ID_MATCH objects, TYPE_MATCH classes, the
// root module of MODULE_TREE): those are held through weak references (weak_objects()), so a
// guard never keeps a module, function or class alive, and an object that died fails the
// check even when a new object took its address. Values are fetched once per check: a fetch
// returns a new reference that the node releases after its subtree is checked; slots hold their
// own strong references.
//
// A check never raises: a fetch or leaf error is cleared and the guard fails. The failing leaf
// (or node, for a failed fetch) is remembered as the root's last failure and moved to the front
// of its list, so the guard that failed last is checked first next time.
#pragma once

#include <Python.h>

#include <memory>
#include <string>
#include <vector>

namespace xc {

// Clears the error of a failed guard (guards never raise). A KeyboardInterrupt raised by Python
// code a guard ran (a property, __len__, __eq__) is re-armed with PyErr_SetInterrupt so Ctrl-C
// still reaches the program at its next bytecode instead of being swallowed.
inline void clear_guard_error() {
  if (PyErr_ExceptionMatches(PyExc_KeyboardInterrupt)) {
    PyErr_Clear();
    PyErr_SetInterrupt();
  } else {
    PyErr_Clear();
  }
}

// What a check reads from one frame. All pointers borrowed for the duration of the check.
struct FrameView {
  PyObject* const* locals;  // argument values in co_varnames order (entries may be NULL)
  Py_ssize_t n_locals;
  PyObject* globals;   // dict
  PyObject* builtins;  // dict
  PyObject* closure;   // tuple of cells, or NULL
};

// A check on one value.
class Leaf {
 public:
  explicit Leaf(std::string desc) : desc_(std::move(desc)) {}
  virtual ~Leaf() = default;
  // `value` is borrowed and never NULL. Must return with no error set.
  virtual bool check(PyObject* value) = 0;
  // Leaves that watch mutable state (dict versions, module trees) take its current state as
  // the new baseline: called after the cache entry's own side effects changed that state.
  virtual void rewatch() {}
  // The objects this leaf holds only weakly (borrowed; those still alive are appended). A cache
  // entry drops itself from its code's cache when one of them dies (see convert_frame.py).
  virtual void weak_objects(std::vector<PyObject*>& out) const { (void)out; }
  const std::string& desc() const { return desc_; }

 private:
  std::string desc_;
};

// A frame-wide check. `slots` (borrowed array of n_slots, entries may be NULL) is filled when
// the leaf runs after the tree (needs_slots() == true).
class RootLeaf {
 public:
  explicit RootLeaf(std::string desc) : desc_(std::move(desc)) {}
  virtual ~RootLeaf() = default;
  virtual bool needs_slots() const = 0;
  virtual bool check(PyObject* const* slots) = 0;
  const std::string& desc() const { return desc_; }

 private:
  std::string desc_;
};

// How a node's value is obtained from its parent's value (or from the frame, at the root).
class Accessor {
 public:
  virtual ~Accessor() = default;
  // New reference, or NULL (an error may be set; the caller clears it).
  // `parent` is borrowed; NULL for frame accessors.
  virtual PyObject* fetch(PyObject* parent, const FrameView& frame) const = 0;
  // The source expression of the value, e.g. "L['x']", parent + ".weight", parent + "[0]".
  virtual std::string path(const std::string& parent) const = 0;
  // Same accessor (memoization key): same kind and equal key of the same type.
  virtual bool same(const Accessor& other) const = 0;
};

struct CheckCtx {
  PyObject** slots;                      // strong refs, owned by the caller
  const std::string* failure = nullptr;  // desc of what failed (owned by the tree)
};

class GuardNode {
 public:
  GuardNode(std::unique_ptr<Accessor> accessor, std::string path, int n_slots);

  // Memoized child: an equal accessor returns the existing node.
  std::shared_ptr<GuardNode> child(std::unique_ptr<Accessor> accessor);
  void add_leaf(std::unique_ptr<Leaf> leaf);
  void set_slot(int k);  // throws std::out_of_range

  // Fetches this node's value from `parent` and checks the subtree.
  bool check(PyObject* parent, const FrameView& frame, CheckCtx& ctx);
  // Checks leaves and children against an already fetched `value` (borrowed; NULL only for
  // the root's frame node, which has no leaves and no slots) and fills this node's slots.
  bool check_value(PyObject* value, const FrameView& frame, CheckCtx& ctx);
  void dump(std::string& out, int indent) const;
  void dump_children(std::string& out, int indent) const;
  void rewatch();                                        // Leaf::rewatch on this subtree
  void weak_objects(std::vector<PyObject*>& out) const;  // Leaf::weak_objects on this subtree
  const std::string& path() const { return path_; }
  int n_slots() const { return n_slots_; }

 private:
  std::unique_ptr<Accessor> accessor_;  // NULL for the root's frame node
  std::vector<std::unique_ptr<Leaf>> leaves_;
  std::vector<std::shared_ptr<GuardNode>> children_;
  std::vector<int> slots_;
  std::string path_;
  std::string fetch_failure_;  // desc used when the accessor fails
  int n_slots_;
};

class RootGuard {
 public:
  explicit RootGuard(int n_slots);

  std::shared_ptr<GuardNode> frame_child(std::unique_ptr<Accessor> accessor);
  void add_root_leaf(std::unique_ptr<RootLeaf> leaf);

  // Fills `slots` (n_slots entries, all NULL on entry) and returns true when every guard
  // passes. On failure the slots are released (all NULL again) and last_failure() is set.
  bool check(const FrameView& frame, PyObject** slots);

  int n_slots() const { return n_slots_; }
  std::string last_failure() const { return last_failure_ ? *last_failure_ : std::string(); }
  std::string dump() const;
  // Every watching leaf re-baselines (after side effects the entry applied to watched state).
  void rewatch() { frame_.rewatch(); }
  // Every object the tree's leaves hold weakly and that is still alive (borrowed).
  std::vector<PyObject*> weak_objects() const {
    std::vector<PyObject*> out;
    frame_.weak_objects(out);
    return out;
  }

 private:
  bool fail(const std::string* what, PyObject** slots);

  int n_slots_;
  std::vector<std::unique_ptr<RootLeaf>> pre_leaves_;
  GuardNode frame_;  // pseudo node without a value; its children are the frame accessors
  std::vector<std::unique_ptr<RootLeaf>> post_leaves_;
  const std::string* last_failure_ = nullptr;
};

// Pairwise-distinct objects in the given slots (identity).
std::unique_ptr<RootLeaf> make_no_aliasing(std::vector<int> slots, int n_slots, std::string desc);
// All given slots hold the very same object (an input that was passed twice at trace time).
std::unique_ptr<RootLeaf> make_same_object(std::vector<int> slots, int n_slots, std::string desc);

// A stack buffer of n strong-reference slots (all NULL), released on destruction.
class SlotBuffer {
 public:
  explicit SlotBuffer(int n) : n_(n) {
    if (n > kSmall) {
      big_.reset(new PyObject*[n]);
      data_ = big_.get();
    }
    for (int i = 0; i < n; i++) data_[i] = nullptr;
  }
  ~SlotBuffer() { clear(); }
  void clear() {
    for (int i = 0; i < n_; i++) Py_CLEAR(data_[i]);
  }
  PyObject** data() { return data_; }
  SlotBuffer(const SlotBuffer&) = delete;
  SlotBuffer& operator=(const SlotBuffer&) = delete;

 private:
  static constexpr int kSmall = 8;
  PyObject* small_[kSmall];
  std::unique_ptr<PyObject*[]> big_;
  PyObject** data_ = small_;
  int n_;
};

}  // namespace xc
