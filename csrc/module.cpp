// module.cpp — Python bindings of xcompile._C (bindings only; the work is in the other units).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <stdexcept>

#include "cache_entry.h"
#include "code_cache.h"
#include "compiled_function.h"
#include "context_exit.h"
#include "frame_hook.h"
#include "guard_accessors.h"
#include "guard_leaves.h"
#include "guard_tree.h"
#include "kernel_launch.h"
#include "tensor_alias.h"
#include "torch_compat.h"

namespace py = pybind11;
using namespace xc;

namespace {

using NodePtr = std::shared_ptr<GuardNode>;
using RootPtr = std::shared_ptr<RootGuard>;
using EntryPtr = std::shared_ptr<CacheEntry>;

// The code object of a code object or function.
PyObject* code_of(py::handle obj) {
  if (PyCode_Check(obj.ptr())) return obj.ptr();
  if (PyFunction_Check(obj.ptr())) return PyFunction_GET_CODE(obj.ptr());
  throw py::type_error("expected a code object or function");
}

CodeExtra* extra_of(py::handle obj) {
  CodeExtra* extra = get_or_create_code_extra(code_of(obj));
  if (!extra) throw py::error_already_set();
  return extra;
}

// Runs a check the way the hot path does, from Python-level frame pieces.
bool check_from_python(RootGuard& root, py::handle f_locals, py::handle f_globals,
                       py::handle f_builtins, py::handle closure) {
  if (!PyList_Check(f_locals.ptr()) && !PyTuple_Check(f_locals.ptr())) {
    throw py::type_error("f_locals must be a list or tuple");
  }
  FrameView view{PySequence_Fast_ITEMS(f_locals.ptr()), PySequence_Fast_GET_SIZE(f_locals.ptr()),
                 f_globals.ptr(), f_builtins.ptr(), closure.is_none() ? nullptr : closure.ptr()};
  SlotBuffer slots(root.n_slots());
  CallbackScope no_callback(nullptr);
  return root.check(view, slots.data());
}

py::object entry_fn(const CacheEntry& e, CacheEntry::Kind kind) {
  return e.kind == kind ? e.fn : py::none();
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "xcompile runtime: frame hook, code cache, guard trees, compiled-function fast path";
  if (!init_code_cache()) throw py::error_already_set();

  py::class_<GuardNode, NodePtr>(m, "GuardNode")
      .def(
          "attr",
          [](GuardNode& n, py::str name) { return n.child(make_attr_accessor(name.ptr())); },
          py::arg("name"))
      .def(
          "generic_attr",
          [](GuardNode& n, py::str name) {
            return n.child(make_generic_attr_accessor(name.ptr()));
          },
          py::arg("name"))
      .def(
          "item",
          [](GuardNode& n, py::object key) { return n.child(make_item_accessor(key.ptr())); },
          py::arg("key"))
      .def(
          "add_type_match",
          [](GuardNode& n, py::object tp, std::string desc) {
            n.add_leaf(make_type_match(tp.ptr(), std::move(desc)));
          },
          py::arg("tp"), py::arg("desc"))
      .def(
          "add_id_match",
          [](GuardNode& n, py::object obj, std::string desc) {
            n.add_leaf(make_id_match(obj.ptr(), std::move(desc)));
          },
          py::arg("obj"), py::arg("desc"))
      .def(
          "add_equals_match",
          [](GuardNode& n, py::object value, std::string desc) {
            n.add_leaf(make_equals_match(value.ptr(), std::move(desc)));
          },
          py::arg("value"), py::arg("desc"))
      .def(
          "add_float_compare",
          [](GuardNode& n, std::vector<std::pair<int, double>> relations, std::string desc) {
            n.add_leaf(make_float_compare(std::move(relations), std::move(desc)));
          },
          py::arg("relations"), py::arg("desc"))
      .def(
          "add_length_check",
          [](GuardNode& n, Py_ssize_t len, std::string desc) {
            n.add_leaf(make_length_check(len, std::move(desc)));
          },
          py::arg("n"), py::arg("desc"))
      .def(
          "add_tensor_match",
          [](GuardNode& n, py::object example, std::string desc, DimSpec sizes, DimSpec strides) {
            n.add_leaf(make_tensor_match(example.ptr(), std::move(desc), sizes, strides));
          },
          py::arg("example"), py::arg("desc"), py::kw_only(), py::arg("sizes") = py::none(),
          py::arg("strides") = py::none())
      .def(
          "add_module_tree",
          [](GuardNode& n, py::object module, std::string desc, bool lazy_hooks) {
            n.add_leaf(make_module_tree(module.ptr(), std::move(desc), lazy_hooks));
          },
          py::arg("module"), py::arg("desc"), py::kw_only(), py::arg("lazy_hooks") = true,
          "lazy_hooks: leave the state_dict hook tables, and the forward hooks' side tables while "
          "their hook table is empty, unwatched (nn.Module's call never reads them).")
      .def(
          "add_dict_keys",
          [](GuardNode& n, py::object keys, std::string desc, std::vector<bool> by_identity) {
            n.add_leaf(make_dict_keys(keys.ptr(), std::move(by_identity), std::move(desc)));
          },
          py::arg("keys"), py::arg("desc"), py::kw_only(),
          py::arg("by_identity") = std::vector<bool>{},
          "by_identity: one flag per key, set for a key compared by identity only (a tensor).")
      .def(
          "add_dict_unchanged",
          [](GuardNode& n, py::object d, std::string desc) {
            n.add_leaf(make_dict_unchanged(d.ptr(), std::move(desc)));
          },
          py::arg("d"), py::arg("desc"))
      .def("set_slot", &GuardNode::set_slot, py::arg("k"))
      .def_property_readonly("path", &GuardNode::path)
      .def("__repr__", [](const GuardNode& n) { return "<GuardNode " + n.path() + ">"; });

  py::class_<RootGuard, RootPtr>(m, "RootGuard")
      .def(py::init<int>(), py::arg("n_slots"))
      .def(
          "local",
          [](RootGuard& r, int index, std::string name) {
            return r.frame_child(make_local_accessor(index, std::move(name)));
          },
          py::arg("index"), py::arg("name"))
      .def(
          "global_",
          [](RootGuard& r, py::str name) {
            return r.frame_child(make_global_accessor(name.ptr()));
          },
          py::arg("name"))
      .def(
          "closure",
          [](RootGuard& r, int index, std::string name) {
            return r.frame_child(make_closure_accessor(index, std::move(name)));
          },
          py::arg("index"), py::arg("name"))
      .def(
          "call",
          [](RootGuard& r, py::object fn, py::tuple args, py::object kwargs, std::string name) {
            PyObject* kw = kwargs.is_none() ? nullptr : kwargs.ptr();
            return r.frame_child(make_call_accessor(fn.ptr(), args.ptr(), kw, std::move(name)));
          },
          py::arg("fn"), py::arg("args"), py::arg("kwargs"), py::arg("name"))
      .def(
          "closure_cell",
          [](RootGuard& r, int index, std::string name) {
            return r.frame_child(make_closure_cell_accessor(index, std::move(name)));
          },
          py::arg("index"), py::arg("name"))
      .def(
          "add_no_aliasing",
          [](RootGuard& r, std::vector<int> slots, std::string desc) {
            r.add_root_leaf(make_no_aliasing(std::move(slots), r.n_slots(), std::move(desc)));
          },
          py::arg("slots"), py::arg("desc"))
      .def(
          "add_same_object",
          [](RootGuard& r, std::vector<int> slots, std::string desc) {
            r.add_root_leaf(make_same_object(std::move(slots), r.n_slots(), std::move(desc)));
          },
          py::arg("slots"), py::arg("desc"))
      .def(
          "add_shape_check",
          [](RootGuard& r, std::vector<std::tuple<int, int, int>> reads,
             std::vector<int64_t> program, std::string desc) {
            std::vector<ShapeRead> rs;
            rs.reserve(reads.size());
            for (const auto& [slot, what, dim] : reads) rs.push_back(ShapeRead{slot, what, dim});
            r.add_root_leaf(
                make_shape_check(std::move(rs), std::move(program), r.n_slots(), std::move(desc)));
          },
          py::arg("reads"), py::arg("program"), py::arg("desc"),
          "A relation over (slot, what, dim) reads: what 0 size, 1 stride, 2 storage offset, 3 the "
          "slot's int; `program` is postfix (guard_shapes.cpp).")
      .def(
          "add_global_state",
          [](RootGuard& r, std::string desc) {
            r.add_root_leaf(make_global_state(std::move(desc)));
          },
          py::arg("desc"))
      .def("check", &check_from_python, py::arg("f_locals"), py::arg("f_globals"),
           py::arg("f_builtins"), py::arg("closure") = py::none())
      .def(
          "check_verbose",
          [](RootGuard& r, py::handle l, py::handle g, py::handle b, py::handle c) {
            bool ok = check_from_python(r, l, g, b, c);
            return py::make_tuple(ok, ok ? std::string() : r.last_failure());
          },
          py::arg("f_locals"), py::arg("f_globals"), py::arg("f_builtins"),
          py::arg("closure") = py::none())
      .def("rewatch", &RootGuard::rewatch,
           "Watching leaves (module trees, dicts) take the current state as their baseline.")
      .def(
          "weak_objects",
          [](const RootGuard& r) {
            py::list out;
            for (PyObject* o : r.weak_objects()) out.append(py::handle(o));
            return out;
          },
          "The objects the guard holds only weakly (identity guards, module trees), alive ones.")
      .def("last_failure", &RootGuard::last_failure)
      .def("dump", &RootGuard::dump)
      .def_property_readonly("n_slots", &RootGuard::n_slots);

  py::class_<CacheEntry, EntryPtr>(m, "CacheEntry")
      .def_static("graph", &CacheEntry::graph, py::arg("guard"), py::arg("compiled_fn"),
                  py::arg("n_inputs"), py::arg("output_plan"))
      .def_static("code", &CacheEntry::code, py::arg("guard"), py::arg("runner"))
      .def_readonly("guard", &CacheEntry::guard)
      .def_property_readonly(
          "kind",
          [](const CacheEntry& e) { return e.kind == CacheEntry::GRAPH ? "graph" : "code"; })
      .def_property_readonly("compiled_fn",
                             [](const CacheEntry& e) { return entry_fn(e, CacheEntry::GRAPH); })
      .def_property_readonly("runner",
                             [](const CacheEntry& e) { return entry_fn(e, CacheEntry::CODE); })
      .def_property_readonly("output_plan", [](const CacheEntry& e) { return e.plan_object; })
      .def_property_readonly("n_inputs", [](const CacheEntry& e) { return e.n_inputs; })
      .def_readonly("hits", &CacheEntry::hits)
      .def_readwrite("tag", &CacheEntry::tag,
                     "free for the compiler's notes (not used by the runtime)")
      .def_readwrite("deps", &CacheEntry::deps,
                     "kept alive with the entry (the compiler's weak references with callbacks)")
      .def_readwrite("owner", &CacheEntry::owner,
                     "backend key the entry was compiled for; None: used under any callback")
      .def(
          "usable_by", [](const CacheEntry& e, py::handle key) { return e.usable_by(key.ptr()); },
          "whether a callback with this backend key (None: any) runs the entry")
      .def("__repr__", [](const CacheEntry& e) {
        return std::string("<CacheEntry ") + (e.kind == CacheEntry::GRAPH ? "graph" : "code") +
               " hits=" + std::to_string(e.hits) + ">";
      });

  m.def(
      "cache_entries",
      [](py::handle code) {
        py::list out;
        if (CodeExtra* extra = get_code_extra(code_of(code))) {
          for (const EntryRef& r : extra->entries) out.append(py::handle(r.obj));
        }
        return out;
      },
      py::arg("code"), "Entries of a code object, most recently hit first.");
  m.def(
      "cache_add",
      [](py::handle code, py::handle entry) {
        CacheEntry* e = as_cache_entry(entry.ptr());
        if (!e) throw py::type_error("cache_add: entry must be a CacheEntry");
        cache_add(extra_of(code), entry.ptr(), e);
      },
      py::arg("code"), py::arg("entry"), "Insert an entry at the front of a code's cache.");
  m.def(
      "cache_remove",
      [](py::handle code, py::handle entry) {
        CodeExtra* extra = get_code_extra(code_of(code));
        return extra != nullptr && cache_remove(extra, entry.ptr());
      },
      py::arg("code"), py::arg("entry"),
      "Drop one entry from a code's cache; whether it was there.");
  m.def(
      "cache_clear",
      [](py::handle code) {
        if (CodeExtra* extra = get_code_extra(code_of(code))) cache_clear(extra);
      },
      py::arg("code"));
  m.def("cache_clear_all", &cache_clear_all,
        "Drop every cache entry (NO_NEW codes return to NORMAL; SKIP is kept).");
  m.def(
      "set_code_state",
      [](py::handle code, int state) {
        if (state < STATE_NORMAL || state > STATE_SKIP_ALL)
          throw py::value_error("state must be 0, 1, 2 or 3");
        extra_of(code)->state = state;
      },
      py::arg("code"), py::arg("state"));
  m.def(
      "get_code_state",
      [](py::handle code) {
        CodeExtra* extra = get_code_extra(code_of(code));
        return extra ? extra->state : static_cast<int>(STATE_NORMAL);
      },
      py::arg("code"));
  m.def(
      "set_callback",
      [](py::object cb) {
        if (!cb.is_none() && !PyCallable_Check(cb.ptr())) {
          throw py::type_error("set_callback: expected a callable or None");
        }
        PyObject* prev = swap_callback(cb.is_none() ? nullptr : cb.inc_ref().ptr());
        return prev ? py::reinterpret_steal<py::object>(prev) : py::none();
      },
      py::arg("callback"), "Set this thread's compile callback; returns the previous one.");
  m.def("get_callback", []() {
    return t_state.callback ? py::reinterpret_borrow<py::object>(t_state.callback) : py::none();
  });
  m.def("hook_installed", &hook_installed, "Whether the eval-frame hook is installed.");
  m.def(
      "set_force_eager", [](bool on) { g_force_eager = on; },
      "set_stance('force_eager'): run every compiled function's original code.");
  m.def("get_force_eager", []() { return g_force_eager; });
  m.attr("NORMAL") = static_cast<int>(STATE_NORMAL);
  m.attr("SKIP") = static_cast<int>(STATE_SKIP);
  m.attr("NO_NEW") = static_cast<int>(STATE_NO_NEW);
  m.attr("SKIP_ALL") = static_cast<int>(STATE_SKIP_ALL);

  init_tensor_alias(m);
  init_torch_compat(m);
  if (!init_compiled_function(m.ptr())) throw py::error_already_set();
  if (!init_context_exit(m.ptr())) throw py::error_already_set();
  if (!init_kernel_launch(m.ptr())) throw py::error_already_set();
}
