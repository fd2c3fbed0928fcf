"""The disk cache (a second process builds nothing) and bad input (compiler missing or
failing: one warning, eager results, never a crash)."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import warnings

import pytest
import torch

from xcompile import config
from xcompile.kernels import cache, cpp
from xcompile.kernels.compile import compile_aten_graph
from xcompile.kernels.decompose import trace_aten

from .util import assert_close

SCRIPT = textwrap.dedent("""
    import torch, xcompile
    from xcompile import config
    from xcompile.kernels import cache
    from xcompile.kernels.compile import compile_aten_graph
    from xcompile.kernels.decompose import trace_aten
    config.kernel_raise_errors = True
    def f(x, y):
        return (torch.softmax(x, -1) * y.sigmoid()).sum(0), torch.relu(x - 1)
    x, y = torch.randn(6, 50), torch.randn(50)
    fn = compile_aten_graph(trace_aten(f, [x, y]), [x, y])
    got, want = fn(x, y), f(x, y)
    assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(got, want))
    print("BUILT", len(cache.BUILT), "KERNELS", len(fn.kernels))
""")


def _run(cache_dir):
    env = dict(os.environ, XCOMPILE_CACHE_DIR=str(cache_dir))
    out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("BUILT")][0].split()
    return int(line[1]), int(line[3])


def test_second_process_builds_nothing(tmp_path):
    built, kernels = _run(tmp_path)
    assert built == kernels >= 1
    assert len(list((tmp_path / "cpp").glob("*.so"))) == kernels
    built_again, _ = _run(tmp_path)
    assert built_again == 0


def _graph():
    def f(x):
        return (torch.tanh(x) * 3 + 1,)
    x = torch.randn(5, 7)
    return f, x, trace_aten(f, [x])


def test_missing_compiler_falls_back(tmp_path, monkeypatch):
    monkeypatch.setattr(config, "cache_dir", str(tmp_path))
    monkeypatch.setattr(config, "cpp_compiler", "/nonexistent/g++", raising=False)
    f, x, gm = _graph()
    with pytest.warns(RuntimeWarning, match="running this graph eagerly.*not found"):
        fn = compile_aten_graph(gm, [x])
    assert_close(fn(x), f(x))


def test_compile_error_falls_back(tmp_path, monkeypatch):
    monkeypatch.setattr(config, "cache_dir", str(tmp_path))
    monkeypatch.setattr(cpp, "cpp_prelude", lambda: "this is not C++;\n")
    monkeypatch.setattr(sys.modules["xcompile.kernels.compile"], "cpp_prelude", lambda: "this is not C++;\n")
    f, x, gm = _graph()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn = compile_aten_graph(gm, [x])
    msgs = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(msgs) == 1 and "running this graph eagerly" in msgs[0] and "KernelBuildError" in msgs[0]
    assert_close(fn(x), f(x))


def test_unsupported_graph_falls_back():
    """An op we cannot trace to ATen with fake tensors (data-dependent shape) runs eagerly."""
    from xcompile.backends.inductor import inductor

    def f(x):
        return (x[x > 0] * 2,)
    x = torch.randn(10)
    gm = torch.fx.symbolic_trace(f)
    with pytest.warns(RuntimeWarning, match="eagerly"):
        fn = inductor(gm, [x])
    assert_close(fn(x), f(x))


def test_build_error_message(tmp_path, monkeypatch):
    monkeypatch.setattr(config, "cache_dir", str(tmp_path))
    with pytest.raises(cache.KernelBuildError, match="error"):
        cache.build_cpp("int main( {")
