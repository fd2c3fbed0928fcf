"""Warm start (warm_cache.py, cache_dir.py): compiled graphs reused by a fresh interpreter.

Each process here is a fresh ``python`` with its own ``XCOMPILE_CACHE_DIR``: one compiles and
saves (``xcompile.save_cache_artifacts()`` or the cache directory itself), the next loads and
must reuse (``counters["warm"]["hits"]``, no kernel built) and still match eager; damaged,
foreign and stale artifacts are ignored with a log line and the compile works as usual.
No assertion on wall time.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

import xcompile
from xcompile import cache_dir, config, warm_cache

PROGRAM = textwrap.dedent('''
    import json, os, sys
    import torch
    import xcompile
    from xcompile.kernels import cache as kcache
    mode, artifacts = sys.argv[1], sys.argv[2]
    if os.environ.get("FAKE_TORCH_VERSION"):
        torch.__version__ = os.environ["FAKE_TORCH_VERSION"]
    loaded = "-"
    if mode == "load":
        with open(artifacts, "rb") as f:
            loaded = xcompile.load_cache_artifacts(f.read())
    from model import Net, f
    torch.manual_seed(0)
    net = Net().eval()
    cnet, cf = xcompile.compile(net), xcompile.compile(f)
    ok = True
    with torch.no_grad():
        for _ in range(3):
            x = torch.randn(4, 16)
            ok &= torch.allclose(cnet(x), net(x), rtol=1e-5, atol=1e-5)
            ok &= torch.allclose(cf(x), f(x), rtol=1e-5, atol=1e-5)
    # a training step: AOT forward and backward graphs (their kernels are cached too)
    x = torch.randn(4, 16, requires_grad=True)
    net(x).pow(2).sum().backward()
    want = [x.grad] + [p.grad for p in net.parameters()]
    x.grad = None
    net.zero_grad(set_to_none=True)
    cnet(x).pow(2).sum().backward()
    got = [x.grad] + [p.grad for p in net.parameters()]
    ok &= all(torch.allclose(a, b, rtol=1e-4, atol=1e-5) for a, b in zip(got, want))
    if mode == "save":
        with open(artifacts, "wb") as fh:
            fh.write(xcompile.save_cache_artifacts())
    print(json.dumps({"ok": bool(ok), "warm": dict(xcompile.counters["warm"]), "built": len(kcache.BUILT),
                      "loaded": loaded}))
''')

MODEL = textwrap.dedent('''
    import torch

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = torch.nn.LayerNorm(16)
            self.up = torch.nn.Linear(16, 32)
            self.down = torch.nn.Linear(32, 16)

        def forward(self, x):
            return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))

    def f(x):
        return torch.sin(x) * BODY + 1
''')


def _setup(tmp: Path, body: str = "2") -> None:
    (tmp / "model.py").write_text(MODEL.replace("BODY", body))
    (tmp / "prog.py").write_text(PROGRAM)


def _run(tmp: Path, cache: Path, mode: str, artifacts: Path, **env) -> tuple[dict, str]:
    e = dict(os.environ, XCOMPILE_CACHE_DIR=str(cache), PYTHONPATH=str(tmp), **env)
    e.pop("XCOMPILE_LOGS", None)
    p = subprocess.run([sys.executable, str(tmp / "prog.py"), mode, str(artifacts)], cwd=tmp, env=e,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-4000:]
    return json.loads(p.stdout.strip().splitlines()[-1]), p.stderr


def test_artifacts_reused_in_a_fresh_process(tmp_path):
    _setup(tmp_path)
    art = tmp_path / "artifacts.bin"
    first, _ = _run(tmp_path, tmp_path / "cache_a", "save", art)
    assert first["ok"] and first["warm"].get("stored", 0) == 4 and first["warm"].get("hits", 0) == 0
    assert art.stat().st_size > 0
    # a fresh interpreter with an empty cache directory: everything comes from the bytes
    second, _ = _run(tmp_path, tmp_path / "cache_b", "load", art)
    assert second["ok"], second
    assert second["loaded"]["entries"] == 4, second     # Net, f, Net's training forward and backward
    assert second["warm"].get("hits", 0) == 4, second
    assert second["built"] == 0, second          # no kernel compiled


def test_cache_dir_alone_gives_a_warm_start(tmp_path):
    _setup(tmp_path)
    cache = tmp_path / "cache"
    first, _ = _run(tmp_path, cache, "run", tmp_path / "unused")
    assert first["ok"] and first["warm"].get("stored", 0) >= 2
    second, _ = _run(tmp_path, cache, "run", tmp_path / "unused")
    assert second["ok"] and second["warm"].get("hits", 0) >= 2 and second["built"] == 0, second


def test_corrupted_artifacts_are_ignored_with_a_log_line(tmp_path):
    _setup(tmp_path)
    art = tmp_path / "artifacts.bin"
    _run(tmp_path, tmp_path / "cache_a", "save", art)
    data = bytearray(art.read_bytes())
    data[len(data) // 2] ^= 0xFF
    art.write_bytes(bytes(data))
    out, err = _run(tmp_path, tmp_path / "cache_b", "load", art)
    assert out["ok"] and out["loaded"] is None and out["warm"].get("hits", 0) == 0, out
    assert "xcompile warm start" in err and "damaged" in err, err[-2000:]
    # truncated bytes and bytes of something else entirely
    art.write_bytes(bytes(data[:100]))
    out, err = _run(tmp_path, tmp_path / "cache_c", "load", art)
    assert out["ok"] and out["loaded"] is None and "xcompile warm start" in err


def test_damaged_entry_on_disk_is_ignored_and_replaced(tmp_path):
    _setup(tmp_path)
    cache = tmp_path / "cache"
    _run(tmp_path, cache, "run", tmp_path / "unused")
    for p in (cache / "warm").iterdir():
        p.write_bytes(p.read_bytes()[:-7] + b"garbage")
    out, err = _run(tmp_path, cache, "run", tmp_path / "unused")
    assert out["ok"] and out["warm"].get("hits", 0) == 0 and out["warm"].get("stored", 0) >= 2, out
    assert "damaged" in err
    out, _ = _run(tmp_path, cache, "run", tmp_path / "unused")      # rewritten: warm again
    assert out["ok"] and out["warm"].get("hits", 0) >= 2


def test_foreign_version_artifacts_are_ignored(tmp_path):
    _setup(tmp_path)
    art = tmp_path / "artifacts.bin"
    first, _ = _run(tmp_path, tmp_path / "cache_a", "save", art, FAKE_TORCH_VERSION="1.0.0+other")
    assert first["ok"]
    out, err = _run(tmp_path, tmp_path / "cache_b", "load", art)
    assert out["ok"] and out["loaded"] is None and out["warm"].get("hits", 0) == 0, out
    assert "xcompile warm start" in err and "1.0.0+other" in err, err[-2000:]
    # a cache directory shared with another version: its entries are never looked up
    cache = tmp_path / "shared"
    _run(tmp_path, cache, "run", tmp_path / "unused", FAKE_TORCH_VERSION="1.0.0+other")
    out, _ = _run(tmp_path, cache, "run", tmp_path / "unused")
    assert out["ok"] and out["warm"].get("hits", 0) == 0


def test_changed_function_body_does_not_reuse(tmp_path):
    _setup(tmp_path, body="2")
    cache = tmp_path / "cache"
    first, _ = _run(tmp_path, cache, "run", tmp_path / "unused")
    assert first["ok"]
    _setup(tmp_path, body="3")          # same file, same name, same line: another constant
    out, _ = _run(tmp_path, cache, "run", tmp_path / "unused")
    assert out["ok"], out               # (ok compares with eager's x * 3)
    assert out["warm"].get("hits", 0) == 3 and out["warm"].get("stored", 0) == 1, out   # only Net's reused


# -- in-process ---------------------------------------------------------------------------------

@pytest.fixture
def fresh_cache(tmp_path):
    with config.patch(cache_dir=str(tmp_path)):
        yield tmp_path


def test_prune_removes_least_recently_used_first(fresh_cache):
    now = time.time()
    for i, sub in enumerate(["cpp", "warm", "cpp", "triton"]):
        d = fresh_cache / sub
        d.mkdir(exist_ok=True)
        p = d / f"f{i}.bin"
        p.write_bytes(b"x" * 400_000)
        os.utime(p, (now - 1000 + i * 100, now - 1000 + i * 100))
    cache_dir.touch(fresh_cache / "cpp" / "f0.bin")            # used just now: the newest
    assert cache_dir.usage()[0] == 1_600_000
    freed = cache_dir.prune(cap_mb=1.0)                         # 1 MiB: two files must go
    left = sorted(p.name for p in fresh_cache.rglob("*.bin"))
    assert freed == 800_000 and left == ["f0.bin", "f3.bin"]
    assert cache_dir.prune(cap_mb=0) == 0                       # 0: no cap


def test_pruned_kernel_makes_a_miss_not_an_error(fresh_cache):
    torch.manual_seed(0)
    lin = torch.nn.Linear(8, 8)

    def fn(x):
        return torch.relu(lin(x)) * 2

    x = torch.randn(3, 8)
    with torch.no_grad():
        xcompile.reset()
        out = xcompile.compile(fn)(x)
        torch.testing.assert_close(out, fn(x))
        assert list((fresh_cache / "warm").iterdir())
        for so in (fresh_cache / "cpp").glob("*.so"):
            so.unlink()
        xcompile.reset()
        hits = xcompile.counters["warm"]["hits"]
        torch.testing.assert_close(xcompile.compile(fn)(x), fn(x))
        assert xcompile.counters["warm"]["hits"] == hits
    xcompile.reset()


def test_graphs_calling_user_functions_are_not_cached(fresh_cache):
    def helper(t):
        return t * 2

    x = torch.randn(2)
    assert warm_cache.graph_key("inductor", torch.fx.symbolic_trace(lambda t: torch.relu(t)), [x], [], {})
    # call_module (a leaf module's code is not in the graph)
    assert warm_cache.graph_key("inductor", torch.fx.symbolic_trace(torch.nn.Sequential(torch.nn.ReLU())),
                                [x], [], {}) is None
    g = torch.fx.Graph()
    a = g.placeholder("x")
    g.output(g.call_function(helper, (a,)))
    assert warm_cache.graph_key("inductor", torch.fx.GraphModule({}, g), [x], [], {}) is None


def test_key_depends_on_metadata_modes_and_knobs(fresh_cache):
    g = torch.fx.Graph()
    a = g.placeholder("x")
    g.output(g.call_function(torch.sin, (a,)))
    gm = torch.fx.GraphModule({}, g)
    x = torch.randn(4, 4)
    k = warm_cache.graph_key("inductor", gm, [x], [], {})
    assert k == warm_cache.graph_key("inductor", gm, [torch.randn(4, 4)], [], {})     # values: no
    assert k != warm_cache.graph_key("inductor", gm, [x.t()], [], {})               # strides
    assert k != warm_cache.graph_key("inductor", gm, [x.double()], [], {})          # dtype
    assert k != warm_cache.graph_key("inductor", gm, [torch.randn(4, 5)], [], {})   # sizes
    with torch.no_grad():
        assert k != warm_cache.graph_key("inductor", gm, [x], [], {})               # grad mode
    with config.patch(kernel_fusion=False):
        assert k != warm_cache.graph_key("inductor", gm, [x], [], {})               # knobs
    with config.patch(warm_start=False):
        assert warm_cache.graph_key("inductor", gm, [x], [], {}) is None


def test_load_rejects_non_bytes_and_foreign_bytes(fresh_cache, caplog):
    with pytest.raises(TypeError):
        xcompile.load_cache_artifacts("not bytes")
    assert xcompile.load_cache_artifacts(b"PK\x03\x04 something else") is None


def test_reused_kernel_with_index_checks_still_raises_like_eager(fresh_cache):
    torch.manual_seed(0)
    emb = torch.nn.Embedding(10, 4)

    def fn(i):
        return emb(i) * 2

    i = torch.tensor([1, 2, 3])
    bad = torch.tensor([1, 20, 3])
    with torch.no_grad():
        xcompile.reset()
        torch.testing.assert_close(xcompile.compile(fn)(i), fn(i))
        xcompile.reset()
        hits = xcompile.counters["warm"]["hits"]
        c = xcompile.compile(fn)
        torch.testing.assert_close(c(i), fn(i))
        assert xcompile.counters["warm"]["hits"] == hits + 1
        with pytest.raises(IndexError) as eager_err:
            fn(bad)
        with pytest.raises(IndexError) as err:
            c(bad)
        assert str(err.value).startswith(str(eager_err.value)) and "index 20" in str(err.value)
    xcompile.reset()


def test_adding_files_prunes_past_the_cap(fresh_cache, monkeypatch):
    d = fresh_cache / "warm"
    d.mkdir()
    for i in range(4):
        p = d / f"e{i}.bin"
        p.write_bytes(b"x" * 300_000)
        os.utime(p, (time.time() - 100 + i, time.time() - 100 + i))
    monkeypatch.setattr(cache_dir, "_added", 0)
    with config.patch(cache_size_cap_mb=0.5):
        cache_dir.added()                  # the first addition of a process prunes
    assert sorted(p.name for p in d.iterdir()) == ["e3.bin"]
