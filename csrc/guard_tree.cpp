// guard_tree.cpp — evaluation, memoization and dumping of guard trees (see guard_tree.h).
#include "guard_tree.h"

#include <algorithm>
#include <stdexcept>
#include <vector>

namespace xc {

namespace {

template <class T>
void move_to_front(std::vector<T>& v, size_t i) {
  if (i > 0) std::rotate(v.begin(), v.begin() + i, v.begin() + i + 1);
}

void indent_to(std::string& out, int indent) { out.append(static_cast<size_t>(indent) * 2, ' '); }

class NoAliasing final : public RootLeaf {
 public:
  NoAliasing(std::vector<int> slots, std::string desc)
      : RootLeaf(std::move(desc)), slots_(std::move(slots)) {}
  bool needs_slots() const override { return true; }
  bool check(PyObject* const* slots) override {
    const size_t n = slots_.size();
    if (n > kPairwise) return check_sorted(slots);
    for (size_t i = 0; i < n; i++) {
      PyObject* a = slots[slots_[i]];
      if (a == nullptr) continue;
      for (size_t j = i + 1; j < n; j++) {
        if (slots[slots_[j]] == a) return false;
      }
    }
    return true;
  }

 private:
  // Up to this many slots, every pair is compared; past it (an optimizer's 300 parameters, their
  // gradients and state: 1,500 tensors, 1.1 million pairs, a millisecond per call), the objects
  // are sorted and neighbours compared.
  static constexpr size_t kPairwise = 16;

  bool check_sorted(PyObject* const* slots) const {
    thread_local std::vector<PyObject*> objs;
    objs.clear();
    for (int k : slots_) {
      if (slots[k] != nullptr) objs.push_back(slots[k]);
    }
    std::sort(objs.begin(), objs.end());
    return std::adjacent_find(objs.begin(), objs.end()) == objs.end();
  }

  std::vector<int> slots_;
};

class SameObject final : public RootLeaf {
 public:
  SameObject(std::vector<int> slots, std::string desc)
      : RootLeaf(std::move(desc)), slots_(std::move(slots)) {}
  bool needs_slots() const override { return true; }
  bool check(PyObject* const* slots) override {
    PyObject* first = slots[slots_[0]];
    for (int k : slots_) {
      if (slots[k] != first || first == nullptr) return false;
    }
    return true;
  }

 private:
  std::vector<int> slots_;
};

void check_slots(const std::vector<int>& slots, int n_slots, const char* what) {
  for (int k : slots) {
    if (k < 0 || k >= n_slots) throw std::out_of_range(std::string(what) + ": slot out of range");
  }
}

}  // namespace

std::unique_ptr<RootLeaf> make_no_aliasing(std::vector<int> slots, int n_slots, std::string desc) {
  check_slots(slots, n_slots, "no_aliasing");
  return std::make_unique<NoAliasing>(std::move(slots), std::move(desc));
}

std::unique_ptr<RootLeaf> make_same_object(std::vector<int> slots, int n_slots, std::string desc) {
  check_slots(slots, n_slots, "same_object");
  if (slots.empty()) throw std::invalid_argument("same_object: needs at least one slot");
  return std::make_unique<SameObject>(std::move(slots), std::move(desc));
}

// ---- GuardNode ------------------------------------------------------------------------------

GuardNode::GuardNode(std::unique_ptr<Accessor> accessor, std::string path, int n_slots)
    : accessor_(std::move(accessor)),
      path_(std::move(path)),
      fetch_failure_("cannot read " + path_),
      n_slots_(n_slots) {}

std::shared_ptr<GuardNode> GuardNode::child(std::unique_ptr<Accessor> accessor) {
  for (auto& c : children_) {
    if (c->accessor_->same(*accessor)) return c;
  }
  std::string p = accessor->path(path_);
  children_.push_back(std::make_shared<GuardNode>(std::move(accessor), std::move(p), n_slots_));
  return children_.back();
}

void GuardNode::add_leaf(std::unique_ptr<Leaf> leaf) { leaves_.push_back(std::move(leaf)); }

void GuardNode::set_slot(int k) {
  if (k < 0 || k >= n_slots_) throw std::out_of_range("set_slot: slot out of range");
  if (std::find(slots_.begin(), slots_.end(), k) == slots_.end()) slots_.push_back(k);
}

bool GuardNode::check(PyObject* parent, const FrameView& frame, CheckCtx& ctx) {
  PyObject* value = accessor_->fetch(parent, frame);
  if (value == nullptr) {
    clear_guard_error();
    ctx.failure = &fetch_failure_;
    return false;
  }
  bool ok = check_value(value, frame, ctx);
  Py_DECREF(value);
  return ok;
}

bool GuardNode::check_value(PyObject* value, const FrameView& frame, CheckCtx& ctx) {
  for (size_t i = 0; i < leaves_.size(); i++) {
    if (!leaves_[i]->check(value)) {
      ctx.failure = &leaves_[i]->desc();
      move_to_front(leaves_, i);
      return false;
    }
  }
  for (size_t i = 0; i < children_.size(); i++) {
    if (!children_[i]->check(value, frame, ctx)) {
      move_to_front(children_, i);
      return false;
    }
  }
  for (int k : slots_) {
    Py_INCREF(value);
    Py_XSETREF(ctx.slots[k], value);
  }
  return true;
}

void GuardNode::rewatch() {
  for (auto& leaf : leaves_) leaf->rewatch();
  for (auto& c : children_) c->rewatch();
}

void GuardNode::weak_objects(std::vector<PyObject*>& out) const {
  for (auto& leaf : leaves_) leaf->weak_objects(out);
  for (auto& c : children_) c->weak_objects(out);
}

void GuardNode::dump(std::string& out, int indent) const {
  indent_to(out, indent);
  out += path_;
  if (!slots_.empty()) {
    out += "  -> slot";
    for (int k : slots_) out += " " + std::to_string(k);
  }
  out += "\n";
  for (auto& leaf : leaves_) {
    indent_to(out, indent + 1);
    out += leaf->desc();
    out += "\n";
  }
  dump_children(out, indent + 1);
}

void GuardNode::dump_children(std::string& out, int indent) const {
  for (auto& c : children_) c->dump(out, indent);
}

// ---- RootGuard ------------------------------------------------------------------------------

RootGuard::RootGuard(int n_slots) : n_slots_(n_slots), frame_(nullptr, "frame", n_slots) {
  if (n_slots < 0) throw std::invalid_argument("n_slots must be >= 0");
}

std::shared_ptr<GuardNode> RootGuard::frame_child(std::unique_ptr<Accessor> accessor) {
  return frame_.child(std::move(accessor));
}

void RootGuard::add_root_leaf(std::unique_ptr<RootLeaf> leaf) {
  (leaf->needs_slots() ? post_leaves_ : pre_leaves_).push_back(std::move(leaf));
}

bool RootGuard::fail(const std::string* what, PyObject** slots) {
  last_failure_ = what;
  for (int k = 0; k < n_slots_; k++) Py_CLEAR(slots[k]);
  return false;
}

bool RootGuard::check(const FrameView& frame, PyObject** slots) {
  for (size_t i = 0; i < pre_leaves_.size(); i++) {
    if (!pre_leaves_[i]->check(slots)) {
      const std::string* what = &pre_leaves_[i]->desc();
      move_to_front(pre_leaves_, i);
      return fail(what, slots);
    }
  }
  CheckCtx ctx{slots};
  if (!frame_.check_value(nullptr, frame, ctx)) return fail(ctx.failure, slots);
  for (size_t i = 0; i < post_leaves_.size(); i++) {
    if (!post_leaves_[i]->check(slots)) {
      const std::string* what = &post_leaves_[i]->desc();
      move_to_front(post_leaves_, i);
      return fail(what, slots);
    }
  }
  return true;
}

std::string RootGuard::dump() const {
  std::string out = "RootGuard(n_slots=" + std::to_string(n_slots_) + ")\n";
  for (auto& leaf : pre_leaves_) out += "  " + leaf->desc() + "\n";
  frame_.dump_children(out, 1);
  for (auto& leaf : post_leaves_) out += "  " + leaf->desc() + "\n";
  return out;
}

}  // namespace xc
