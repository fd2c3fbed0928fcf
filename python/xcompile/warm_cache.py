"""Warm start: compiled graphs reused by a later process.

A fresh process still runs the frontend (the bytecode trace: it decides the graph and builds the
guards, so a warm entry is used exactly where a fresh compile would make the same graph).  What
it skips is the backend's work for that graph: for backend "inductor", the ATen trace
(``trace_aten``), lowering, fusion, code generation and the C++ builds of an inference graph
(``graph_key``); for the graphs AOT autograd makes (a training step's forward and backward, an
inference graph that writes into its inputs) the joint trace and partition still run and the
kernel compile of each ATen graph is reused (``compile_cached``, keyed the same way by the ATen
graph, trace-made constants by value).  Each compiled graph is kept as an entry under
``<cache_dir>/warm/<key>.bin`` where ``key`` hashes everything that compile depends on:

- the captured FX graph, canonically (ops by qualified name, resolved back to the very object;
  arguments by value; anything else, such as a user function allowed in the graph, a
  ``call_module`` or a non-tensor attribute, means the graph is not cached at all);
- the metadata of its inputs and of the parameters/buffers it reads (sizes, strides, offsets,
  dtypes, devices, requires_grad, which of them share memory), never their values -- the
  compiled wrapper reads parameters through references bound at load time, as a fresh compile does;
- the grad / inference / autocast modes, the default dtype, every ``xcompile.config`` knob;
- the environment: torch, Python and xcompile versions, a hash of xcompile's own sources,
  the C++ compiler, its flags and the CPU (what ``-march=native`` depends on).

An entry holds the generated wrapper's source, a description of each of its globals (a kernel
as its shared object's key and symbol, an ATen op by name, a torch function by module and
name, a tensor constant by value; a global it cannot describe means no entry), and the
kernels' metadata.  Entries are pickles read with an unpickler that only builds our own plain
types, sympy expressions and torch dtypes/devices; tensors go through ``torch.load(weights_only=True)``.

``save_cache_artifacts()`` (warm_artifacts.py) bundles the entries this process made or used, with their shared
objects, into bytes; ``load_cache_artifacts(data)`` checks them (magic, checksum, environment)
and writes them into the cache directory.  Anything stale, foreign or damaged is ignored with a
log line (``xcompile.warm_cache``) and the graph is compiled as usual.
The checks guard against stale and damaged bytes, not against malice: the bundle carries shared
objects that get loaded, so load only artifacts you made (as with ``torch.load`` of a pickle).

Counters: ``xcompile.counters["warm"]``: ``hits``, ``misses``, ``stored``, ``ignored``,
``uncacheable``.
"""
from __future__ import annotations

import hashlib
import io
import logging
import math
import os
import pickle
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

import torch
import torch.fx

from . import cache_dir, config, log
from .kernels.cache import CPP_FLAGS, _link_flags, _machine, compiler, load_cpp
from .kernels.cache import cache_dir as kernels_root
from .kernels.wrapper import Kernel, _op_callable, build_wrapper
from .stats import counters

FORMAT = 1
MAGIC = b"XCOMPILE-WARM\x00"
_ENTRY_MAGIC = b"XCWE1\x00"

_logger = logging.getLogger("xcompile.warm_cache")

# entries this process stored or used: what save_cache_artifacts() bundles
_session: dict[str, Path] = {}


class _Uncacheable(Exception):
    """The graph (or its compiled wrapper) holds something we cannot key or rebuild."""


def _ignored(msg: str, *args) -> None:
    counters["warm"]["ignored"] += 1
    _logger.warning("xcompile warm start: " + msg, *args)


# -- the environment -------------------------------------------------------------------------

_ENV: str | None = None


def _source_hash() -> str:
    """A hash of xcompile's own Python sources and extension: a changed generator never reads
    another version's entries."""
    h = hashlib.sha256()
    pkg = Path(__file__).resolve().parent
    # what turns a captured graph into a compiled one (the frontend's work is the graph, keyed
    # as such; an xcompile function called in a graph adds its own file's hash)
    parts = ("kernels", "backends", "aot", "warm_cache.py", "cache_dir.py", "config.py")
    for p in sorted(pkg.rglob("*")):
        rel = p.relative_to(pkg).parts
        if (rel[0] in parts or p.suffix in (".so", ".pyd")) and p.suffix in (".py", ".so", ".pyd") \
                and "__pycache__" not in rel:
            try:
                h.update(str(p.relative_to(pkg)).encode())
                h.update(p.read_bytes())
            except OSError:
                continue
    return h.hexdigest()


def environment() -> str:
    """What every entry depends on beyond its graph (computed once per process)."""
    global _ENV
    if _ENV is None:
        parts = [f"format={FORMAT}", f"torch={torch.__version__}", f"xcompile={_xcompile_version()}",
                 f"python={sys.version}", f"sources={_source_hash()}", f"cxx={compiler()}",
                 f"flags={' '.join(CPP_FLAGS + _link_flags())}", f"machine={_machine()}"]
        _ENV = hashlib.sha256("\n".join(parts).encode()).hexdigest()
    return _ENV


def _xcompile_version() -> str:
    return str(getattr(sys.modules.get("xcompile"), "__version__", "?"))


def _versions() -> dict:
    return {"torch": str(torch.__version__), "xcompile": _xcompile_version(), "python": sys.version.split()[0]}


# -- the key of one graph ----------------------------------------------------------------------

_LEAVES = (type(None), bool, int, float, str, complex, torch.dtype, torch.device, torch.layout,
           torch.memory_format)
_MODULES = ("torch", "operator", "_operator", "math", "builtins", "xcompile")
_KEY_SKIP = {"cache_dir", "cache_size_cap_mb", "warm_start"}


def _resolve(module: str, qualname: str) -> Any:
    obj: Any = sys.modules.get(module)
    if obj is None:
        raise _Uncacheable(f"module {module} not imported")
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def _qualified(fn) -> tuple[str, str]:
    """(module, qualname) naming ``fn`` itself, or _Uncacheable."""
    module = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    if isinstance(fn, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        raise _Uncacheable("op")            # handled by the caller
    if not module or not qualname or "<" in qualname:
        raise _Uncacheable(f"callable {fn!r} has no importable name")
    if module.split(".")[0] not in _MODULES:
        raise _Uncacheable(f"{module}.{qualname} is not torch's or the standard library's")
    # torch's C functions: __qualname__ "_VariableFunctionsClass.softmax", found as torch.softmax
    for name in dict.fromkeys((qualname, getattr(fn, "__name__", None) or qualname)):
        try:
            if _resolve(module, name) is fn:
                return module, name
        except (AttributeError, _Uncacheable):
            pass
    raise _Uncacheable(f"{module}.{qualname} does not name {fn!r}")


def _target(t) -> str:
    if isinstance(t, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        return f"op:{t}"
    if isinstance(t, str):
        return f"str:{t}"
    module, qualname = _qualified(t)
    if module.split(".")[0] == "xcompile":
        return f"fn:{module}:{qualname}:{_file_hash(module)}"
    return f"fn:{module}:{qualname}"


def _file_hash(module: str) -> str:
    path = getattr(sys.modules.get(module), "__file__", None)
    if not path:
        raise _Uncacheable(f"module {module} has no file")
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _arg(a) -> str:
    if isinstance(a, torch.fx.Node):
        return f"%{a.name}"
    if isinstance(a, (tuple, list)):
        inner = ",".join(_arg(x) for x in a)
        return f"{type(a).__name__}({inner})"
    if isinstance(a, dict):
        if not all(isinstance(k, str) for k in a):
            raise _Uncacheable("dict argument with non-str keys")
        return "dict(" + ",".join(f"{k}={_arg(v)}" for k, v in a.items()) + ")"
    if isinstance(a, slice):
        return f"slice({_arg(a.start)},{_arg(a.stop)},{_arg(a.step)})"
    if a is Ellipsis:
        return "..."
    if type(a) in _LEAVES:
        if isinstance(a, float) and not math.isfinite(a):
            return f"float:{a!r}"
        return f"{type(a).__name__}:{a!r}"
    raise _Uncacheable(f"argument of type {type(a).__name__}")


def _tensor_meta(t: torch.Tensor, storages: dict) -> str:
    kind = type(t).__name__
    if kind not in ("Tensor", "Parameter", "FakeTensor") or type(t).__module__ not in \
            ("torch", "torch.nn.parameter", "torch._subclasses.fake_tensor") or t.layout != torch.strided \
            or t.is_quantized or t.device.type == "meta":
        raise _Uncacheable(f"input of type {kind} / layout {t.layout} / device {t.device}")
    if not all(type(d) is int for d in (*t.shape, *t.stride(), t.storage_offset())):
        raise _Uncacheable("symbolic sizes")
    # which inputs share memory: numbered by storage (one StorageImpl for a tensor and its views)
    sid = storages.setdefault(t.untyped_storage()._cdata, len(storages))
    return (f"T({kind},{tuple(t.shape)},{t.stride()},{t.storage_offset()},{t.dtype},{t.device},"
            f"rg={t.requires_grad},leaf={t.is_leaf},conj={t.is_conj()},neg={t.is_neg()},"
            f"inf={t.is_inference()},storage={sid})")


def _value_meta(v, storages: dict) -> str:
    if isinstance(v, torch.Tensor):
        return _tensor_meta(v, storages)
    if type(v) in (bool, int, float):
        return f"{type(v).__name__}:{v!r}"
    raise _Uncacheable(f"input of type {type(v).__name__}")


def _modes() -> str:
    return (f"grad={torch.is_grad_enabled()},infer={torch.is_inference_mode_enabled()},"
            f"autocast={torch.is_autocast_enabled('cpu')}:{torch.get_autocast_dtype('cpu')},"
            f"default_dtype={torch.get_default_dtype()},det={torch.are_deterministic_algorithms_enabled()},"
            f"det_fill={torch._C._get_deterministic_fill_uninitialized_memory()},"
            f"mkldnn={torch.backends.mkldnn.enabled},matmul={torch.get_float32_matmul_precision()}")


def _knobs() -> str:
    return repr(sorted((k, repr(getattr(config, k))) for k in config._knobs() if k not in _KEY_SKIP))


def _constant(gm: torch.fx.GraphModule, target: str) -> str:
    """A tensor attribute of an ATen graph (a constant the trace made), by value."""
    obj: Any = gm
    for part in target.split("."):
        obj = getattr(obj, part)
    if not isinstance(obj, torch.Tensor) or type(obj) not in (torch.Tensor, torch.nn.Parameter) or \
            obj.device.type != "cpu" or obj.layout != torch.strided:
        raise _Uncacheable(f"attribute {target} of type {type(obj).__name__}")
    data = obj.detach().contiguous().view(torch.uint8).numpy().tobytes() if obj.numel() else b""
    return f"const({_tensor_meta(obj, {})},{hashlib.sha256(data).hexdigest()})"


def graph_key(backend: str, gm: torch.fx.GraphModule, inputs: list, state: list,
              attr_slot: dict | None, extra: str = "") -> str | None:
    """The key of compiling ``gm`` on ``inputs`` (with ``state``, the tensors its ``get_attr``
    nodes read, at the slots ``attr_slot`` gives; ``attr_slot`` None: attributes are constants,
    keyed by value); None where the graph cannot be cached."""
    if not config.warm_start or getattr(config, "repro_after", None) is not None:
        return None         # (the minifier checks each compile: it must see one)
    try:
        lines = [f"backend={backend}", extra, environment(), _modes(), _knobs()]
        storages: dict = {}
        lines += [f"in{i}={_value_meta(v, storages)}" for i, v in enumerate(inputs)]
        lines += [f"state{i}={_value_meta(v, storages)}" for i, v in enumerate(state)]
        for n in gm.graph.nodes:
            if n.op == "get_attr" and attr_slot is None:
                lines.append(f"{n.name}=get_attr:{_constant(gm, n.target)}")
            elif n.op == "get_attr":
                assert attr_slot is not None
                if n.target not in attr_slot:
                    raise _Uncacheable(f"attribute {n.target} is not a tensor")
                lines.append(f"{n.name}=get_attr:state{attr_slot[n.target]}")
            elif n.op == "call_module":
                raise _Uncacheable("call_module node")
            elif n.op in ("placeholder", "output"):
                lines.append(f"{n.name}={n.op}({_arg(n.args)})")
            else:
                lines.append(f"{n.name}={n.op}:{_target(n.target)}({_arg(n.args)};{_arg(n.kwargs)})")
    except _Uncacheable as e:
        counters["warm"]["uncacheable"] += 1
        log.log("warm_cache", "not cached: %s", e)
        return None
    except Exception as e:  # noqa: BLE001 - the key never fails a compile: no key, no reuse
        counters["warm"]["uncacheable"] += 1
        log.log("warm_cache", "not cached (no key: %s: %s)", type(e).__name__, e)
        return None
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:40]


# -- entries ------------------------------------------------------------------------------------

def _dir() -> Path:
    return cache_dir.root() / "warm"


def _entry_path(key: str) -> Path:
    return _dir() / f"{key}.bin"


class _Unpickler(pickle.Unpickler):
    """Only our own plain types, sympy, and torch's dtypes/devices."""

    _BUILTINS = {"int", "float", "complex", "bool", "str", "bytes", "tuple", "list", "dict", "set",
                 "frozenset", "slice", "IndexError", "RuntimeError", "ValueError"}
    _TORCH = {"device", "dtype", "layout", "memory_format", "Size"}
    _OURS = {("xcompile.kernels.ir", "IndexCheck"), ("xcompile.kernels.wrapper", "Kernel")}

    def find_class(self, module, name):
        if module == "builtins" and name in self._BUILTINS:
            return super().find_class(module, name)
        if module == "torch" and (name in self._TORCH or isinstance(getattr(torch, name, None), torch.dtype)):
            return super().find_class(module, name)
        if module == "copyreg" and name in ("__newobj__", "__newobj_ex__", "_reconstructor"):
            return super().find_class(module, name)
        if (module.split(".")[0] == "sympy" or (module, name) in self._OURS) and \
                isinstance(obj := super().find_class(module, name), type):
            return obj          # classes only (never a function such as sympify, which evaluates text)
        raise pickle.UnpicklingError(f"{module}.{name} is not allowed in a warm-start entry")


def _loads(data: bytes):
    return _Unpickler(io.BytesIO(data)).load()


def _seal(payload: bytes, magic: bytes) -> bytes:
    return magic + hashlib.sha256(payload).digest() + payload


def _unseal(data: bytes, magic: bytes) -> bytes | None:
    if not data.startswith(magic) or len(data) < len(magic) + 32:
        return None
    digest, payload = data[len(magic):len(magic) + 32], data[len(magic) + 32:]
    return payload if hashlib.sha256(payload).digest() == digest else None


def _write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix="tmp", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _describe(name: str, v, bound_ids: dict, ops: dict, tensors: dict) -> tuple:
    if id(v) in bound_ids:
        return ("bound", bound_ids[id(v)])
    spec = getattr(v, "xcompile_so", None)
    if spec is not None:
        return ("kernel", spec)
    if isinstance(v, Kernel):
        if v.kind != "cpp":
            raise _Uncacheable("non-C++ kernel")
        fn_spec = getattr(v.fn, "xcompile_so", None)
        bad = getattr(v.bad_index, "xcompile_so", None) if v.bad_index is not None else None
        if fn_spec is None or (v.bad_index is not None and bad is None):
            raise _Uncacheable(f"kernel {v.name} was not loaded from the cache")
        info = Kernel(v.name, v.kind, None, v.params, v.source, v.checks, None, v.sizes)  # type: ignore[arg-type]
        return ("kinfo", (fn_spec, bad, info))
    if isinstance(v, torch.Tensor):
        if type(v) is not torch.Tensor:
            raise _Uncacheable(f"constant of type {type(v).__name__}")
        tensors[name] = v
        return ("tensor", name)
    if type(v) in _LEAVES:
        return ("value", v)
    if id(v) in ops:
        return ("op", ops[id(v)])
    if callable(v):
        return ("fn", _qualified(v))
    raise _Uncacheable(f"wrapper global {name} of type {type(v).__name__}")


def _op_names(gms) -> dict:
    """id(the callable a wrapper holds for an ATen overload) -> its name, for every overload
    the graphs call."""
    out = {}
    for gm in gms:
        for n in gm.graph.nodes:
            t = n.target
            if n.op == "call_function" and isinstance(t, torch._ops.OpOverload):
                out[id(_op_callable(t))] = (t.namespace, t._schema.name.split("::")[-1], t._overloadname)
    return out


def store(key: str | None, compiled: Callable, graphs: list, bound: dict) -> None:
    """Keep ``compiled`` (a kernel wrapper from ``compile_aten_graph``) under ``key``;
    ``graphs``: the ATen graphs it was made from (to name the ops it calls)."""
    if key is None or not config.warm_start:
        return
    src = getattr(compiled, "wrapper_src", None)
    glb = getattr(compiled, "__globals__", None)
    if src is None or glb is None:
        return
    try:
        bound_ids = {id(t): i for i, t in bound.items()}
        ops = _op_names(graphs)
        tensors: dict = {}
        described = []
        for name, v in glb.items():
            if name in ("call", "call_boxed", "__builtins__"):     # (the source defines them)
                continue
            described.append((name, _describe(name, v, bound_ids, ops, tensors)))
        kinfos = []
        for k in getattr(compiled, "kernels", []):
            kinfos.append(_describe(k.name, k, {}, {}, {})[1])
        buf = io.BytesIO()
        torch.save(tensors, buf)
        entry = {"key": key, "env": environment(), "src": src, "globals": described,
                 "kernels": kinfos, "fallbacks": list(getattr(compiled, "fallbacks", [])),
                 "tensors": buf.getvalue(), "versions": _versions()}
        data = _seal(pickle.dumps(entry, protocol=4), _ENTRY_MAGIC)
    except _Uncacheable as e:
        counters["warm"]["uncacheable"] += 1
        log.log("warm_cache", "not cached (wrapper): %s", e)
        return
    except Exception as e:  # noqa: BLE001 - a failed store only costs a later compile
        counters["warm"]["uncacheable"] += 1
        log.log("warm_cache", "not cached: %s: %s", type(e).__name__, e)
        return
    path = _entry_path(key)
    try:
        _write_atomic(path, data)
    except OSError as e:
        log.log("warm_cache", "cannot write %s: %s", path, e)
        return
    _session[key] = path
    counters["warm"]["stored"] += 1
    log.log("warm_cache", "stored %s (%d bytes)", path, len(data))
    cache_dir.added()


def _read_entry(key: str) -> dict | None:
    path = _entry_path(key)
    try:
        data = path.read_bytes()
    except OSError:
        return None
    payload = _unseal(data, _ENTRY_MAGIC)
    entry = None
    if payload is not None:
        try:
            entry = _loads(payload)
        except Exception as e:  # noqa: BLE001
            _ignored("entry %s cannot be read (%s: %s); compiling", path, type(e).__name__, e)
            entry = None
        else:
            if not isinstance(entry, dict) or entry.get("key") != key or entry.get("env") != environment():
                _ignored("entry %s was made for another graph or environment (%s); compiling",
                         path, entry.get("versions") if isinstance(entry, dict) else "?")
                entry = None
    else:
        _ignored("entry %s is damaged (bad header or checksum); compiling", path)
    if entry is None:
        try:
            path.unlink()
        except OSError:
            pass
        return None
    cache_dir.touch(path)
    return entry


def _rebuild(name: str, d: tuple, bound: dict, tensors: dict, kernels_dir: Path) -> Any:
    kind, payload = d
    if kind == "bound":
        return bound[payload]
    if kind == "kernel":
        stem, symbol, nargs, returns_int, nsizes = payload
        so = kernels_dir / f"{stem}.so"
        if not so.exists():
            raise FileNotFoundError(so)
        cache_dir.touch(so)
        return load_cpp(so, symbol, nargs, returns_int, nsizes)
    if kind == "kinfo":
        fn_spec, bad, info = payload
        info.fn = _rebuild(name, ("kernel", fn_spec), bound, tensors, kernels_dir)
        if bad is not None:
            info.bad_index = _rebuild(name, ("kernel", bad), bound, tensors, kernels_dir)
        return info
    if kind == "tensor":
        return tensors[payload]
    if kind == "value":
        return payload
    if kind == "op":
        ns, op, overload = payload
        return _op_callable(getattr(getattr(getattr(torch.ops, ns), op), overload))
    if kind == "fn":
        return _resolve(*payload)
    raise ValueError(f"unknown global kind {kind!r}")


def lookup(key: str | None, bound: dict) -> Callable | None:
    """The compiled wrapper stored under ``key`` with its parameters bound to ``bound``'s
    tensors, or None (a miss, or an entry that does not load: it is ignored with a log line)."""
    if key is None or not config.warm_start:
        return None
    entry = _read_entry(key)
    if entry is None:
        counters["warm"]["misses"] += 1
        return None
    kernels_dir = kernels_root() / "cpp"
    try:
        tensors = torch.load(io.BytesIO(entry["tensors"]), weights_only=True)
        glb = {name: _rebuild(name, d, bound, tensors, kernels_dir) for name, d in entry["globals"]}
        kinfos = [_rebuild(k[2].name, ("kinfo", k), bound, tensors, kernels_dir) for k in entry["kernels"]]
        fn: Any = build_wrapper(entry["src"], glb)
    except FileNotFoundError as e:
        log.log("warm_cache", "entry %s: kernel %s was pruned; compiling", key, e)
        counters["warm"]["misses"] += 1
        return None
    except Exception as e:  # noqa: BLE001
        _ignored("entry %s does not load (%s: %s); compiling", key, type(e).__name__, e)
        return None
    fn.wrapper_src = entry["src"]
    fn.kernels = kinfos
    fn.fallbacks = list(entry["fallbacks"])
    fn.warm = True
    # the logs a fresh compile writes (kernels/compile.py), from the entry
    for f in fn.fallbacks:
        log.log("fallbacks", "extern kernel: %s", f)
    if log.enabled("output_code"):
        for k in kinfos:
            log.log("output_code", "%s kernel %s:\n%s", k.kind, k.name, k.source)
        log.log("output_code", "wrapper:\n%s", fn.wrapper_src)
    log.log("compile_times", "kernels: reused warm-start entry %s", key)
    _session[key] = _entry_path(key)
    counters["warm"]["hits"] += 1
    log.log("warm_cache", "reused %s", _entry_path(key))
    return fn


def compile_cached(compile_fn: Callable, gm: torch.fx.GraphModule, example_inputs: list, **kwargs) -> Callable:
    """``compile_fn(gm, example_inputs, **kwargs)`` (``compile_aten_graph``: an AOT forward,
    backward or inference graph) through the warm cache, keyed by the ATen graph, its inputs'
    metadata (fake or real) and ``kwargs``."""
    extra = f"aten:{sorted(kwargs.items())!r}:fallback_random={gm.meta.get('fallback_random')}"
    key = graph_key("inductor", gm, list(example_inputs), [], None, extra) if not kwargs.get("bound") else None
    hit = lookup(key, {})
    if hit is not None:
        return hit
    compiled = compile_fn(gm, example_inputs, **kwargs)
    store(key, compiled, [gm], {})
    return compiled


__all__ = ["compile_cached", "environment", "graph_key", "lookup", "store"]
