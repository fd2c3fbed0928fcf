// guard_leaves.h — the checks a guard node runs on its value.
//
//   leaf                   passes when                                    holds (strong refs)
//   type_match(tp)         Py_TYPE(v) is tp                               tp (weakly)
//   id_match(obj)          v is obj                                       obj (weakly if it takes
//                                                                         weak references)
//   equals_match(c)        type(v) is type(c) and v == c, compared in C;  c (and its items)
//                          c: None/bool/int/float/str/bytes/torch.dtype/
//                          torch.device/tuple of these (floats: NaN == NaN,
//                          0.0 != -0.0, because constants are baked into graphs)
//   length_check(n)        len(v) == n (list/tuple/dict fast paths)       -
//   float_compare(rels)    type(v) is float and v <op> c for each (op, c)  -
//                          of rels (a symbolic float's guards: lr >= 0,
//                          momentum != 0; Python's NaN semantics)
//   dict_keys(keys)        v is a dict whose keys are `keys`, in order     keys (a tuple)
//                          (identity first, else same type and ==)
//   dict_unchanged(d)      v is d and d unchanged                          d + a snapshot
//   module_tree(m)         v is m and no dict of m's tree changed          m (weakly) + watched
//                          (lazy: not the state_dict hook tables, nor     dicts (see below)
//                          the forward hooks' side tables while their
//                          hook table is empty: nn.Module's call never
//                          reads them)
//   tensor_match(t)        exact type, dispatch keys, dtype, device,       the type
//                          sizes, strides (strided only), requires_grad
//   global_state()         grad mode, inference mode, autocast (cpu, cuda), default dtype,
//   deterministic algorithms (root leaf)
//   shape_check(reads, p)  a relation over sizes/strides/offsets of slot tensors and slot ints
//                          (root leaf; dynamic shapes: guard_shapes.cpp)
//
// "Unchanged" for a dict (DictWatch): its version tag (ma_version_tag) equals the stored one;
// else its (key, value) pairs compare equal by identity and order with the snapshot taken at
// construction, and then the new version is stored (so `model.eval()` twice in a row costs one
// snapshot comparison, not a recompile). Snapshot values are held weakly when they take weak
// references (else strongly), so identity comparison is never fooled by a freed and reused
// address. A module's __dict__ is not held at all: it is read only while its module (held
// weakly) lives and still has it; other watched dicts are held weakly if they can be (hook
// OrderedDicts), else strongly (_parameters, _modules). Nothing in a guard keeps a module alive,
// not even a cycle through it (a bound method of the module among its attributes or hooks).
//
// Factories throw pybind11::type_error / std::invalid_argument (TypeError / ValueError in
// Python) for bad arguments.
// tensor_match / global_state live in guard_tensor.cpp, the only TU with torch headers.
#pragma once

#include <Python.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "guard_tree.h"

namespace xc {

// All object arguments are borrowed; leaves take their own references.
std::unique_ptr<Leaf> make_type_match(PyObject* type, std::string desc);
std::unique_ptr<Leaf> make_id_match(PyObject* obj, std::string desc);
std::unique_ptr<Leaf> make_equals_match(PyObject* value, std::string desc);
std::unique_ptr<Leaf> make_length_check(Py_ssize_t n, std::string desc);
// float_compare's relations (numbers shared with guards/spec.py, FLOAT_RELATIONS)
enum FloatRelation { FLOAT_LT = 0, FLOAT_LE = 1, FLOAT_GT = 2, FLOAT_GE = 3, FLOAT_NE = 4 };
std::unique_ptr<Leaf> make_float_compare(std::vector<std::pair<int, double>> relations,
                                         std::string desc);
// `keys`: a tuple of hashable constants (the dict's keys at trace time, in insertion order).
std::unique_ptr<Leaf> make_dict_keys(PyObject* keys, std::vector<bool> by_identity,
                                     std::string desc);
std::unique_ptr<Leaf> make_dict_unchanged(PyObject* dict, std::string desc);
// Calls module.modules() and reads torch.nn.modules.module at construction (Python-level).
// `lazy`: the state_dict hook tables, and the forward hooks' side tables while their hook table
// is empty, are not watched (guard_leaves.cpp, skip_table).
std::unique_ptr<Leaf> make_module_tree(PyObject* module, std::string desc, bool lazy = true);

// guard_tensor.cpp. `sizes` / `strides`, when given, replace the example's (nullopt entries are
// not checked: dynamic dimensions).
using DimSpec = std::optional<std::vector<std::optional<int64_t>>>;
std::unique_ptr<Leaf> make_tensor_match(PyObject* example, std::string desc, const DimSpec& sizes,
                                        const DimSpec& strides);
std::unique_ptr<RootLeaf> make_global_state(std::string desc);

// guard_shapes.cpp: one relation over sizes / strides / storage offsets of the tensors in slots
// and Python ints in slots (dynamic shapes); see the file for the program's opcodes.
enum ShapeReadKind : int { kSize = 0, kStride = 1, kStorageOffset = 2, kIntValue = 3 };
struct ShapeRead {
  int slot;
  int what;  // ShapeReadKind
  int dim;   // for kSize / kStride
};
std::unique_ptr<RootLeaf> make_shape_check(std::vector<ShapeRead> reads,
                                           std::vector<int64_t> program, int n_slots,
                                           std::string desc);

}  // namespace xc
