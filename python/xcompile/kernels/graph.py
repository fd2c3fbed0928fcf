"""ATen FX graph -> KernelGraph: walks the graph once and calls the lowering table.

Every ATen compute op becomes a ``LoopNode`` with its own buffer (fusion decides later
what is inlined or fused); views compose index functions (``TV.loader``) and never copy;
ops without a row become ``ExternNode`` ATen calls, counted in ``KernelGraph.fallbacks``.
"""
from __future__ import annotations

import dataclasses
import functools
import math
import operator
from typing import Any, Callable, Sequence

import sympy
import torch
import torch.fx
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils import _pytree as pytree

from .._torch_compat import shape_env_hints
from .index import FloorDiv, ModIndex
from .ir import Buffer, ExternNode, KernelGraph, Layout, LoopNode, TensorRef, contiguous_strides, same_strides
from .sizes import SCALAR_FUNCS, FloatArg, SymbolicUnsupported, is_symbolic, lt, sym, vshape, vstride

aten = torch.ops.aten


class LoweringError(RuntimeError):
    """The graph cannot be compiled (the caller runs it eagerly)."""


@dataclasses.dataclass
class TV:
    """A tensor during lowering: how to load element ``idx`` and, if it is a strided view of a
    buffer, the ``TensorRef`` that Python code can use for it."""

    dtype: torch.dtype
    size: tuple[int, ...]
    loader: Callable            # (ops, idx) -> value of ``dtype``
    ref: TensorRef | None = None

    @property
    def ndim(self) -> int:
        return len(self.size)

    @property
    def numel(self) -> int:
        return math.prod(self.size)


def _float_args(node: torch.fx.Node, args, kwargs) -> bool:
    """Whether ``node`` is Python arithmetic on symbolic floats (``1 - lr * wd``) and numbers."""
    return (node.target in SCALAR_FUNCS and not kwargs and any(isinstance(a, FloatArg) for a in args)
            and all(isinstance(a, (FloatArg, int, float)) for a in args))


def _is_dense(layout: Layout) -> bool:
    """Non-overlapping and dense: strides are a permutation of contiguous strides."""
    def order(a: tuple, b: tuple) -> int:
        return -1 if lt(a[0], b[0]) else int(lt(b[0], a[0]))
    dims = sorted(((st, s) for s, st in zip(layout.size, layout.stride) if s != 1), key=functools.cmp_to_key(order))
    expect = 1
    for st, s in dims:
        if st != expect and (not (is_symbolic(st) or is_symbolic(expect)) or sympy.expand(st - expect) != 0):
            return False
        expect *= s
    return True


class GraphLowering:
    def __init__(self, gm: torch.fx.GraphModule, example_inputs: Sequence[Any], table: dict,
                 training: bool = False):
        self.gm = gm
        self.training = training                    # a forward or backward graph of a training step
        self.example_inputs = list(example_inputs)
        self.table = table
        self.buffers: dict[str, Buffer] = {}
        self.nodes: list = []
        self.fallbacks: list[str] = []
        self.env: dict[torch.fx.Node, Any] = {}
        self._counter = 0
        self.current: torch.fx.Node | None = None
        self.device: torch.device | None = None
        self.constants: dict[str, torch.Tensor] = {}
        self.meta_exact: set[str] = set()
        self.input_offsets: dict[str, int] = {}   # storage offset of each input's data_ptr
        # for a computed buffer in meta_exact: the storage offset of its fake value (a value the
        # trace took as an update of a view input keeps that input's offset; the buffer itself
        # starts at 0, so view offsets taken from metadata are made relative to this)
        self.meta_offsets: dict[str, int] = {}
        self.eager_layouts: dict[str, Layout] = {}  # the layout eager gives a buffer, where we know better than meta
        self.extern_reads: set[str] = set()         # buffers ATen calls read (their layouts are fixed then)
        self.sym_inputs: dict[int, Any] = {}        # position of a symbolic int input -> its symbol
        self.float_inputs: dict[int, str] = {}       # position of a symbolic float input -> its name
        self.float_exprs: list[tuple[str, Any, tuple]] = []   # floats computed from them (FloatArg)
        self.shape_env: Any = None                  # the ShapeEnv of symbolic inputs (None: static sizes)

    # -- names and buffers --------------------------------------------------------------------
    def new_name(self, prefix: str = "buf") -> str:
        name = f"{prefix}{self._counter}"
        self._counter += 1
        return name

    def buffer_tv(self, name: str) -> TV:
        buf = self.buffers[name]
        return TV(buf.dtype, buf.layout.size, lambda ops, idx, _n=name: ops.load(_n, idx),
                  TensorRef(name))

    def _origin(self) -> tuple[str, ...]:
        n = self.current
        if n is None or n.op != "call_function":
            return ()
        return (str(getattr(n.target, "__name__", n.target)),)

    def _out_layout(self, dtype: torch.dtype, size: Sequence[int]) -> Layout:
        """The layout eager would give this node's output: its meta strides when dense."""
        val = self.current.meta.get("val") if self.current is not None else None
        if isinstance(val, torch.Tensor) and vshape(val) == tuple(size) and val.dtype == dtype:
            lay = Layout.of(val)
            if _is_dense(lay):
                return lay
        return Layout.contiguous(dtype, size)

    def _note_meta(self, name: str) -> None:
        """Remember whether buffer ``name`` is laid out exactly as the current node's fake value
        (then the strides of views taken from metadata are valid on it)."""
        val = self.current.meta.get("val") if self.current is not None else None
        lay = self.buffers[name].layout
        if isinstance(val, torch.Tensor) and Layout.of(val) == lay:
            self.meta_exact.add(name)
            self.meta_offsets[name] = sym(val.storage_offset())

    # -- building nodes -------------------------------------------------------------------------
    def pointwise(self, dtype: torch.dtype, size: Sequence[int], body: Callable,
                  compute_dtype: torch.dtype | None = None, layout: Layout | None = None) -> TV:
        """A new LoopNode computing ``body(ops, idx)`` (a value of ``compute_dtype``) into a
        buffer of ``dtype``."""
        size = tuple(sym(s) for s in size)
        name = self.new_name()
        self.buffers[name] = Buffer(name, layout or self._out_layout(dtype, size), "computed")
        self._note_meta(name)
        self.nodes.append(LoopNode(name, size, body, [name], compute_dtype or dtype,
                                   origins=self._origin()))
        return self.buffer_tv(name)

    def reduction(self, x: TV, dims: Sequence[int], keepdim: bool, rtype: str,
                  acc_dtype: torch.dtype, out_dtype: torch.dtype,
                  value_fn: Callable | None = None) -> list[TV]:
        """Reduce ``x`` over ``dims``. ``value_fn(ops, v)`` transforms each element first."""
        nd = x.ndim
        dims = sorted({d % nd for d in dims}) if nd else []
        keep = [d for d in range(nd) if d not in dims]
        ranges = tuple(1 if d in dims else x.size[d] for d in range(nd)) if keepdim else \
            tuple(x.size[d] for d in keep)
        rranges = tuple(x.size[d] for d in dims)

        def body(ops, idx, ridx):
            full, ri = [], 0
            for d in range(nd):
                if d in dims:
                    full.append(ridx[ri])
                    ri += 1
                else:
                    full.append(idx[d] if keepdim else idx[keep.index(d)])
            v = x.loader(ops, full)
            if x.dtype != acc_dtype:
                v = ops.to_dtype(v, acc_dtype)
            return value_fn(ops, v) if value_fn is not None else v

        n_out = 2 if rtype == "welford" else 1
        names = [self.new_name() for _ in range(n_out)]
        for nm in names:
            self.buffers[nm] = Buffer(nm, self._out_layout(out_dtype, ranges) if n_out == 1
                                      else Layout.contiguous(out_dtype, ranges), "computed")
            self._note_meta(nm)
        result_dtype = {"argmax": torch.int64, "argmin": torch.int64, "any": torch.bool,
                        "all": torch.bool}.get(rtype, acc_dtype)
        self.nodes.append(LoopNode(names[0], ranges, body, names, result_dtype, rranges=rranges,
                                   reduction_type=rtype, src_dtype=acc_dtype, origins=self._origin()))
        return [self.buffer_tv(nm) for nm in names]

    def realize(self, tv: TV, stride: Sequence[int] | None = None) -> TensorRef:
        """A TensorRef for ``tv``, materializing it with a copy node if it is not strided (or
        not laid out with ``stride``)."""
        if tv.ref is not None and (stride is None or same_strides(tv.size, self.strides_of(tv), stride)):
            return tv.ref
        layout = None if stride is None else Layout(tv.dtype, tuple(tv.size), tuple(stride))
        saved, self.current = self.current, None   # a copy has no FX node of its own
        try:
            out = self.pointwise(tv.dtype, tv.size, tv.loader, layout=layout)
        finally:
            self.current = saved
        assert out.ref is not None              # pointwise's result is its buffer
        return out.ref

    def strides_of(self, tv: TV) -> tuple[int, ...] | None:
        """The actual strides of a strided ``tv`` (None if it is computed on the fly)."""
        if tv.ref is None:
            return None
        if tv.ref.view is not None:
            return tuple(tv.ref.view[1])
        return self.buffers[tv.ref.name].layout.stride

    def meta_call(self, target, args, kwargs):
        """Run ``target`` on meta tensors laid out like our buffers: the real output layout."""
        device = self.device or torch.device("cpu")

        def fake(r):
            if isinstance(r, TensorRef):
                lay = self.buffers[r.name].layout
                size, stride = (lay.size, lay.stride) if r.view is None else r.view[:2]
                return torch.empty_strided(self._symints(size), self._symints(stride), dtype=lay.dtype,
                                           device=device)
            return self._symints(r)
        # fake tensors, not the meta device: meta kernels pick other layouts (convolution)
        with FakeTensorMode(shape_env=self.shape_env):
            fargs, fkwargs = pytree.tree_map(fake, (args, kwargs))
            return target(*fargs, **fkwargs)

    def _symints(self, v):
        """Sizes (sympy expressions) as SymInts of the ShapeEnv, for fake kernels."""
        if self.shape_env is None:
            return v
        if isinstance(v, (list, tuple)):
            return type(v)(self._symints(x) for x in v)
        if isinstance(v, sympy.Expr) and not v.is_Integer:
            hint = v.xreplace(shape_env_hints(self.shape_env))
            return self.shape_env.create_symintnode(v, hint=int(hint) if hint.is_Integer else None)
        return v

    def extern(self, node: torch.fx.Node, args, kwargs, reason: str = "no lowering", relayout: bool = False) -> Any:
        """Run ``node.target`` as an ATen call in the wrapper; output layouts come from its fake
        kernel run on our buffers' layouts.  ``relayout``: that run must succeed (the arguments
        are known to be laid out differently from the FX metadata)."""
        target = node.target
        schema = getattr(target, "_schema", None)
        if schema is not None and schema.is_mutable:
            raise LoweringError(f"in-place op {target} left after functionalization")
        args, kwargs = pytree.tree_map_only(TV, self.realize, (args, kwargs))
        self.extern_reads.update(r.name for r in pytree.tree_leaves((args, kwargs)) if isinstance(r, TensorRef))
        # Our buffers may be laid out unlike the FX metadata (a channels-last convolution feeds a
        # max_pool2d, say), and ATen then returns other strides than the metadata's: ask the
        # kernel's fake implementation on our layouts. Ops it cannot run take the metadata.
        try:
            val = self.meta_call(target, args, kwargs)
        except Exception:  # data-dependent shapes, ops without fake kernels
            if relayout:
                raise
            val = node.meta.get("val")
        flat, spec = pytree.tree_flatten(val)
        outputs, paths = [], []
        for i, v in enumerate(flat):
            if isinstance(v, torch.Tensor):
                nm = self.new_name()
                self.buffers[nm] = Buffer(nm, Layout.of(v), "extern")
                outputs.append(nm)
                paths.append(i)
        if val is None or not flat:
            raise LoweringError(f"no metadata for {target}")
        # Outputs laid out as the FX metadata says (not the case when relayout gave, say, a
        # channels-last convolution): only those may serve views with the metadata's strides.
        meta_flat = pytree.tree_flatten(node.meta.get("val"))[0]
        for nm, i in zip(outputs, paths):
            mv = meta_flat[i] if i < len(meta_flat) else None
            if isinstance(mv, torch.Tensor) and Layout.of(mv) == self.buffers[nm].layout:
                self.meta_exact.add(nm)
                self.meta_offsets[nm] = sym(mv.storage_offset())
        name = getattr(target, "__name__", str(target))
        self.fallbacks.append(f"{name} ({reason})")
        self.nodes.append(ExternNode(outputs[0] if outputs else self.new_name("ext"), target, args,
                                     kwargs, outputs, [(p, spec) for p in paths], origins=(name,)))
        tvs = iter(self.buffer_tv(nm) for nm in outputs)
        results = [next(tvs) if isinstance(v, torch.Tensor) else v for v in flat]
        return pytree.tree_unflatten(results, spec)

    # -- the walk ----------------------------------------------------------------------------------
    def run(self) -> KernelGraph:
        inputs: list[str | None] = []
        mutations: list[tuple[int, TensorRef]] = []
        placeholder_pos: dict[str, int] = {}
        outputs: list = []
        ex = iter(self.example_inputs)
        out_vals = {}   # nodes that are graph outputs themselves -> the value eager gives
        for node in self.gm.graph.find_nodes(op="output"):
            for n in pytree.tree_leaves(node.args[0]):
                if isinstance(n, torch.fx.Node) and isinstance(n.meta.get("val"), torch.Tensor):
                    out_vals[n] = n.meta["val"]
        for node in self.gm.graph.nodes:
            self.current = node
            if node.op == "placeholder":
                v = next(ex, None)
                meta = node.meta.get("val")
                if isinstance(meta, torch.Tensor) and isinstance(v, torch.Tensor) and self._symbolic(meta):
                    v = meta                          # symbolic sizes: the graph's fake input
                if isinstance(v, torch.Tensor) and (v.is_neg() or v.is_conj()):
                    raise LoweringError("an input is a lazily negated or conjugated view")
                if isinstance(v, torch.Tensor):
                    name = f"arg{len(inputs)}"
                    self._note_device(v.device)
                    self.buffers[name] = Buffer(name, Layout.of(v), "input")
                    self.input_offsets[name] = sym(v.storage_offset())
                    placeholder_pos[name] = len(inputs)
                    inputs.append(name)
                    self.env[node] = self.buffer_tv(name)
                else:
                    if isinstance(meta, torch.SymInt):
                        v = sym(meta)                 # a symbolic int input: its symbol
                        self.sym_inputs[len(inputs)] = v
                    elif isinstance(meta, torch.SymFloat) and not isinstance(sym(meta), (int, float)):
                        v = FloatArg(f"xf{len(inputs)}")     # a float input: a kernel argument
                        self.float_inputs[len(inputs)] = v.name
                    elif isinstance(meta, (torch.SymFloat, torch.SymBool)):
                        # (its example value is one call's: kernels would keep that value)
                        raise SymbolicUnsupported(f"a symbolic {type(meta).__name__} input ({meta})")
                    inputs.append(None)
                    self.env[node] = v
            elif node.op == "get_attr":
                t = getattr(self.gm, node.target)
                if not isinstance(t, torch.Tensor):
                    self.env[node] = t
                    continue
                name = self.new_name("const")
                self._note_device(t.device)
                self.constants[name] = t
                self.buffers[name] = Buffer(name, Layout.of(t), "input")
                self.env[node] = self.buffer_tv(name)
            elif node.op == "call_function":
                args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), lambda n: self.env[n])
                if node.target is operator.getitem:
                    self.env[node] = args[0][args[1]]
                    continue
                if isinstance(node.meta.get("val"), torch.SymFloat) and _float_args(node, args, kwargs):
                    v = FloatArg(f"xf{len(self.gm.graph.nodes) + len(self.float_exprs)}")
                    self.float_exprs.append((v.name, node.target, args))   # computed by the wrapper
                    self.env[node] = v
                    continue
                if isinstance(node.meta.get("val"), (torch.SymInt, torch.SymFloat, torch.SymBool)):
                    self.env[node] = self._sym_value(node.meta["val"])   # sizes: x.size(0), s0 * 4
                    continue
                if node.target is aten.copy_.default and isinstance(args[0], TV) and \
                        args[0].ref is not None and args[0].ref.view is None and \
                        args[0].ref.name in placeholder_pos:
                    src = args[1]
                    if src.size != args[0].size or src.dtype != args[0].dtype:
                        src = self.table[aten.copy.default](self, node, args[0], src)
                    mutations.append((placeholder_pos[args[0].ref.name], self.realize(src)))
                    self.env[node] = src
                    continue
                if any(u.op != "output" for u in node.users) and \
                        any(isinstance(v, torch.Tensor) and (v.is_neg() or v.is_conj())
                            for v in pytree.tree_leaves(node.meta.get("val"))):
                    # (``_neg_view``, ``_conj``: the value is its memory negated or conjugated
                    # lazily; a kernel reading the buffer would read it unresolved. Returned as
                    # it is, the extern's tensor keeps its bit: ``fft.ifft`` of a real input)
                    raise LoweringError(f"{node.target} makes a lazily negated or conjugated view "
                                        "that the graph reads on")
                self.env[node] = self.lower_call(node, args, kwargs)
                if node in out_vals:
                    self._early_eager_layout(node, out_vals[node])
            elif node.op == "output":
                result = torch.fx.node.map_arg(node.args[0], lambda n: self.env[n])
                metas = pytree.tree_leaves(torch.fx.node.map_arg(node.args[0], lambda n: n.meta.get("val")))
                for v, m in zip(pytree.tree_leaves(result), metas):
                    if isinstance(v, TV):
                        v = self._eager_layout(v, m)
                    outputs.append(self.realize(v) if isinstance(v, TV) else v)
                outputs = self._alias_outputs(outputs, metas)
            else:
                raise LoweringError(f"unsupported FX node {node.op} {node.target}")
        self.current = None
        g = KernelGraph(self.buffers, self.nodes, inputs, outputs, mutations,
                        self.device or torch.device("cpu"), self.fallbacks)
        g.constants = self.constants
        g.sym_inputs = dict(self.sym_inputs)
        g.float_inputs = dict(self.float_inputs)
        g.float_exprs = list(self.float_exprs)
        return g

    def _symbolic(self, t: torch.Tensor) -> bool:
        """Whether a fake input has symbolic sizes, strides or offset (and note its ShapeEnv)."""
        for s in (*t.shape, *t.stride(), t.storage_offset()):
            if isinstance(s, torch.SymInt) and not isinstance(sym(s), int):
                self.shape_env = s.node.shape_env
                return True
        return False

    def _sym_value(self, v):
        e = sym(v)
        if free_unbacked_symbols(v):
            raise SymbolicUnsupported(f"a size the graph computes from data ({e})")
        if not isinstance(v, torch.SymInt) and not isinstance(e, (int, float, bool)):
            raise SymbolicUnsupported(f"a symbolic {type(v).__name__} in the graph ({e})")
        return e

    def _early_eager_layout(self, node: torch.fx.Node, val) -> None:
        """A computed buffer that is a graph output gets eager's layout right away, before any
        consumer is lowered: an ATen call reading it takes its output layout from it."""
        tv = self.env[node]
        if isinstance(tv, TV) and tv.ref is not None and tv.ref.view is None and \
                self.buffers[tv.ref.name].kind == "computed":
            self._eager_layout(tv, val)

    def _eager_layout(self, tv: TV, val) -> TV:
        """Graph outputs get eager's strides even where we chose others inside the graph."""
        if not isinstance(val, torch.Tensor) or vshape(val) != tuple(tv.size):
            return tv
        if any(st == 0 and lt(1, n) for st, n in zip(vstride(val), vshape(val))):
            return tv                       # an expanded view: any layout of its values will do
        if tv.ref is None:                  # computed on the fly (a view we could not keep strided)
            return TV(tv.dtype, tv.size, tv.loader, self.realize(tv, stride=vstride(val)))
        buf = self.buffers[tv.ref.name]
        if tv.ref.view is not None or buf.kind == "extern":
            # a view, or an ATen result laid out by our inputs' layouts (a channels-last
            # convolution): copied into eager's strides when they differ
            if same_strides(tv.size, self.strides_of(tv), vstride(val)):
                return tv
            return TV(tv.dtype, tv.size, tv.loader, self.realize(tv, stride=vstride(val)))
        want = self.eager_layouts.get(buf.name) or Layout.of(val)
        if buf.kind != "computed" or buf.layout == want or want.size != buf.layout.size or not _is_dense(want):
            return tv
        if buf.name in self.meta_exact or buf.name in self.extern_reads:
            # views were taken of it as it is, or an ATen call took its output layout from it: copy instead
            return TV(tv.dtype, tv.size, tv.loader, self.realize(tv, stride=want.stride))
        buf.layout = want
        if want == Layout.of(val):
            self.meta_exact.add(buf.name)
            self.meta_offsets[buf.name] = sym(val.storage_offset())
        return tv

    def _alias_outputs(self, outputs: list, metas: list) -> list:
        """An output that eager returns as a view of another output comes back as a view of
        that output's buffer (``as_strided``), not as a copy: it must share its storage.
        Possible when the other output is a whole dense buffer laid out as eager lays it out
        (every storage position in its extent is then one of its elements, at eager's place)
        and the view's elements lie inside that extent."""
        bases: dict = {}            # storage -> (buffer name, eager storage offset of its first element)
        for r, m in zip(outputs, metas):
            if not isinstance(r, TensorRef) or r.view is not None or not isinstance(m, torch.Tensor):
                continue
            buf = self.buffers.get(r.name)
            if buf is None or buf.kind not in ("computed", "extern") or buf.layout.offset != 0 or \
                    buf.layout != Layout(m.dtype, vshape(m), vstride(m)) or \
                    not _is_dense(buf.layout) or math.prod(vshape(m)) == 0:
                continue
            key = StorageWeakRef(m.untyped_storage())
            if key not in bases or buf.layout.storage_numel > self.buffers[bases[key][0]].layout.storage_numel:
                bases[key] = (r.name, sym(m.storage_offset()))     # the widest of them serves the others
        out = list(outputs)
        for i, (r, m) in enumerate(zip(outputs, metas)):
            if not isinstance(r, TensorRef) or not isinstance(m, torch.Tensor) or math.prod(vshape(m)) == 0:
                continue
            base = bases.get(StorageWeakRef(m.untyped_storage()))
            if base is None or base[0] == r.name:
                continue
            name, off0 = base
            blay = self.buffers[name].layout
            if self.buffers[r.name].kind == "input" or blay.dtype != m.dtype:
                continue
            view = Layout(m.dtype, vshape(m), vstride(m),
                          sym(m.storage_offset()) - off0)
            if lt(view.offset, 0) or lt(blay.storage_numel, view.storage_numel):
                continue
            out[i] = TensorRef(name, (view.size, view.stride, view.offset))
        return self._distinct_outputs(out, metas)

    def _distinct_outputs(self, out: list, metas: list) -> list:
        """Two outputs that are different tensors in eager (``v, v.detach()``; ``v, v.view(-1)`` of
        a 1-D v) but lowered to the same whole buffer come back as two objects: the later one as
        an explicit view of the buffer (a new tensor sharing its storage), never ``v`` twice."""
        first: dict = {}                # buffer name -> meta of the first output that is it whole
        for i, (r, m) in enumerate(zip(out, metas)):
            if not isinstance(r, TensorRef) or r.view is not None:
                continue
            seen = first.setdefault(r.name, m)
            buf = self.buffers.get(r.name)
            if seen is m or buf is None or buf.kind not in ("computed", "extern"):
                continue
            lay = buf.layout
            out[i] = TensorRef(r.name, (tuple(lay.size), tuple(lay.stride), lay.offset))
        return out

    def _note_device(self, device: torch.device) -> None:
        if self.device is None:
            self.device = device
        elif self.device != device:
            raise LoweringError(f"tensors on several devices: {self.device} and {device}")

    def lower_call(self, node: torch.fx.Node, args, kwargs):
        target = node.target
        row = self.table.get(target)
        if row is None and hasattr(target, "overloadpacket"):
            row = self.table.get(target.overloadpacket)
        if row is not None:
            out = row(self, node, *args, **kwargs)
            if out is not NotImplemented:
                return out
            return self.extern(node, args, kwargs, reason="case not lowered")
        return self.extern(node, args, kwargs)


def view_tv(L: GraphLowering, x: TV, size: Sequence[int], loader: Callable, val=None) -> TV:
    """A view of ``x``; keeps a strided TensorRef when ``x`` has one (from the node's meta, or
    ``val`` for one output of a multi-output view op)."""
    ref = None
    if val is None:
        val = L.current.meta.get("val") if L.current is not None else None
    if x.ref is not None and isinstance(val, torch.Tensor) and vshape(val) == tuple(size):
        base = L.buffers[x.ref.name]
        # relative to the buffer's first element: an input may come at another storage offset
        # next call (guards do not check it); a buffer we allocate starts at 0, its fake value
        # (the new value of a view input) may not
        offset = sym(val.storage_offset()) - (L.input_offsets.get(x.ref.name, 0) if base.kind == "input"
                                              else L.meta_offsets.get(x.ref.name, 0))
        lay = Layout(val.dtype, vshape(val), vstride(val), sym(offset))
        exact = base.kind == "input" or _layout_matches_meta(L, x.ref.name)
        if exact:
            ref = TensorRef(x.ref.name, (lay.size, lay.stride, lay.offset))
            if base.kind != "input" and Layout(lay.dtype, lay.size, lay.stride) == base.layout:
                ref = TensorRef(x.ref.name)
    return TV(x.dtype, tuple(sym(s) for s in size), loader, ref)


def _layout_matches_meta(L: GraphLowering, name: str) -> bool:
    return name in L.meta_exact


def reshape_index(in_size: Sequence[int], out_size: Sequence[int], idx: Sequence) -> list:
    """Map an index of the reshaped tensor (``out_size``) to one of ``in_size``.

    Dims are matched in groups with equal products, so a split or a merge only touches its
    own dims (a merge gives ``//`` and ``%``; a split stays linear)."""

    in_size, out_size = list(in_size), list(out_size)
    if 0 in in_size or 0 in out_size:
        return [sympy.Integer(0)] * len(in_size)
    result: list = [None] * len(in_size)
    i = j = 0
    while i < len(in_size) or j < len(out_size):
        gi, gj = [i], [j]
        pi = in_size[i] if i < len(in_size) else 1
        pj = out_size[j] if j < len(out_size) else 1
        i += 1
        j += 1
        while pi != pj and (not (is_symbolic(pi) or is_symbolic(pj)) or sympy.expand(pi - pj) != 0):
            if lt(pi, pj):
                pi *= in_size[i]
                gi.append(i)
                i += 1
            else:
                pj *= out_size[j]
                gj.append(j)
                j += 1
        # swallow trailing size-1 dims into this group
        while i < len(in_size) and in_size[i] == 1 and (j >= len(out_size) or out_size[j] != 1):
            gi.append(i)
            i += 1
        while j < len(out_size) and out_size[j] == 1 and (i >= len(in_size) or in_size[i] != 1):
            gj.append(j)
            j += 1
        gi = [d for d in gi if d < len(in_size)]
        gj = [d for d in gj if d < len(out_size)]
        flat = sympy.Integer(0)
        for d in gj:
            flat = flat * out_size[d] + (idx[d] if out_size[d] != 1 else 0)
        nz = [d for d in gi if in_size[d] != 1]
        for k, (d, st) in enumerate(zip(nz, contiguous_strides([in_size[d] for d in nz]))):
            e = FloorDiv(flat, st)
            result[d] = ModIndex(e, in_size[d]) if k > 0 else e  # the outermost needs no %
    return [r if r is not None else sympy.Integer(0) for r in result]
