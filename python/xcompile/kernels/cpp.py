"""C++/OpenMP emitter: one ``extern "C"`` function per fused group over raw pointers.

No torch headers, so a kernel builds in a fraction of a second.  When the work is large enough
the outer loop is split between OpenMP threads (see ``signature``); the innermost loop carries
``#pragma omp simd`` so g++ -O3 -march=native vectorizes it.  Reductions keep 16 lanes of
accumulators (the lane loop vectorizes, including Welford and argmax), then fold the lanes
and the scalar tail in index order.

Indirect indices (gather, embedding, ``x[idx]``) are checked: each check site keeps the min and
max index seen (OpenMP ``reduction`` clauses on every loop), the kernel returns 1 + the site
when one is out of range, and the wrapper raises as eager would.  In pointwise nests, values
that do not depend on the inner loop (an embedding row's index and its check) are hoisted.
"""
from __future__ import annotations

import re
from typing import Any

import sympy
import torch

from .. import config
from .cpp_ops import COMBINE, CV, IDENT, LANES, STORAGE_CTYPE, TILE, Acc, CppOps, Line, acc_identity, cexpr, value_ctype
from .cpp_prelude import SCALAR_ONLY, have_libmvec, prelude
from .fusion import Group
from .index import FloorDiv, ModIndex, simplify_index
from .loops import LoopNest, accesses, node_indices, plan_loops
from .sizes import FLOAT_NAME, is_symbolic, known

_SCALAR_CALL = re.compile(r"\bxc_(" + "|".join(SCALAR_ONLY) + r")\(")


def _scalar_calls(ln: str) -> str:
    text = _SCALAR_CALL.sub(r"xc_\1_s(", ln)
    return Line(text, ln.deps) if isinstance(ln, Line) else text


class CppKernelWriter:
    def __init__(self, group: Group, buffers: dict, name: str, size_names: frozenset[str] = frozenset(),
                 aliased: frozenset[str] = frozenset()):
        self.size_names = size_names   # the graph's size symbols (dynamic shapes)
        self.aliased = aliased         # buffers sharing memory (a write in place): no __restrict
        self.group = group
        self.buffers = buffers
        self.name = name
        self.nest: LoopNest = plan_loops(group, buffers)
        self.stores = set(group.stores)
        self.params: dict[str, tuple[str, bool]] = {}   # buffer -> (param name, written)
        self.locals: dict[str, CV] = {}
        self.cse: dict[str, CV] = {}
        self.block: list[str] = []
        self.accs: list[Acc] = []
        self.all_accs: list[Acc] = []
        self.pending: list = []
        self.counter = 0
        self.checks: list = []         # IndexCheck per check site, in site order
        self.deps: dict[str, frozenset] = {}   # value name -> loop variables it depends on
        self.loop_vars = {str(v) for v in self.nest.xvars + self.nest.rvars}
        self.ops = CppOps(self)
        self.par: tuple[int, int] | None = None   # (end, step) of the outer loop threads split
        self.tiled = False                        # a transposing pointwise nest, run tile by tile
        self.tiles: list[tuple[str, str, str]] = []   # (tile array, its C type, fill statement)
        self.par_work: Any = None   # symbolic element count: the threads split it only when it is large
        self.size_params: list[str] = []          # size symbols the kernel takes (int64_t), in order

    def serial_if(self) -> str:
        if self.par_work is None:
            return ""
        return f" || {cexpr(self.par_work)} < {config.cpp_parallel_threshold}"

    # -- small helpers ---------------------------------------------------------------------------
    def param(self, name: str, write: bool) -> str:
        if name not in self.params:
            n_in = sum(1 for _, w in self.params.values() if not w)
            n_out = sum(1 for _, w in self.params.values() if w)
            self.params[name] = (f"out_ptr{n_out}" if write or name in self.stores else f"in_ptr{n_in}",
                                 write or name in self.stores)
        return self.params[name][0]

    def index(self, name: str, index) -> str:
        flat = self.buffers[name].layout.flat_index(index)
        return cexpr(simplify_index(sympy.expand(flat), self.nest.ranges))

    def tile_load(self, name: str, ptr: str, index) -> str | None:
        """A load read across the last loop and along the one before it (``transposing``), in
        a tiled nest: the tile's elements are copied row by row into a small array first (each
        cache line read once, contiguously), and the body reads the array."""
        nest = self.nest
        flat = simplify_index(sympy.expand(self.buffers[name].layout.flat_index(index)), nest.ranges)
        inner, outer = nest.xvars[-1], nest.xvars[-2]
        if flat.has(FloorDiv, ModIndex) or not flat.free_symbols <= set(nest.xvars):
            return None
        ci, co = sympy.diff(flat, inner), sympy.diff(flat, outer)
        if not (ci.is_Integer and abs(int(ci)) > 1 and co == 1):
            return None
        key = f"{ptr}[{cexpr(flat)}]"
        for tname, _, fill in self.tiles:
            if fill.endswith(f" = {key};"):
                break
        else:
            tname = f"xc_tile{len(self.tiles)}"
            self.tiles.append((tname, STORAGE_CTYPE[self.buffers[name].dtype],
                               f"{tname}[{inner} - {inner}_t][{outer} - {outer}_t] = {key};"))
        return f"{tname}[{inner} - {inner}_t][{outer} - {outer}_t]"

    def check_site(self, check) -> int:
        """The number of the (hi, lo) pair that tracks indices checked by ``check``."""
        if check not in self.checks:
            self.checks.append(check)
        return self.checks.index(check)

    def line(self, text: str) -> None:
        self.block.append(text)

    def value_line(self, text: str, defines: str | None, expr: str) -> None:
        """A statement computing ``expr`` (into ``defines``): recorded with the loop variables
        it depends on (loop variables named in ``expr``, and those of the values it reads)."""
        found: set[str] = set()
        for ident in IDENT.findall(expr):
            if ident in self.deps:
                found |= self.deps[ident]
            elif ident in self.loop_vars:
                found.add(ident)
        deps = frozenset(found)
        if defines is not None:
            self.deps[defines] = deps
        self.block.append(Line(text, deps))

    def emit(self, expr: str, dtype: torch.dtype) -> CV:
        key = f"{expr}:{dtype}"
        if key in self.cse:
            return self.cse[key]
        name = f"tmp{self.counter}"
        self.counter += 1
        self.value_line(f"{value_ctype(dtype)} {name} = {expr};", name, expr)
        v = CV(name, dtype)
        self.cse[key] = v
        return v

    def convert_value(self, x: CV, dtype: torch.dtype) -> str:
        if dtype == torch.bool:
            return f"({x} != 0)"
        if dtype == torch.float16:
            return f"xc_round_h((float)({x}))"
        if dtype == torch.bfloat16:
            return f"xc_round_bf((float)({x}))"
        return f"({value_ctype(dtype)})({x})"

    def convert(self, x: CV, dtype: torch.dtype) -> str:
        """``x`` as the storage type of a ``dtype`` buffer."""
        if dtype == torch.float16:
            return f"(_Float16)({x})"
        if dtype == torch.bfloat16:
            return f"xc_f2bf((float)({x}))"
        if x.dtype == dtype:
            return str(x)
        if dtype == torch.bool:
            return f"({x} != 0)"
        return f"({STORAGE_CTYPE[dtype]})({x})"

    # -- the kernel -----------------------------------------------------------------------------------
    def generate(self) -> str:
        if self.columns_layout():
            return self.generate_columns()
        g, nest = self.group, self.nest
        self.tiled = not g.is_reduction and self.transposing()
        xnodes = [n for n in g.nodes if g.level[n] == "x"]
        rnodes = [n for n in g.nodes if g.level[n] == "r"]
        phases = sorted({g.phase[n] for n in g.nodes})
        body: list[str] = []
        r_loops = 0
        for p in range(max(phases) + 1 if phases else 1):
            self.block = []
            for n in xnodes:
                if g.phase[n] == p:
                    idx, ridx = node_indices(g, nest, n)
                    n.run(self.ops, idx, ridx)
            body += self.block
            loop_nodes = [n for n in rnodes if g.phase[n] == p]
            if loop_nodes:
                body += self.reduction_loop(loop_nodes)
                r_loops += 1
        if r_loops > 1:
            # later loops recompute what earlier ones reduced (x == x.max() in max's backward):
            # every copy must see the same bits, so no libmvec vector variants here
            body = [_scalar_calls(ln) for ln in body]
        work = nest.xnumel * (nest.rnumel if nest.rvars else 1)
        if is_symbolic(work):       # decided per call: the kernel runs on one thread below the threshold
            parallel = bool(nest.xsizes) and not known(sympy.sympify(nest.xsizes[0]) < 2)
            self.par_work = work
        else:
            parallel = bool(work >= config.cpp_parallel_threshold and nest.xsizes and
                            nest.xsizes[0] >= 2)
        code = self.wrap_x_loops(body, parallel, simd_inner=not g.is_reduction)
        return self.signature(code)

    def signature(self, code: list[str]) -> str:
        """The kernel function around ``code``.  With ``self.par`` set, ``code`` is the loop
        over ``[xc_begin, xc_end)`` of the outer variable; it becomes a function of its own
        (``kernel_part``) that the kernel calls once when OpenMP has one thread, or once per
        thread on its share.  An ``omp parallel for`` over the loop instead would move it into
        an outlined function taking the pointers from a struct: g++ then drops ``__restrict``
        and stops vectorizing what may alias (a layer_norm backward ran 4x slower)."""
        args, ptypes = [], []
        for buf, (pname, written) in self.params.items():
            ct = STORAGE_CTYPE[self.buffers[buf].dtype]
            restrict = "" if buf in self.aliased else " __restrict"
            ptypes.append(f"{'' if written else 'const '}{ct}*")
            args.append(f"{ptypes[-1]}{restrict} {pname}")
        names = list(p for p, _ in self.params.values())
        if self.size_names:       # symbolic sizes the code names: int64_t arguments after the pointers
            used = {i for ln in code for i in IDENT.findall(ln)}
            if self.par_work is not None:
                used |= set(IDENT.findall(self.serial_if()))
            self.size_params = sorted(used & self.size_names)
            args += [f"const {'double' if FLOAT_NAME.fullmatch(s) else 'int64_t'} {s}" for s in self.size_params]
            names += self.size_params
        n = len(self.checks)
        if n:
            his = ",".join(f"xc_hi{k}" for k in range(n))
            los = ",".join(f"xc_lo{k}" for k in range(n))
            clause = f" reduction(max:{his}) reduction(min:{los})"
            code = [ln + clause if ln.lstrip().startswith("#pragma omp") else ln for ln in code]
        ranges = [f"int64_t xc_hi{k} = std::numeric_limits<int64_t>::min(), "
                  f"xc_lo{k} = std::numeric_limits<int64_t>::max();" for k in range(n)]
        pre, body = [], []
        if self.par is None:
            body = ranges + code
        else:
            end, step = self.par
            end = cexpr(end)
            part_args = ["int64_t xc_begin", "int64_t xc_end"] + (["int64_t* __restrict xc_range"] if n else []) + args
            # a thread's index ranges go back through xc_range (max, min per site)
            back = [f"xc_range[{2 * k}] = xc_hi{k} > xc_range[{2 * k}] ? xc_hi{k} : xc_range[{2 * k}]; "
                    f"xc_range[{2 * k + 1}] = xc_lo{k} < xc_range[{2 * k + 1}] ? xc_lo{k} : xc_range[{2 * k + 1}];"
                    for k in range(n)]
            pre = ['extern "C" int omp_get_max_threads(void); extern "C" int omp_get_num_threads(void); '
                   'extern "C" int omp_get_thread_num(void);',
                   f"static __attribute__((noinline)) void kernel_part({', '.join(part_args)})", "{"] + \
                ["    " + ln for ln in ranges + code + back] + ["}"]
            rng = (["int64_t xc_rng[] = {" + ", ".join("std::numeric_limits<int64_t>::min(), "
                                                       "std::numeric_limits<int64_t>::max()" for _ in range(n)) + "};"]
                   if n else [])
            call_args = ", ".join((["xc_rng"] if n else []) + names)
            merge = [f"xc_hi{k} = xc_rng[{2 * k}] > xc_hi{k} ? xc_rng[{2 * k}] : xc_hi{k}; "
                     f"xc_lo{k} = xc_rng[{2 * k + 1}] < xc_lo{k} ? xc_rng[{2 * k + 1}] : xc_lo{k};" for k in range(n)]
            per = f"(({end} + {step - 1}) / {step} + xc_nt - 1) / xc_nt * {step}"
            body = ranges + [
                f"if (omp_get_max_threads() == 1{self.serial_if()})", "{"] + ["    " + ln for ln in rng + [
                    f"kernel_part(0, {end}{', ' if call_args else ''}{call_args});"] + merge] + ["}", "else", "{",
                "    #pragma omp parallel", "    {",
                "        int64_t xc_nt = omp_get_num_threads(), xc_t = omp_get_thread_num();",
                f"        int64_t xc_per = {per};",
                f"        int64_t xc_b = xc_t * xc_per, xc_e = xc_b + xc_per < {end} ? xc_b + xc_per : {end};"] + \
                ["        " + ln for ln in rng] + [
                f"        if (xc_b < xc_e) kernel_part(xc_b, xc_e{', ' if call_args else ''}{call_args});"] + \
                (["        #pragma omp critical", "        {"] + ["            " + ln for ln in merge] + ["        }"]
                 if n else []) + ["    }", "}"]
        packed = _packed_entry(ptypes, self.size_params, returns=bool(n))
        if not n:
            sig = f'extern "C" void kernel({", ".join(args)})'
            return "\n".join(pre + [sig, "{"] + ["    " + ln for ln in body] + ["}", packed])
        tail = []
        for k, c in enumerate(self.checks):
            tail += [f"if (xc_hi{k} >= {cexpr(c.size)}) {{ xc_bad_index = xc_hi{k}; return {k + 1}; }}",
                     f"if (xc_lo{k} < {cexpr(c.low)}) {{ xc_bad_index = xc_lo{k}; return {k + 1}; }}"]
        sig = f'extern "C" int64_t kernel({", ".join(args)})'
        pre = ["static thread_local int64_t xc_bad_index = 0;",
               'extern "C" int64_t kernel_bad_index() { return xc_bad_index; }'] + pre
        return "\n".join(pre + [sig, "{"] + ["    " + ln for ln in body + tail + ["return 0;"]] + ["}", packed])

    # -- reductions over the outer dim (columns): vectorize across the rows instead ------------
    def columns_layout(self) -> bool:
        """One outer and one reduction loop, the data contiguous along the outer one (a sum over
        dim 0, a bias gradient): the reduction loop would stride through memory, so we keep a
        tile of outer positions in flight and vectorize across it."""
        g, nest = self.group, self.nest
        if not (g.is_reduction and len(nest.xvars) == 1 and len(nest.rvars) == 1 and known(nest.rsizes[0] > 1)):
            return False
        if any(g.level[n] == "x" and g.phase[n] == 0 for n in g.nodes):
            return False
        if any(g.level[n] == "r" and g.phase[n] != 0 for n in g.nodes) or \
                any(g.phase[n] > 1 for n in g.nodes):
            return False
        loads = [e for kind, name, e in accesses(g, nest, self.buffers)
                 if kind == "load" and e.has(nest.rvars[0])]
        if not loads:
            return False
        x, r = nest.xvars[0], nest.rvars[0]
        unit_x = [e for e in loads if sympy.diff(e, x) == 1]
        unit_r = [e for e in loads if sympy.diff(e, r) == 1]
        return len(unit_x) > len(unit_r)

    def generate_columns(self) -> str:
        g, nest = self.group, self.nest
        x, X = nest.xvars[0], nest.xsizes[0]
        r, R = nest.rvars[0], nest.rsizes[0]
        tile = 128 if is_symbolic(X) else min(128, X)
        self.lane_var = f"{x}_l"
        saved_locals, saved_cse = dict(self.locals), dict(self.cse)
        self.block, self.accs, self.pending = [], [], []
        for n in [n for n in g.nodes if g.level[n] == "r"]:
            idx, ridx = node_indices(g, nest, n)
            n.run(self.ops, idx, ridx)
        inner, accs, pending = self.block, self.accs, self.pending
        self.locals, self.cse = saved_locals, saved_cse
        decl = []
        for a in accs:
            ct = value_ctype(a.dtype)
            decl.append(f"{ct} {a.name}_v[{tile}]; " + (f"{ct} {a.name}_vm2[{tile}];" if a.rtype == "welford" else ""))
            init = "0" if a.rtype == "welford" else acc_identity(a.rtype, a.dtype)
            decl.append(f"for (int l = 0; l < {tile}; l++) {a.name}_v[l] = {init};" +
                        (f" for (int l = 0; l < {tile}; l++) {a.name}_vm2[l] = 0;" if a.rtype == "welford" else ""))
            if a.rtype in ("argmax", "argmin"):
                decl.append(f"int64_t {a.name}_vi[{tile}] = {{}};")
        counts = [f"{value_ctype(a.dtype)} {a.name}_w = ({value_ctype(a.dtype)})1 / ({value_ctype(a.dtype)})({r} + 1);"
                  for a in accs if a.rtype == "welford"]
        updates = [ln for a in accs for ln in self.column_update(a)]
        rloop = [f"for (int64_t {r} = 0; {r} < {cexpr(R)}; {r}++)", "{"] + ["    " + c for c in counts] + \
            ["    #pragma omp simd", f"    for (int64_t {x}_l = 0; {x}_l < {x}_n; {x}_l++)", "    {",
             f"        int64_t {x} = {x}_b + {x}_l;"] + ["        " + ln for ln in inner + updates] + ["    }", "}"]
        # per column: the reduction results, their stores and the epilogue
        self.block = []
        for a in accs:
            ct = value_ctype(a.dtype)
            if a.rtype == "welford":
                self.line(f"{ct} {a.name}_mean = {a.name}_v[{x}_l]; {ct} {a.name}_m2 = {a.name}_vm2[{x}_l];")
            elif a.rtype in ("argmax", "argmin"):
                self.line(f"int64_t {a.name}_idx = {a.name}_vi[{x}_l];")
            else:
                self.line(f"{ct} {a.name} = {a.name}_v[{x}_l];")
        for name, index, value in pending:
            self.ops.store(name, index, value)
        for n in [n for n in g.nodes if g.level[n] == "x"]:
            idx, ridx = node_indices(g, nest, n)
            n.run(self.ops, idx, ridx)
        epilogue = [f"for (int64_t {x}_l = 0; {x}_l < {x}_n; {x}_l++)", "{", f"    int64_t {x} = {x}_b + {x}_l;"] + \
            ["    " + ln for ln in self.block] + ["}"]
        cX = cexpr(X)
        body = [f"const int64_t {x}_n = {cX} - {x}_b < {tile} ? {cX} - {x}_b : {tile};"] + decl + rloop + epilogue
        if is_symbolic(X * R):
            parallel = not known(X < 2 * tile)
            self.par_work = X * R
        else:
            parallel = X * R >= config.cpp_parallel_threshold and X >= 2 * tile
        start, end = ("xc_begin", "xc_end") if parallel else ("0", cX)
        if parallel:
            self.par = (X, tile)
        code = [f"for (int64_t {x}_b = {start}; {x}_b < {end}; {x}_b += {tile})", "{"] + \
            ["    " + ln for ln in body] + ["}"]
        return self.signature(code)

    def column_update(self, a: Acc) -> list[str]:
        return _lane_update(a, f"{self.nest.xvars[0]}_l", mean="_v")

    def wrap_x_loops(self, body: list[str], parallel: bool, simd_inner: bool) -> list[str]:
        nest = self.nest
        n = len(nest.xvars)
        levels = self.hoist(body, n) if not self.group.is_reduction else [[] for _ in range(n)] + [body]
        tiled = simd_inner and self.tiled and n >= 2
        code = levels[n]
        for i in reversed(range(n)):
            v, s = nest.xvars[i], nest.xsizes[i]
            pragma = ["#pragma omp simd"] if i == n - 1 and simd_inner else []
            cs = cexpr(s)
            start, end = ("xc_begin", "xc_end") if i == 0 and parallel else ("0", cs)
            if tiled and i >= n - 2:
                # a tile of TILE x TILE elements of the last two loops at a time (see transposing)
                start, end = f"{v}_t", f"({v}_t + {TILE} < {cs} ? {v}_t + {TILE} : {cs})"
            code = levels[i] + pragma + [f"for (int64_t {v} = {start}; {v} < {end}; {v}++)", "{"] + \
                ["    " + ln for ln in code] + ["}"]
            if tiled and i == n - 2:
                code = self.tile_fills(n) + code
                for j in (n - 1, n - 2):
                    tv, ts = nest.xvars[j], nest.xsizes[j]
                    t0, t1 = ("xc_begin", "xc_end") if j == 0 and parallel else ("0", cexpr(ts))
                    code = [f"for (int64_t {tv}_t = {t0}; {tv}_t < {t1}; {tv}_t += {TILE})", "{"] + \
                        ["    " + ln for ln in code] + ["}"]
        if parallel and n:
            self.par = (nest.xsizes[0], TILE if tiled and n == 2 else 1)
        return code

    def tile_fills(self, n: int) -> list[str]:
        """Declare and fill the tile arrays: the loop along the loads' contiguous dim innermost."""
        if not self.tiles:
            return []
        nest = self.nest
        inner, outer = nest.xvars[n - 1], nest.xvars[n - 2]
        si, so = cexpr(nest.xsizes[n - 1]), cexpr(nest.xsizes[n - 2])
        decl = [f"{ct} {t}[{TILE}][{TILE + 1}];" for t, ct, _ in self.tiles]
        in_end = f"({inner}_t + {TILE} < {si} ? {inner}_t + {TILE} : {si})"
        out_end = f"({outer}_t + {TILE} < {so} ? {outer}_t + {TILE} : {so})"
        return decl + [f"for (int64_t {inner} = {inner}_t; {inner} < {in_end}; {inner}++)",
                       "{", "    #pragma omp simd",
                       f"    for (int64_t {outer} = {outer}_t; {outer} < {out_end}; {outer}++)",
                       "    {"] + ["        " + f for _, _, f in self.tiles] + ["    }", "}"]

    def transposing(self) -> bool:
        """Does a pointwise nest read a buffer contiguously along its second-to-last loop and with
        a stride along the last (a layout conversion: NCHW to channels-last, ``t.transpose()``)?
        Row by row, every such load touches a new cache line (4 KiB apart for a 32x32 image: they
        also collide in the cache); tile by tile, the lines a tile loads are all used."""
        nest = self.nest
        n = len(nest.xvars)
        if n < 2 or known(sympy.sympify(nest.xsizes[-1]) < TILE) or known(sympy.sympify(nest.xsizes[-2]) < TILE) or \
                not config.kernel_tile_transposes:
            return False
        inner, outer = nest.xvars[-1], nest.xvars[-2]
        for kind, name, e in accesses(self.group, nest, self.buffers):
            if kind != "load" or e.has(FloorDiv, ModIndex):
                continue
            ci, co = sympy.diff(e, inner), sympy.diff(e, outer)
            if ci.is_Integer and abs(int(ci)) > 1 and co == 1:
                return True
        return False

    def hoist(self, body: list[str], n: int) -> list[list[str]]:
        """Loop-invariant code motion for a pointwise nest: ``levels[i]`` runs before loop ``i``
        (inside loop ``i - 1``), ``levels[n]`` in the innermost loop.  A value computed once per
        outer index (an embedding row's index and its check, a broadcast operand) leaves the
        inner loop, so that loop keeps contiguous vector loads.  Stores never move; values only
        read inputs (``__restrict``: no store in the kernel changes them), so order is kept."""
        pos = {str(v): i for i, v in enumerate(self.nest.xvars)}
        levels: list[list[str]] = [[] for _ in range(n + 1)]
        for ln in body:
            deps = getattr(ln, "deps", None)
            if deps is None or any(d not in pos for d in deps):
                levels[n].append(ln)
            else:
                levels[max((pos[d] + 1 for d in deps), default=0)].append(ln)
        return levels

    def reduction_loop(self, nodes) -> list[str]:
        """One loop over the reduction dims running ``nodes`` (r-level pointwise and reductions)."""
        g, nest = self.group, self.nest
        saved_locals, saved_cse = dict(self.locals), dict(self.cse)
        self.block, self.accs, self.pending = [], [], []
        for n in nodes:
            idx, ridx = node_indices(g, nest, n)
            n.run(self.ops, idx, ridx)
        inner, accs, pending = self.block, self.accs, self.pending
        self.locals, self.cse = saved_locals, saved_cse
        rv, rs = nest.rvars, nest.rsizes
        out: list[str] = []
        if not accs:
            code = inner
            for i in reversed(range(len(rv))):
                pragma = ["#pragma omp simd"] if i == len(rv) - 1 else []
                code = pragma + [f"for (int64_t {rv[i]} = 0; {rv[i]} < {cexpr(rs[i])}; {rv[i]}++)", "{"] + \
                    ["    " + ln for ln in code] + ["}"]
            return code
        for a in accs:
            out += self.acc_decl(a)
        last, size = rv[-1], rs[-1]
        nvec = FloorDiv(size, LANES) * LANES if is_symbolic(size) else size // LANES * LANES
        lane_loop = []
        if nvec != 0:
            counts = [f"{a.name}_n += 1; {value_ctype(a.dtype)} {a.name}_w = "
                      f"({value_ctype(a.dtype)})1 / ({value_ctype(a.dtype)}){a.name}_n;"
                      for a in accs if a.rtype == "welford"]
            lane_body = [f"int64_t {last} = {last}_b + {last}_l;"] + inner + \
                [ln for a in accs for ln in self.lane_update(a)]
            lane_loop = [f"for (int64_t {last}_b = 0; {last}_b < {cexpr(nvec)}; {last}_b += {LANES})", "{"] + \
                ["    " + c for c in counts] + \
                ["    #pragma omp simd",
                 f"    for (int64_t {last}_l = 0; {last}_l < {LANES}; {last}_l++)", "    {"] + \
                ["        " + ln for ln in lane_body] + ["    }", "}"]
        tail_loop = []
        if is_symbolic(size) or nvec < size:
            tail_body = inner + [ln for a in accs for ln in self.tail_update(a)]
            tail_loop = [f"for (int64_t {last} = {cexpr(nvec)}; {last} < {cexpr(size)}; {last}++)", "{"] + \
                ["    " + ln for ln in tail_body] + ["}"]
        code = lane_loop + tail_loop
        for i in reversed(range(len(rv) - 1)):
            code = [f"for (int64_t {rv[i]} = 0; {rv[i]} < {cexpr(rs[i])}; {rv[i]}++)", "{"] + \
                ["    " + ln for ln in code] + ["}"]
        out += code
        for a in accs:
            out += self.acc_final(a)
        # the reduction results are per-row values from here on
        self.block = []
        for name, index, value in pending:
            self.ops.store(name, index, value)
        out += self.block
        return out

    def acc_decl(self, a: Acc) -> list[str]:
        ct = value_ctype(a.dtype)
        init = acc_identity(a.rtype, a.dtype)
        if a.rtype == "welford":
            return [f"{ct} {a.name}_vm[{LANES}] = {{}}; {ct} {a.name}_vm2[{LANES}] = {{}}; "
                    f"int64_t {a.name}_n = 0;",
                    f"{ct} {a.name}_tm = 0; {ct} {a.name}_tm2 = 0; int64_t {a.name}_tn = 0;"]
        lines = [f"{ct} {a.name}_v[{LANES}]; {ct} {a.name}_t = {init};",
                 f"for (int l = 0; l < {LANES}; l++) {a.name}_v[l] = {init};"]
        if a.rtype in ("argmax", "argmin"):
            lines.append(f"int64_t {a.name}_vi[{LANES}] = {{}}; int64_t {a.name}_ti = 0;")
        return lines

    def lane_update(self, a: Acc) -> list[str]:
        return _lane_update(a, f"{self.nest.rvars[-1]}_l", mean="_vm")

    def tail_update(self, a: Acc) -> list[str]:
        v, n = a.value, a.name
        if a.rtype == "welford":
            ct = value_ctype(a.dtype)
            return [f"{{ {n}_tn += 1; auto d = {v} - {n}_tm; {n}_tm += d / ({ct}){n}_tn; "
                    f"{n}_tm2 += d * ({v} - {n}_tm); }}"]
        if a.rtype in ("argmax", "argmin"):
            cmp = ">" if a.rtype == "argmax" else "<"
            return [f"{{ bool take = ({v} {cmp} {n}_t) || ({v} != {v} && {n}_t == {n}_t);",
                    f"  {n}_t = take ? {v} : {n}_t; {n}_ti = take ? (int64_t)({a.rindex}) : {n}_ti; }}"]
        return [f"{n}_t = " + COMBINE[a.rtype].format(a=f"{n}_t", v=v) + ";"]

    def acc_final(self, a: Acc) -> list[str]:
        ct = value_ctype(a.dtype)
        n = a.name
        if a.rtype == "welford":
            return [f"{ct} {n}_mean = 0, {n}_m2 = 0, {n}_cnt = 0;",
                    f"for (int l = 0; l < {LANES}; l++) xc_welford_merge({n}_mean, {n}_m2, {n}_cnt, "
                    f"{n}_vm[l], {n}_vm2[l], ({ct}){n}_n);",
                    f"xc_welford_merge({n}_mean, {n}_m2, {n}_cnt, {n}_tm, {n}_tm2, ({ct}){n}_tn);"]
        if a.rtype in ("argmax", "argmin"):
            init = acc_identity(a.rtype, a.dtype)
            rsize = sympy.sympify(self.nest.rsizes[-1])
            return [f"{ct} {n}_val = {init}; int64_t {n}_idx = 0;",
                    f"{{ bool first = true; for (int l = 0; l < {LANES}; l++) {{ if (first) {{ {n}_val = {n}_v[l]; "
                    f"{n}_idx = {n}_vi[l]; first = false; }} else xc_{a.rtype}_merge({n}_val, {n}_idx, {n}_v[l], "
                    f"{n}_vi[l]); }}",
                    f"  if ({cexpr(FloorDiv(rsize, LANES) * LANES)} == 0) {{ {n}_val = {n}_t; {n}_idx = {n}_ti; }}",
                    f"  else if ({cexpr(ModIndex(rsize, LANES))} != 0) xc_{a.rtype}_merge({n}_val, {n}_idx, "
                    f"{n}_t, {n}_ti); }}"]
        return [f"{ct} {n} = {n}_t;",
                f"for (int l = 0; l < {LANES}; l++) {n} = " + COMBINE[a.rtype].format(a=n, v=f"{n}_v[l]") + ";"]


def _packed_entry(ptypes: list[str], sizes: list[str], returns: bool) -> str:
    """``kernel_packed(ptrs, sizes)``: the kernel called with its pointers and sizes from two
    arrays, the entry ``_C.KernelLauncher`` calls (it reads the tensors' data pointers in C). A
    float argument comes as the int64 of its bits (the wrapper's ``xf0_bits``)."""
    args = [f"({t})xc_p[{i}]" for i, t in enumerate(ptypes)] + \
        [f"__builtin_bit_cast(double, xc_s[{i}])" if FLOAT_NAME.fullmatch(s) else f"xc_s[{i}]"
         for i, s in enumerate(sizes)]
    call = f"kernel({', '.join(args)})"
    body = f"return {call};" if returns else f"{call}; return 0;"
    return f'extern "C" int64_t kernel_packed(void* const* xc_p, const int64_t* xc_s) {{ {body} }}'


def generate_cpp(group: Group, buffers: dict, size_names: frozenset[str] = frozenset(),
                 aliased: frozenset[str] = frozenset()) -> tuple[str, list[tuple[str, bool]], list, list[str]]:
    """(kernel source without the prelude, [(buffer, written) in parameter order], the
    ``IndexCheck`` per check site: non-empty means the kernel returns an error code, the size
    symbols it takes after the pointers). ``aliased``: buffers that share memory (an input and
    the value written into it in place, ``inplace.py``)."""
    w = CppKernelWriter(group, buffers, group.name, size_names, aliased)
    src = w.generate()
    return src, [(b, wr) for b, (_, wr) in w.params.items()], list(w.checks), w.size_params


_PRELUDE: dict[bool, str] = {}


def cpp_prelude() -> str:
    simd = config.cpp_simd_math
    if simd is None:
        simd = have_libmvec()
    if simd not in _PRELUDE:
        _PRELUDE[simd] = prelude(simd)
    return _PRELUDE[simd]


def _lane_update(a: Acc, lane: str, *, mean: str) -> list[str]:
    """One vector lane's accumulator update; ``mean`` names the Welford running-mean array."""
    v, n = a.value, a.name
    if a.rtype == "welford":
        return [f"{{ auto d = {v} - {n}{mean}[{lane}]; {n}{mean}[{lane}] += d * {n}_w; "
                f"{n}_vm2[{lane}] += d * ({v} - {n}{mean}[{lane}]); }}"]
    if a.rtype in ("argmax", "argmin"):
        cmp = ">" if a.rtype == "argmax" else "<"
        return [f"{{ bool take = ({v} {cmp} {n}_v[{lane}]) || ({v} != {v} && {n}_v[{lane}] == {n}_v[{lane}]);",
                f"  {n}_v[{lane}] = take ? {v} : {n}_v[{lane}]; "
                f"{n}_vi[{lane}] = take ? (int64_t)({a.rindex}) : {n}_vi[{lane}]; }}"]
    return [f"{n}_v[{lane}] = " + COMBINE[a.rtype].format(a=f"{n}_v[{lane}]", v=v) + ";"]
