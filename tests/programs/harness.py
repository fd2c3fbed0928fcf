"""Run a generated program (tests/programs/proggen.py) eagerly and compiled, and compare.

``check(prog, backend)`` loads two fresh copies of the program (each with its own globals and
closures), compiles one with ``xcompile.compile(f, backend=backend)`` and makes the program's
calls on both with the same fresh random arguments.  After every call it compares

* the outputs: container types and keys, Python values, and for every tensor its dtype, shape,
  requires_grad, values, strides (where eager's output is dense, or aliases an input), which
  inputs it *is* and whose storage it shares (with the same storage offset and strides), and
  which other outputs it is or shares storage with;
* every argument after the call (values, shape, strides: mutation of inputs and of views of
  them; an argument list's length and elements), the program's module global ``G``;
* the grad mode after the call;
* the gradients: ``backward`` of a weighted sum of the outputs that require grad, then ``.grad``
  of every leaf behind the arguments (None against a tensor included).

A program whose eager run raises (forward or backward) is discarded.  ``Result.status`` is
``ok`` | ``wrong`` (a difference) | ``error`` (xcompile raised where eager did not) |
``discard``; ``tests/programs/fuzz.py`` adds ``crash`` (the process died or hung).
"""
from __future__ import annotations

import linecache
import math
import os
import traceback
import warnings
from dataclasses import dataclass

import torch

import xcompile

from .proggen import Block, Program, make_args

TOL = {torch.float32: dict(rtol=1e-4, atol=1e-4), torch.float64: dict(rtol=1e-7, atol=1e-9)}


@dataclass
class Result:
    status: str               # ok | wrong | error | discard (| crash, from fuzz.py)
    msg: str = ""
    call: int = -1
    compiled_error: str = ""  # the exception type, for an error

    def __bool__(self):
        return self.status in ("wrong", "error", "crash")


class _Discard(Exception):
    pass


class _Wrong(Exception):
    pass


def _storage(t: torch.Tensor):
    return t.untyped_storage().data_ptr() if t.numel() else None


def _flat(v, path="out"):
    """(path, tensor) for every tensor in a nest of tuples/lists/dicts."""
    if isinstance(v, torch.Tensor):
        yield path, v
    elif isinstance(v, (tuple, list)):
        for i, e in enumerate(v):
            yield from _flat(e, f"{path}[{i}]")
    elif isinstance(v, dict):
        for k, e in v.items():
            yield from _flat(e, f"{path}[{k!r}]")


def _dense(t: torch.Tensor) -> bool:
    return t.is_contiguous() or t.t().is_contiguous() if t.dim() == 2 else t.is_contiguous()


def _sig_strides(t):
    return tuple(s for n, s in zip(t.shape, t.stride()) if n > 1)


def _tensor(a, e, path, tol, aliases_input=False):
    if a.dtype != e.dtype:
        raise _Wrong(f"{path}: dtype {a.dtype} != eager {e.dtype}")
    if a.shape != e.shape:
        raise _Wrong(f"{path}: shape {tuple(a.shape)} != eager {tuple(e.shape)}")
    if a.requires_grad != e.requires_grad:
        raise _Wrong(f"{path}: requires_grad {a.requires_grad} != eager {e.requires_grad}")
    if (_dense(e) or aliases_input) and _sig_strides(a) != _sig_strides(e):
        raise _Wrong(f"{path}: stride {a.stride()} != eager {e.stride()}")
    try:
        torch.testing.assert_close(a.detach(), e.detach(), equal_nan=True, check_stride=False, **tol)
    except AssertionError as ex:
        raise _Wrong(f"{path}: values differ: {str(ex).strip().splitlines()[0:4]}") from None


def same(a, e, path, tol):
    """Structure and values (tensors by _tensor, floats within tolerance)."""
    if type(a) is not type(e):
        raise _Wrong(f"{path}: type {type(a).__name__} != eager {type(e).__name__}")
    if isinstance(e, torch.Tensor):
        _tensor(a, e, path, tol)
    elif isinstance(e, (tuple, list)):
        if len(a) != len(e):
            raise _Wrong(f"{path}: length {len(a)} != eager {len(e)}")
        for i, (x, y) in enumerate(zip(a, e)):
            same(x, y, f"{path}[{i}]", tol)
    elif isinstance(e, dict):
        if list(a) != list(e):
            raise _Wrong(f"{path}: keys {list(a)} != eager {list(e)}")
        for k in e:
            same(a[k], e[k], f"{path}[{k!r}]", tol)
    elif isinstance(e, float):
        if not (math.isnan(a) and math.isnan(e)) and not math.isclose(a, e, rel_tol=1e-4, abs_tol=1e-5) \
                and not (math.isinf(a) and a == e):
            raise _Wrong(f"{path}: {a!r} != eager {e!r}")
    elif a != e:
        raise _Wrong(f"{path}: {a!r} != eager {e!r}")


def _aliasing(out_a, out_e, args_a, args_e, tol):
    """Which arguments and other outputs each output is / shares storage with, as in eager."""
    fa, fe = list(_flat(out_a)), list(_flat(out_e))
    ia = [t for _, t in _flat(args_a, "arg")]
    ie = [t for _, t in _flat(args_e, "arg")]
    for k, ((path, a), (_, e)) in enumerate(zip(fa, fe)):
        is_a = [i for i, x in enumerate(ia) if a is x]
        is_e = [i for i, x in enumerate(ie) if e is x]
        if is_a != is_e:
            raise _Wrong(f"{path}: is argument {is_a} != eager {is_e}")
        sh_a = [i for i, x in enumerate(ia) if _storage(a) is not None and _storage(a) == _storage(x)]
        sh_e = [i for i, x in enumerate(ie) if _storage(e) is not None and _storage(e) == _storage(x)]
        if sh_a != sh_e:
            raise _Wrong(f"{path}: shares storage with arguments {sh_a} != eager {sh_e}")
        if sh_e:
            if a.storage_offset() != e.storage_offset() or _sig_strides(a) != _sig_strides(e):
                raise _Wrong(f"{path}: a view of an argument at offset {a.storage_offset()} strides "
                             f"{a.stride()} != eager {e.storage_offset()} {e.stride()}")
        for j in range(k):
            if (a is fa[j][1]) != (e is fe[j][1]):
                raise _Wrong(f"{path} is {fa[j][0]}: {a is fa[j][1]} != eager {e is fe[j][1]}")
            if _storage(e) is not None and ((_storage(a) == _storage(fa[j][1])) != (_storage(e) == _storage(fe[j][1]))):
                raise _Wrong(f"{path} shares storage with {fa[j][0]}: {_storage(a) == _storage(fa[j][1])} != eager")


def _args_after(args_a, args_e, kw_a, kw_e, tol):
    for i, (a, e) in enumerate(zip(args_a, args_e)):
        if isinstance(e, torch.Tensor):
            if a.shape != e.shape or a.stride() != e.stride() or a.storage_offset() != e.storage_offset():
                raise _Wrong(f"argument {i} after the call: shape/stride/offset {tuple(a.shape)} {a.stride()} "
                             f"{a.storage_offset()} != eager {tuple(e.shape)} {e.stride()} {e.storage_offset()}")
        same(a, e, f"argument {i} after the call", tol)


def _loss_terms(out, seed) -> list:
    g = torch.Generator().manual_seed(seed)
    terms = []
    for _, t in _flat(out):
        if t.requires_grad and t.is_floating_point():
            w = torch.rand(t.shape, generator=g, dtype=torch.float64).to(t.dtype) + 0.5
            terms.append((t * w).sum())
    return terms


def _loss(out, seed):
    terms = _loss_terms(out, seed)
    return sum(terms) if terms else None


def _ill_conditioned(f_e, factory, grad, seed, tol) -> bool:
    """Whether eager's own gradients change beyond ``tol`` when its terms are accumulated in
    another order: each output's term differentiated alone, then summed. Then eager's answer is
    one rounding among several (a normalize of a zero vector makes 1e12-sized gradients that
    ``a - a`` cancels: eager's float32 sum loses the rest, which float64 and the compiled order
    keep), and the program cannot judge a compiler. Runs eager once more (the caller reports
    a difference right after, so the program's state moving on does not matter)."""
    try:
        out, _, _, _, leaves = _one_call(f_e, factory, grad)
        terms = _loss_terms(out, seed)
        wrt = [t for t in leaves if t.requires_grad]
        if not terms or not wrt:
            return False
        alone = [torch.autograd.grad(term, wrt, retain_graph=True, allow_unused=True) for term in terms]
        together = torch.autograd.grad(sum(terms), wrt, allow_unused=True)
    except Exception:  # noqa: BLE001
        return False
    for k, g in enumerate(together):
        parts = [a[k] for a in alone if a[k] is not None]
        if g is None or not parts:
            continue
        try:
            _tensor(sum(parts), g, "", {key: v * 10 for key, v in tol.items()})
        except _Wrong:
            return True
    return False


def _one_call(fn, factory, grad):
    args, kwargs, leaves = factory()
    prev = torch.is_grad_enabled()
    torch.set_grad_enabled(grad)
    try:
        out = fn(*args, **kwargs)
        grad_after = torch.is_grad_enabled()
    finally:
        torch.set_grad_enabled(prev)
    return out, grad_after, args, kwargs, leaves


def check(prog: Program, backend: str, *, seed_base: int = 0) -> Result:
    xcompile.reset()
    tol = TOL[prog.dtype]
    prev_grad = torch.is_grad_enabled()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return _check(prog, backend, tol, seed_base)
        finally:
            torch.set_grad_enabled(prev_grad)
            xcompile.reset()


def _check(prog, backend, tol, seed_base) -> Result:
    try:
        f_e, ns_e = prog.load()
        f_c, ns_c = prog.load()
    except Exception as ex:  # noqa: BLE001
        return Result("discard", f"does not load: {ex}")
    calls = [(lambda call=call, i=i: make_args(prog, call, seed_base + 7919 * prog.seed + i), call.grad)
             for i, call in enumerate(prog.calls)]
    return compare_calls(f_e, ns_e, f_c, ns_c, backend, calls, tol, seed=seed_base + prog.seed)


def check_source(src: str, make_args, backend: str, *, calls=1, grad=True, dtype=torch.float32) -> Result:
    """A regression test's program: ``src`` defines ``f``; ``make_args(i)`` gives call i's fresh
    (args, kwargs, leaves) and is called twice per call (eager, compiled)."""
    def load():
        name = "regression_program.py"
        linecache.cache[name] = (len(src), None, src.splitlines(True), name)
        ns: dict = {"__name__": "regression_program"}
        exec(compile(src, name, "exec"), ns)  # noqa: S102  (a program made by the test)
        return ns["f"], ns
    xcompile.reset()
    prev_grad = torch.is_grad_enabled()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            f_e, ns_e = load()
            f_c, ns_c = load()
            grads = grad if isinstance(grad, (list, tuple)) else [grad] * calls
            return compare_calls(f_e, ns_e, f_c, ns_c, backend,
                                 [(lambda i=i: make_args(i), grads[i]) for i in range(calls)], TOL[dtype], seed=0)
        finally:
            torch.set_grad_enabled(prev_grad)
            xcompile.reset()


def compare_calls(f_e, ns_e, f_c, ns_c, backend, calls, tol, seed=0) -> Result:
    """Compile f_c and make each call (a factory of (args, kwargs, leaves), the grad mode) on
    both copies; compare after every call."""
    dynamic = True if os.environ.get("XCOMPILE_FUZZ_DYNAMIC") == "1" else None   # fuzz.py --dynamic
    mode = None
    if os.environ.get("XCOMPILE_FUZZ_CUDAGRAPHS") == "1":                          # fuzz.py --cudagraphs
        mode = "reduce-overhead" if backend == "inductor" else None
        calls = list(calls) * 3                    # warm-up, recording, replays
    compiled = xcompile.compile(f_c, backend=backend, dynamic=dynamic, mode=mode)
    for i, (factory, grad) in enumerate(calls):
        torch.set_grad_enabled(True)
        # eager first, forward and backward: a program eager rejects is discarded
        try:
            out_e, grad_e, args_e, kw_e, leaves_e = _one_call(f_e, factory, grad)
            loss_e = _loss(out_e, seed + i)
            if loss_e is not None:
                loss_e.backward()
        except Exception as ex:  # noqa: BLE001
            return Result("discard", f"call {i}: eager raised {type(ex).__name__}: {ex}", i)
        try:
            out_c, grad_c, args_c, kw_c, leaves_c = _one_call(compiled, factory, grad)
        except Exception as ex:  # noqa: BLE001
            return Result("error", f"call {i}: compiled raised {_short(ex)}", i, type(ex).__name__)
        try:
            same(out_c, out_e, "out", tol)
            _aliasing(out_c, out_e, args_c, args_e, tol)
            _args_after(args_c, args_e, kw_c, kw_e, tol)
            if grad_c != grad_e:
                raise _Wrong(f"grad mode after the call {grad_c} != eager {grad_e}")
            if "G" in ns_e:
                same(ns_c["G"], ns_e["G"], "global G", tol)
        except _Wrong as ex:
            return Result("wrong", f"call {i}: {ex}", i)
        try:
            loss_c = _loss(out_c, seed + i)
            if loss_c is not None:
                loss_c.backward()
        except Exception as ex:  # noqa: BLE001
            return Result("error", f"call {i}: compiled backward raised {_short(ex)}", i, type(ex).__name__)
        try:
            if (loss_c is None) != (loss_e is None):
                raise _Wrong("an output requires grad in one and not in the other")
            for k, (a, e) in enumerate(zip(leaves_c, leaves_e)):
                if (a.grad is None) != (e.grad is None):
                    raise _Wrong(f"leaf {k}: grad is None: {a.grad is None} != eager {e.grad is None}")
                if e.grad is not None:
                    _tensor(a.grad, e.grad, f"grad of leaf {k}", {k: v * 10 for k, v in tol.items()})
        except _Wrong as ex:
            if _ill_conditioned(f_e, factory, grad, seed + i, tol):
                return Result("discard", f"call {i}: eager's gradients are ill-conditioned ({ex})", i)
            return Result("wrong", f"call {i}: {ex}", i)
    return Result("ok")


def _short(ex: BaseException) -> str:
    tb = traceback.extract_tb(ex.__traceback__)
    where = next((f"{fr.filename.split('python/')[-1]}:{fr.lineno}" for fr in reversed(tb)
                  if "/xcompile/" in fr.filename), "")
    msg = " ".join(str(ex).split())[:300]
    cause = ex.__cause__ or ex.__context__
    if cause is not None and str(cause) not in str(ex):
        msg += f" <- {type(cause).__name__}: {' '.join(str(cause).split())[:300]}"
    return f"{type(ex).__name__}: {msg}" + (f" (at {where})" if where else "")


# ------------------------------------------------------------------------------ minimizing


def _paths(nodes, prefix=()):
    """Every node's path in a nested body (deepest last within each block)."""
    for i, n in enumerate(nodes):
        yield prefix + (i,)
        if isinstance(n, Block):
            yield from _paths(n.body, prefix + (i, "body"))
            if n.orelse is not None:
                yield from _paths(n.orelse, prefix + (i, "orelse"))


def _edit(nodes, path, fn):
    """A copy of nodes with fn(list, index) applied at path."""
    nodes = list(nodes)
    if len(path) == 1:
        fn(nodes, path[0])
        return nodes
    i, part = path[0], path[1]
    b = nodes[i]
    b = Block(b.head, list(b.body), None if b.orelse is None else list(b.orelse), b.else_head)
    setattr(b, part, _edit(getattr(b, part), path[2:], fn))
    nodes[i] = b
    return nodes


def _get(nodes, path):
    n = nodes[path[0]]
    if len(path) == 1:
        return n
    return _get(getattr(n, path[1]), path[2:])


def _candidates(prog: Program):
    """Smaller programs: one node dropped, a block replaced by one of its bodies, a call, a
    returned value or a helper dropped, a call made plainer."""
    body = prog.body
    for path in reversed(list(_paths(body))):
        def drop(ns, i):
            del ns[i]
        yield prog.replace(body=_edit(body, path, drop))
        n = _get(body, path)
        if isinstance(n, Block):
            for part in ("body", "orelse"):
                sub = getattr(n, part)
                if sub is not None:
                    def hoist(ns, i, sub=sub):
                        ns[i:i + 1] = sub
                    yield prog.replace(body=_edit(body, path, hoist))
    if len(prog.calls) > 1:
        for i in range(len(prog.calls)):
            yield prog.replace(calls=prog.calls[:i] + prog.calls[i + 1:])
    for i, h in enumerate(prog.helpers):
        yield prog.replace(helpers=prog.helpers[:i] + prog.helpers[i + 1:])
        for path in reversed(list(_paths(h.nodes))):
            def drop(ns, i):
                del ns[i]
            nh = list(prog.helpers)
            nh[i] = type(h)(h.name, h.where, _edit(h.nodes, path, drop))
            yield prog.replace(helpers=nh)
    if prog.closure_vars:
        yield prog.replace(closure_vars=[])
    for flag in ("uses_global", "need_box", "need_counter"):
        if getattr(prog, flag):
            yield prog.replace(**{flag: False})
    r = prog.ret
    if r.startswith("(") and r.count(",") > 1:
        items = [x.strip() for x in r[1:-1].split(",") if x.strip()]
        for i in range(len(items)):
            rest = items[:i] + items[i + 1:]
            yield prog.replace(ret="(" + "".join(f"{x}, " for x in rest) + ")")
    import copy as _copy
    for i, c in enumerate(prog.calls):
        for field_, plain in (("alias", "none"), ("grad", True), ("kw", False), ("omit", ())):
            if getattr(c, field_) != plain:
                c2 = _copy.deepcopy(c)
                setattr(c2, field_, plain)
                yield prog.replace(calls=prog.calls[:i] + [c2] + prog.calls[i + 1:])
        for name, kind in c.kinds.items():
            if kind != "plain":
                c2 = _copy.deepcopy(c)
                c2.kinds[name] = "plain"
                yield prog.replace(calls=prog.calls[:i] + [c2] + prog.calls[i + 1:])


def minimize(prog: Program, backend: str, result: Result, budget: int = 400) -> Program:
    """Shrink while the program fails the same way (same status, same exception type)."""
    def same_failure(r: Result) -> bool:
        return r.status == result.status and r.compiled_error == result.compiled_error
    cur = prog
    changed = True
    while changed and budget > 0:
        changed = False
        for cand in _candidates(cur):
            budget -= 1
            if budget <= 0:
                break
            if same_failure(check(cand, backend)):
                cur, changed = cand, True
                break
    return cur
