"""The generated Python ``call`` that allocates buffers and launches kernels in order.

It is the whole per-call cost of a compiled graph, so everything that can be decided at
compile time is: sizes, strides and dtypes are literals, kernels and extern ops are
globals, buffers whose last reader has run are reused or dropped.  Kernels take raw data
pointers (C++) or tensors (Triton).
"""
from __future__ import annotations

import dataclasses
import math
import re
import struct
from typing import Any, Callable

import sympy
import torch
from torch.utils import _pytree as pytree

from .. import _C, config
from .fusion import Group
from .ir import ExternNode, KernelGraph, TensorRef, contiguous_strides, raise_index_error, same_strides
from .plan import Plan
from .sizes import FLOAT_NAME, FloatArg, SymbolicUnsupported, input_symbols, is_symbolic, known, nonzero, pyexpr


@dataclasses.dataclass
class Kernel:
    name: str
    kind: str                          # "cpp" | "triton"
    fn: Callable                       # takes data pointers (cpp) or tensors (triton)
    params: list[tuple[str, bool]]     # (buffer, written), in argument order
    source: str                        # for XCOMPILE_LOGS=output_code
    # index checks (ir.IndexCheck per site): the kernel then returns 0, or an error code --
    # 1 + site from C++ (the bad index from ``bad_index()``), (site, index) from Triton
    checks: list = dataclasses.field(default_factory=list)
    bad_index: Callable | None = None
    sizes: list[str] = dataclasses.field(default_factory=list)   # size symbols passed after the pointers

    def raise_error(self, code, scope: dict | None = None) -> None:
        """``scope``: the wrapper's locals, where its size symbols have this call's values."""
        if isinstance(code, tuple):
            site, index = code
        else:
            assert self.bad_index is not None       # a C++ kernel with checks has one
            site, index = code - 1, self.bad_index()
        raise_index_error(self.checks, site, index, scope)


class _Globals:
    def __init__(self):
        self.values: dict[str, Any] = {}
        self._by_id: dict[int, str] = {}

    def add(self, value, hint: str) -> str:
        key = id(value)
        if key in self._by_id:
            return self._by_id[key]
        name = hint
        i = 0
        while name in self.values:
            i += 1
            name = f"{hint}_{i}"
        self.values[name] = value
        self._by_id[key] = name
        return name


def _py(v) -> str:
    """A size, or a tuple of sizes, as Python source (symbolic ones name the call's sizes)."""
    if isinstance(v, (list, tuple)):
        inner = ", ".join(_py(x) for x in v)
        if isinstance(v, tuple):
            return f"({inner},)" if len(v) == 1 else f"({inner})"
        return f"[{inner}]"
    if isinstance(v, sympy.Basic):
        return pyexpr(v)
    return repr(v)


def _f64_bits(v: float) -> int:
    """A float's IEEE double bits as a signed int64 (how a kernel's double argument travels)."""
    return _I64.unpack(_F64.pack(v))[0]


_F64, _I64 = struct.Struct("<d"), struct.Struct("<q")


def _literal(v, g: _Globals) -> str:
    if v is None or isinstance(v, (bool, int, str)):
        return repr(v)
    if isinstance(v, FloatArg):
        return v.name
    if isinstance(v, sympy.Basic):
        return pyexpr(v)
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) else g.add(v, "fconst")
    if isinstance(v, (list, tuple)):
        inner = ", ".join(_literal(x, g) for x in v)
        if isinstance(v, tuple):
            return f"({inner},)" if len(v) == 1 else f"({inner})"
        return f"[{inner}]"
    if isinstance(v, torch.dtype):
        return g.add(v, str(v).replace("torch.", ""))
    return g.add(v, "const")


def _tensor(ref: TensorRef, graph: KernelGraph | None = None) -> str:
    if ref.view is None:
        return ref.name
    size, stride, offset = ref.view
    buf = graph.buffers.get(ref.name) if graph is not None else None
    if buf is not None and buf.kind == "computed" and offset == 0 and \
            math.prod(size) == buf.layout.numel and \
            same_strides(buf.layout.size, buf.layout.stride, contiguous_strides(buf.layout.size)) and \
            same_strides(size, stride, contiguous_strides(size)):
        dims = ", ".join(_py(n) for n in size) if size else "()"
        return f"{ref.name}.view({dims})"        # a reshape of a buffer we allocated: cheaper
    if buf is not None and buf.kind == "input":
        # view offsets are relative to the input's own offset, which may change between calls
        if offset == 0:
            return f"as_strided({ref.name}, {_py(tuple(size))}, {_py(tuple(stride))})"
        return f"as_strided({ref.name}, {_py(tuple(size))}, {_py(tuple(stride))}, " \
            f"{ref.name}.storage_offset() + {_py(offset)})"
    return f"as_strided({ref.name}, {_py(tuple(size))}, {_py(tuple(stride))}, {_py(offset)})"


aten = torch.ops.aten

# Hot extern ops whose torch.* binding takes the overload's own arguments: the generated Python
# binding parses them about 1 µs faster than the generic OpOverload entry point.
_BINDINGS = {aten.addmm.default: torch.addmm, aten.mm.default: torch.mm, aten.bmm.default: torch.bmm,
             aten.baddbmm.default: torch.baddbmm, aten.convolution.default: torch.convolution}
if hasattr(torch._C._VariableFunctions, "_scaled_dot_product_flash_attention_for_cpu"):
    _BINDINGS[aten._scaled_dot_product_flash_attention_for_cpu.default] = \
        torch._C._VariableFunctions._scaled_dot_product_flash_attention_for_cpu


def _op_callable(op):
    """The cheapest way to call an ATen overload: its torch.* binding where it takes the same
    arguments, else its C++ entry point, skipping Python dispatch."""
    return _BINDINGS.get(op) or getattr(op, "_op", op)


def _as_linear(node: ExternNode, graph: KernelGraph):
    """``addmm(bias, x, w.t())`` / ``mm(x, w.t())`` with ``w`` a whole row-major matrix (a Linear
    layer): (x, w, bias) for ``linear(x, w, bias)`` -- the very same addmm/mm call inside ATen,
    without building the transposed view in Python first; else None."""
    if node.op is aten.addmm.default and len(node.args) == 3 and \
            all(node.kwargs.get(k, 1) == 1 for k in ("beta", "alpha")) and set(node.kwargs) <= {"beta", "alpha"}:
        bias, x, w = node.args
    elif node.op is aten.mm.default and len(node.args) == 2 and not node.kwargs:
        (x, w), bias = node.args, None
    else:
        return None
    if not isinstance(w, TensorRef) or w.view is None or not isinstance(x, TensorRef):
        return None
    (k, n), (s0, s1), offset = w.view
    lay = graph.buffers[w.name].layout
    if offset != 0 or lay.offset != 0 or tuple(lay.size) != (n, k) or \
            not same_strides((k, n), (s0, s1), (1, k)) or not same_strides((n, k), lay.stride, (k, 1)):
        return None
    return x, TensorRef(w.name), bias


def generate_wrapper(graph: KernelGraph, plan: Plan, kernels: dict[Group, Kernel],
                     bound: dict[int, torch.Tensor], boxed: bool = False) -> tuple[str, dict]:
    """The wrapper's source, ``def call(*inputs)``, and its globals. ``boxed``: also
    ``call_boxed(args)``, which takes its inputs in a list it empties and drops each input after
    its last use (a backward's saved activations are then freed as it goes, not at its end)."""
    g = _Globals()
    g.values.update(empty_strided=torch.empty_strided, as_strided=torch.as_strided)
    params: list[str] = []
    prologue: list[str] = []
    bits: set[str] = set()              # the floats kernels take
    for i, name in enumerate(graph.inputs):
        pname = name or (f"int{i}" if i in graph.sym_inputs else graph.float_inputs.get(i, f"_unused{i}"))
        if i in bound:
            g.values[pname] = bound[i]      # a global of the wrapper: no per-call work
        else:
            params.append(pname)
    for name, t in graph.constants.items():
        g.values[name] = t
    # always explicit: a `with torch.device(...)` around the call must not move the buffers
    device = g.add(graph.device, "device")
    donors = {d for s in plan.steps for _, d in s.allocs if d}
    lines = []
    for step in plan.steps:
        item = step.item
        if isinstance(item, Group):
            k = kernels[item]
            lines.append(f"# {k.name} ({k.kind}): {', '.join(item.origins)}")
            for b, donor in step.allocs:
                if b in plan.arena:
                    lay = graph.buffers[b].layout
                    lines.append(f"{b} = _arena_p + {plan.arena[b]}  # in the arena: {_py(lay.size)}, "
                                 f"{_py(lay.stride)}, {str(lay.dtype).replace('torch.', '')}")
                elif donor and plan.inplace.get(b) == donor:
                    lines.append(f"{b} = {donor}  # written in place into the input {donor}")
                elif donor:
                    lines.append(f"{b} = {donor}  # reuses {donor}'s memory")
                else:
                    lay = graph.buffers[b].layout
                    lines.append(f"{b} = empty_strided({_py(lay.size)}, {_py(lay.stride)}, "
                                 f"dtype={_literal(lay.dtype, g)}, device={device})")
            fname = g.add(k.fn, k.name)
            floats = [s for s in k.sizes if FLOAT_NAME.fullmatch(s)]
            if floats and not (k.kind == "cpp" and isinstance(k.fn, _C.KernelLauncher)):
                raise SymbolicUnsupported(f"a {k.kind} kernel without the launcher takes the floats {floats}")
            bits.update(floats)
            sizes = [f"{s}_bits" if s in floats else s for s in k.sizes]   # (a double's bits as an int64)
            if k.kind == "cpp" and not isinstance(k.fn, _C.KernelLauncher):       # (ctypes: pointers)
                args = ", ".join([f"{b}.data_ptr()" for b, _ in k.params] + sizes)
            else:
                args = ", ".join([b for b, _ in k.params] + sizes)
            numel = math.prod(item.xs)
            scope = ", locals()" if k.sizes else ""      # (an index error names this call's sizes)
            if is_symbolic(numel) and not nonzero(numel):
                lines.append(f"if {pyexpr(numel)} > 0:")       # (an empty space runs nothing)
                call = f"{fname}({args})"
                lines.append(f"    if (_err := {call}):" if k.checks else f"    {call}")
                if k.checks:
                    lines.append(f"        {g.add(k, k.name + '_info')}.raise_error(_err{scope})")
            elif numel == 0:
                # nothing to compute (and, as in eager, no index to check): its outputs are empty
                lines.append(f"pass  # not run: the iteration space {list(item.xs)} is empty")
            elif k.checks:
                # eager raises before writing anything; so do we (mutated inputs are copied at the end)
                lines.append(f"if (_err := {fname}({args})):")
                lines.append(f"    {g.add(k, k.name + '_info')}.raise_error(_err{scope})")
            else:
                lines.append(f"{fname}({args})")
        else:
            lines += _extern_lines(item, g, graph)
        dead = [b for b in step.frees if b not in donors]
        if dead:
            lines.append(f"del {', '.join(dead)}")
    if plan.arena_bytes:
        lines[:0] = [f"_arena = empty_strided(({plan.arena_bytes},), (1,), dtype={_literal(torch.uint8, g)}, "
                     f"device={device})", "_arena_p = _arena.data_ptr()"]
    # (values a kernel stored straight into their input need no copy: plan.inplace)
    copies = [(pos, ref) for pos, ref in graph.mutations if plan.inplace.get(ref.name) != graph.inputs[pos]]
    if len(copies) > 1:            # one call for all (an optimizer writes hundreds of inputs)
        g.values["_foreach_copy_"] = torch._foreach_copy_
        targets = ", ".join(str(graph.inputs[pos]) for pos, _ in copies)
        sources = ", ".join(_tensor(ref, graph) for _, ref in copies)
        lines.append(f"_foreach_copy_([{targets}], [{sources}])")
    for pos, ref in copies[:1] if len(copies) == 1 else ():
        lines.append(f"{graph.inputs[pos]}.copy_({_tensor(ref, graph)})")
    outs = [(_tensor(o, graph) if isinstance(o, TensorRef) else _literal(o, g)) for o in graph.outputs]
    ret = f"({', '.join(outs)}{',' if len(outs) == 1 else ''})"
    floats = []                         # the symbolic floats: computed as the traced code computed them
    for name, fn, fargs in graph.float_exprs:
        floats.append(f"{name} = {g.add(fn, 'scalar_op')}({', '.join(_literal(a, g) for a in fargs)})")
    if bits:
        g.values["_f64_bits"] = _f64_bits
        floats += [f"{name}_bits = _f64_bits({name})" for name in sorted(bits)]
    body = _bind_sizes(graph, lines + [f"return {ret}"]) + prologue + floats + lines + [f"return {ret}"]
    src = f"def call({', '.join(params)}):\n" + "\n".join("    " + ln for ln in body) + "\n"
    if boxed:
        unpack = [f"{', '.join(params)}{',' if len(params) == 1 else ''} = args", "args.clear()"] if params else []
        src += "\n\ndef call_boxed(args):\n" + "\n".join(
            "    " + ln for ln in unpack + _dropping_inputs(body, params)) + "\n"
    return src, g.values


def _dropping_inputs(body: list[str], names: list[str]) -> list[str]:
    """``body`` with ``del name`` after the last top-level statement that mentions each of
    ``names`` (a statement is a line and the indented lines under it), and at the top for the
    names it never mentions."""
    stmts: list[list[str]] = []
    for ln in body:
        if ln.startswith((" ", "\t")) and stmts:
            stmts[-1].append(ln)
        else:
            stmts.append([ln])
    last: dict[str, int] = {}
    wanted = set(names)
    for k, st in enumerate(stmts):
        for ln in st:
            for ident in _IDENT.findall(ln):
                if ident in wanted:
                    last[ident] = k
    unused = [n for n in names if n not in last]
    out = [f"del {', '.join(unused)}"] if unused else []
    for k, st in enumerate(stmts):
        out += st
        dead = [n for n in names if last.get(n) == k]
        if dead and not st[0].startswith("return "):
            out.append(f"del {', '.join(dead)}")
    return out


def _bind_sizes(graph: KernelGraph, lines: list[str]) -> list[str]:
    """``s0 = arg0.size(0)``: the size symbols the wrapper's code names, read from its inputs."""
    where = input_symbols(graph)
    if not where and not graph.sym_inputs:
        return []
    used = {i for ln in lines for i in _IDENT.findall(ln)}
    out = []
    for s, src in sorted(where.items(), key=lambda kv: kv[0].name):
        if s.name not in used:
            continue
        pos = src[1]
        name = graph.inputs[pos] or f"int{pos}"
        if src[0] == "int":
            out.append(f"{s.name} = {name}")
        else:
            out.append(f"{s.name} = {name}.{src[0]}({src[2]})")
    bound = {s.name for s in where}
    unbound = sorted(n for n in used if _SIZE_NAME.fullmatch(n) and n not in bound)
    if unbound:
        raise SymbolicUnsupported(f"sizes {unbound} are not read from any input")
    return out


_IDENT = re.compile(r"[A-Za-z_]\w*")
_SIZE_NAME = re.compile(r"[su]\d+")


def _extern_lines(node: ExternNode, g: _Globals, graph: KernelGraph) -> list[str]:
    fname = g.add(_op_callable(node.op), "aten_" + str(getattr(node.op, "__name__", "op")).replace(".", "_"))

    def arg(v):
        if isinstance(v, TensorRef):
            return _tensor(v, graph)
        if isinstance(v, (list, tuple)) and any(isinstance(x, TensorRef) for x in pytree.tree_leaves(v)):
            inner = ", ".join(arg(x) for x in v)
            return f"[{inner}]" if isinstance(v, list) else f"({inner},)"
        return _literal(v, g)
    args = [arg(a) for a in node.args] + [f"{k}={arg(v)}" for k, v in node.kwargs.items()]
    call = f"{fname}({', '.join(args)})"
    linear = _as_linear(node, graph)
    if linear is not None:
        call = f"{g.add(torch._C._nn.linear, 'linear')}({', '.join(arg(a) for a in linear)})"
    lines = [f"# extern: {', '.join(node.origins)}"]
    if len(node.outputs) == 1 and node.out_paths[0][1].is_leaf():
        lines.append(f"{node.outputs[0]} = {call}")
        return lines + _restride_lines(node, g, graph) + _check_lines(node, g, graph)
    tmp = f"{node.name}_result"
    lines.append(f"{tmp} = {call}")
    if node.out_paths and not node.out_paths[0][1].is_leaf():      # (a tuple of one tensor too)
        lines.append(f"{tmp} = {g.add(pytree.tree_leaves, 'tree_leaves')}({tmp})")
    for b, (i, _) in zip(node.outputs, node.out_paths):
        lines.append(f"{b} = {tmp}[{i}]")
    return lines + _restride_lines(node, g, graph) + _check_lines(node, g, graph)


# ATen ops whose result is always a fresh tensor with the strides their fake kernel gives
# (contiguous): their outputs need no stride check at run time.
_TRUSTED_LAYOUT = frozenset(f"aten.{n}.default" for n in ("mm", "addmm", "bmm", "baddbmm"))


def _restride_lines(node: ExternNode, g: _Globals, graph: KernelGraph) -> list[str]:
    """The kernels read an extern's outputs with the strides planned from its fake kernel, and
    some fake kernels disagree with the CPU kernel (max_unpool2d on channels-last input,
    native_layer_norm_backward on a transposed grad): an output with other strides than planned
    is copied into the planned layout (one tuple compare per output and call otherwise)."""
    if str(node.op) in _TRUSTED_LAYOUT:
        return []
    fix = g.add(_restride, "restride")
    out = []
    for b in node.outputs:
        lay = graph.buffers[b].layout
        if known(sympy.sympify(math.prod(lay.size)) <= 1):
            continue
        out.append(f"if {b}.stride() != {_py(lay.stride)}:")
        out.append(f"    {b} = {fix}({b}, {_py(lay.size)}, {_py(lay.stride)})")
    return out


def _restride(t: torch.Tensor, size, stride) -> torch.Tensor:
    if tuple(t.shape) != tuple(size):
        raise AssertionError(f"xcompile: extern result has size {tuple(t.shape)}, planned {tuple(size)}")
    if same_strides(size, t.stride(), stride):
        return t                      # only the strides of size-1 dims differ: same addresses
    return torch.empty_strided(size, stride, dtype=t.dtype, device=t.device).copy_(t)


def _check_lines(node: ExternNode, g: _Globals, graph: KernelGraph) -> list[str]:
    """Under XCOMPILE_CHECK=1: the extern's outputs have the layouts the kernels assume."""
    if not config.verify:
        return []
    check = g.add(_check_layout, "check_layout")
    out = []
    for b in node.outputs:
        lay = graph.buffers[b].layout
        out.append(f"{check}({b}, {str(node.origins[0])!r}, {b!r}, ({_py(lay.size)}, {_py(lay.stride)}))")
    return out


def _check_layout(t: torch.Tensor, op: str, name: str, expect=None) -> None:
    if expect is not None and (tuple(t.shape) != tuple(expect[0]) or
                               not same_strides(expect[0], t.stride(), expect[1])):
        raise AssertionError(f"xcompile: extern {op} returned {name} with size/stride "
                             f"{tuple(t.shape)}/{t.stride()}, kernels assume {expect}")


def build_wrapper(src: str, glb: dict) -> Callable:
    ns = dict(glb)
    exec(compile(src, "<xcompile wrapper>", "exec"), ns)  # noqa: S102  (our own generated code)
    fn = ns["call"]
    if "call_boxed" in ns:
        fn.boxed = ns["call_boxed"]
    return fn
