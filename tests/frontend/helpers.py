"""Compile-vs-eager checks for the frontend, tracing one frame whole (``trace_frame``).

    captured = trace(fn, *args)           FrameState from the function and its bound arguments
    check(fn, *args)                      trace, then compare with eager on the trace inputs AND on fresh
                                          random inputs of the same metadata (nothing baked in), including
                                          in-place effects on the inputs
"""
from __future__ import annotations

import builtins
import inspect

import torch

import xcompile.frontend.graph_break  # noqa: F401  (the interpreter with its opcode handlers)
from xcompile.frontend.capture import CapturedGraph, FrameState
from xcompile.frontend.exc import Unsupported
from xcompile.frontend.output import OutputBuilder
from xcompile.frontend.tracer import Tracer

_NOT_PLAIN = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR | inspect.CO_ITERABLE_COROUTINE


def trace_frame(frame: FrameState, *, fullgraph: bool = False) -> CapturedGraph:
    """One frame's bytecode -> one FX graph + guards, or Unsupported at the first graph break
    (the first step of frontend/graph_break.capture, without the split)."""
    if frame.code.co_flags & _NOT_PLAIN:
        raise Unsupported(f"compiling generator or coroutine {frame.code.co_name}",
                          "Compile the code that consumes the generator instead.")
    tracer = Tracer(frame, fullgraph=fullgraph)
    result = tracer.top_frame().run()
    out = OutputBuilder(tracer)
    spec = out.spec(result)
    gm = tracer.gb.finish(out.outputs)
    return CapturedGraph(gm=gm, example_inputs=list(tracer.gb.example_inputs),
                         input_sources=list(tracer.gb.input_sources), output=spec,
                         guards=tracer.guards.build(), passthrough_sources=out.passthrough,
                         side_effects=out.effects)


def frame_of(fn, *args, **kwargs) -> FrameState:
    if isinstance(fn, torch.nn.Module):
        fn = fn.forward
    code = fn.__code__
    sig = inspect.signature(fn)
    bound = sig.bind(*args, **kwargs)
    bound.apply_defaults()
    f_locals = dict(bound.arguments)
    if inspect.ismethod(fn):
        first = code.co_varnames[0]
        f_locals = {first: fn.__self__, **f_locals}
        fn = fn.__func__
    return FrameState(code, f_locals, fn.__globals__, builtins.__dict__, fn.__closure__)


def trace(fn, *args, **kwargs) -> CapturedGraph:
    return trace_frame(frame_of(fn, *args, **kwargs))


def run_captured(c: CapturedGraph, fn, *args, **kwargs):
    """Run the captured graph the way the runtime will: inputs fetched through their sources."""
    frame = frame_of(fn, *args, **kwargs)
    fetch = (frame.f_locals, frame.f_globals, frame.f_builtins, frame.closure)
    inputs = [s.fetch(*fetch) for s in c.input_sources]
    outs = c.gm(*inputs)
    assert isinstance(outs, tuple)
    passthrough = [s.fetch(*fetch) for s in c.passthrough_sources]
    return rebuild(c.output, outs, passthrough)


def rebuild(spec, outs, passthrough):
    kind = spec[0]
    if kind == "out":
        return outs[spec[1]]
    if kind == "const":
        return spec[1]
    if kind == "source":
        return passthrough[spec[1]]
    if kind == "tuple":
        return tuple(rebuild(s, outs, passthrough) for s in spec[1])
    if kind == "list":
        return [rebuild(s, outs, passthrough) for s in spec[1]]
    if kind == "dict":
        return {k: rebuild(s, outs, passthrough) for k, s in zip(spec[1], spec[2])}
    if kind == "namedtuple":
        parts = [rebuild(s, outs, passthrough) for s in spec[2]]
        return spec[1](parts) if hasattr(spec[1], "n_sequence_fields") else spec[1](*parts)
    raise AssertionError(spec)


def fresh(obj):
    """New random data with the same metadata (tensors), recursively; other objects kept."""
    if isinstance(obj, torch.nn.Parameter) or isinstance(obj, torch.nn.Module):
        return obj
    if isinstance(obj, torch.Tensor):
        if obj.dtype == torch.bool:
            data = torch.rand(obj.shape) > 0.5
        elif obj.dtype.is_floating_point or obj.dtype.is_complex:
            data = torch.randn(obj.shape, dtype=obj.dtype)
        else:  # integer tensors are often indices: shuffle the given values to stay in range
            flat = obj.reshape(-1)
            data = flat[torch.randperm(flat.numel())].reshape(obj.shape)
        out = torch.empty_strided(obj.shape, obj.stride(), dtype=obj.dtype)
        out.copy_(data)
        return out.requires_grad_(obj.requires_grad)
    if isinstance(obj, list):
        return [fresh(o) for o in obj]
    if isinstance(obj, tuple) and type(obj) is tuple:
        return tuple(fresh(o) for o in obj)
    if isinstance(obj, dict):
        return {k: fresh(v) for k, v in obj.items()}
    return obj


def clone(obj):
    if isinstance(obj, torch.nn.Parameter) or isinstance(obj, torch.nn.Module):
        return obj
    if isinstance(obj, torch.Tensor):
        c = obj.detach().clone()
        return c.requires_grad_(obj.requires_grad)
    if isinstance(obj, list):
        return [clone(o) for o in obj]
    if isinstance(obj, tuple) and type(obj) is tuple:
        return tuple(clone(o) for o in obj)
    if isinstance(obj, dict):
        return {k: clone(v) for k, v in obj.items()}
    return obj


def assert_same(actual, expected, path="out"):
    if isinstance(expected, torch.Tensor):
        assert isinstance(actual, torch.Tensor), f"{path}: {type(actual)} is not a tensor"
        assert actual.dtype == expected.dtype, f"{path}: dtype {actual.dtype} != {expected.dtype}"
        assert actual.shape == expected.shape, f"{path}: shape {actual.shape} != {expected.shape}"
        assert actual.device == expected.device, path
        assert actual.requires_grad == expected.requires_grad, f"{path}: requires_grad differs"
        if expected.is_contiguous() or actual.dim() == 0:
            pass
        assert actual.stride() == expected.stride(), f"{path}: stride {actual.stride()} != {expected.stride()}"
        torch.testing.assert_close(actual, expected, equal_nan=True, msg=lambda m: f"{path}: {m}")
        return
    assert type(actual) is type(expected), f"{path}: type {type(actual)} != {type(expected)}"
    if isinstance(expected, (list, tuple)):
        assert len(actual) == len(expected), path
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_same(a, e, f"{path}[{i}]")
    elif isinstance(expected, dict):
        assert list(actual) == list(expected), path
        for k in expected:
            assert_same(actual[k], expected[k], f"{path}[{k!r}]")
    else:
        assert actual == expected or actual is expected, f"{path}: {actual!r} != {expected!r}"


def check(fn, *args, **kwargs) -> CapturedGraph:
    """Trace ``fn`` and compare with eager: on the traced inputs and on fresh random ones."""
    torch.manual_seed(0)
    c = trace(fn, *clone(args), **clone(kwargs))
    c.gm.graph.lint()
    assert [type(n) for n in c.example_inputs] and True
    for attempt in range(2):
        a = args if attempt == 0 else fresh(args)
        kw = kwargs if attempt == 0 else fresh(kwargs)
        a_eager, kw_eager = clone(a), clone(kw)
        a_comp, kw_comp = clone(a), clone(kw)
        expected = fn(*a_eager, **kw_eager)
        actual = run_captured(c, fn, *a_comp, **kw_comp)
        assert_same(actual, expected)
        assert_same(a_comp, a_eager, "inputs after the call")
        assert_same(kw_comp, kw_eager, "kwargs after the call")
    return c


def placeholders(c: CapturedGraph) -> list[str]:
    return [n.name for n in c.gm.graph.nodes if n.op == "placeholder"]


def ops(c: CapturedGraph) -> list:
    return [n.target for n in c.gm.graph.nodes if n.op in ("call_function", "call_method")]
