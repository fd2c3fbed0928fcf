"""The minifier (config.repro_after / repro_level, debug/minifier.py): backends planted to fail on
one op, over a function of ~20 ops; the repro it writes holds a handful of nodes and, run in a
fresh interpreter with only torch and xcompile, fails the same way."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import warnings

import pytest
import torch

import xcompile
from xcompile.debug import minifier

PLANTED = textwrap.dedent('''
    import operator

    import torch

    import xcompile
    from xcompile.aot.api import aot_compile

    RELU = (torch.relu, torch.nn.functional.relu, "relu", torch.ops.aten.relu.default)


    def has_relu(gm):
        return any(n.op != "placeholder" and n.target in RELU for n in gm.graph.nodes)


    @xcompile.register_backend("xc_test_planted_relu")
    def planted_relu(gm, example_inputs):
        if has_relu(gm):
            raise RuntimeError("planted failure: relu in the graph")
        return gm.forward


    @xcompile.register_backend("xc_test_planted_run_relu")
    def planted_run_relu(gm, example_inputs):
        def run(*args):
            if has_relu(gm):
                raise ValueError("planted run failure: relu")
            return gm(*args)
        return run


    def bad_fw(gm, example_inputs):
        if has_relu(gm):
            raise RuntimeError("planted aot failure: aten.relu")
        return gm.forward


    @xcompile.register_backend("xc_test_planted_aot")
    def planted_aot(gm, example_inputs):
        return aot_compile(gm, example_inputs, fw_compiler=bad_fw)


    @xcompile.register_backend("xc_test_planted_wrong_mul")
    def planted_wrong_mul(gm, example_inputs):
        for n in gm.graph.nodes:
            if n.op == "call_function" and n.target in (operator.mul, torch.mul):
                n.target = operator.add
        gm.recompile()
        return gm.forward
''')


def f(x, y):
    a = x.sin() + y
    b = a * 2
    c = b.cos() - x
    d = torch.tanh(c) * y
    e = d.exp().clamp(max=3)
    g = e + a
    h = torch.relu(g) * 0.5
    i = h.sum(dim=0) + 1
    j = i.sigmoid() * x[0]
    k = j - b[1]
    return k.abs().mean() + 1, h


def ok_fn(x, y):
    return (x.sin() * y).cos().sum(0) + 1


@pytest.fixture
def repro(tmp_path, monkeypatch):
    """Planted backends importable here and in the repro's interpreter; repros under tmp_path."""
    (tmp_path / "xc_planted_backends.py").write_text(PLANTED)
    monkeypatch.syspath_prepend(str(tmp_path))
    import xc_planted_backends  # noqa: F401
    out = tmp_path / "repros"
    monkeypatch.setattr(xcompile.config, "repro_dir", str(out))
    monkeypatch.setattr(xcompile.config, "repro_level", 2)
    monkeypatch.setattr(minifier, "last_repro_path", None)
    xcompile.reset()
    yield tmp_path
    xcompile.reset()


def _inputs():
    torch.manual_seed(0)
    return torch.randn(4, 5), torch.randn(4, 5)


def _run_repro(path, tmp_path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, path], capture_output=True, text=True, env=env, timeout=300,
                          cwd=str(tmp_path))


def _call_nodes(path) -> int:
    text = open(path).read()
    return text.count("g.create_node(")


def _written(tmp_path) -> list:
    return sorted(p for p in (tmp_path / "repros").rglob("*.py"))


def test_after_dynamo_minifies_a_compile_failure(repro, monkeypatch):
    monkeypatch.setattr(xcompile.config, "repro_after", "dynamo")
    with pytest.warns(RuntimeWarning, match="wrote a repro"):
        with pytest.raises(xcompile.exc.BackendCompilerFailed, match="planted failure: relu"):
            xcompile.compile(f, backend="xc_test_planted_relu")(*_inputs())
    path = minifier.last_repro_path
    assert path and os.path.exists(path) and path.startswith(str(repro / "repros"))
    assert "/minifier/" in path
    assert 1 <= _call_nodes(path) <= 5
    assert "torch.relu" in open(path).read()
    r = _run_repro(path, repro)
    assert r.returncode != 0
    assert "RuntimeError: planted failure: relu in the graph" in r.stderr


def test_after_dynamo_minifies_a_run_failure(repro, monkeypatch):
    monkeypatch.setattr(xcompile.config, "repro_after", "dynamo")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match="planted run failure"):
            xcompile.compile(f, backend="xc_test_planted_run_relu")(*_inputs())
    path = minifier.last_repro_path
    assert path and 1 <= _call_nodes(path) <= 5
    assert "ValueError: planted run failure" in open(path).read()


def test_after_aot_minifies_an_aot_graph_compile_failure(repro, monkeypatch):
    monkeypatch.setattr(xcompile.config, "repro_after", "aot")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(xcompile.exc.BackendCompilerFailed, match="planted aot failure"):
            xcompile.compile(f, backend="xc_test_planted_aot")(*_inputs())
    path = minifier.last_repro_path
    assert path and 1 <= _call_nodes(path) <= 5
    text = open(path).read()
    assert "torch.ops.aten.relu.default" in text and "after='aot'" in text
    assert "xc_planted_backends.bad_fw" in text          # the inner compiler, not the backend
    r = _run_repro(path, repro)
    assert r.returncode != 0
    assert "RuntimeError: planted aot failure: aten.relu" in r.stderr


def test_level4_minifies_wrong_results(repro, monkeypatch):
    monkeypatch.setattr(xcompile.config, "repro_after", "dynamo")
    monkeypatch.setattr(xcompile.config, "repro_level", 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(xcompile.exc.BackendCompilerFailed, match="AccuracyError"):
            xcompile.compile(f, backend="xc_test_planted_wrong_mul")(*_inputs())
    path = minifier.last_repro_path
    assert path and 1 <= _call_nodes(path) <= 5
    text = open(path).read()
    assert "accuracy=True" in text and "operator.mul" in text
    r = _run_repro(path, repro)
    assert r.returncode == 1
    assert "ACCURACY MISMATCH" in r.stdout


def test_level1_only_dumps(repro, monkeypatch):
    monkeypatch.setattr(xcompile.config, "repro_after", "dynamo")
    monkeypatch.setattr(xcompile.config, "repro_level", 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(xcompile.exc.BackendCompilerFailed):
            xcompile.compile(f, backend="xc_test_planted_relu")(*_inputs())
    path = minifier.last_repro_path
    text = open(path).read()
    assert "not minified" in text
    assert _call_nodes(path) >= 20                   # the whole graph


def test_level3_runs_each_compiled_graph(repro, monkeypatch):
    # the planted failure shows only when the compiled graph runs: level 3 finds it at compile time
    monkeypatch.setattr(xcompile.config, "repro_after", "dynamo")
    monkeypatch.setattr(xcompile.config, "repro_level", 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(xcompile.exc.BackendCompilerFailed, match="ValueError: planted run failure"):
            xcompile.compile(f, backend="xc_test_planted_run_relu")(*_inputs())
    assert minifier.last_repro_path and _call_nodes(minifier.last_repro_path) <= 5


@pytest.mark.parametrize("after,level,backend", [("dynamo", 2, "eager"), ("dynamo", 4, "aot_eager"),
                                                  ("aot", 4, "aot_eager"), ("dynamo", 3, "xc_test_planted_relu")])
def test_a_passing_program_writes_nothing(repro, monkeypatch, after, level, backend):
    monkeypatch.setattr(xcompile.config, "repro_after", after)
    monkeypatch.setattr(xcompile.config, "repro_level", level)
    x, y = _inputs()
    x.requires_grad_()
    ref = ok_fn(x, y)
    rng = torch.get_rng_state()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = xcompile.compile(ok_fn, backend=backend)(x, y)
    torch.testing.assert_close(out, ref)
    assert torch.equal(torch.get_rng_state(), rng)          # the checks left the RNG as it was
    assert torch.is_grad_enabled()
    assert minifier.last_repro_path is None
    assert _written(repro) == []


def test_module_state_untouched_by_checks(repro, monkeypatch):
    # level 4 compiles and runs a copy with random values: the module's buffers (BatchNorm's
    # running stats) and parameters see only the program's own call
    monkeypatch.setattr(xcompile.config, "repro_after", "dynamo")
    monkeypatch.setattr(xcompile.config, "repro_level", 4)
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.BatchNorm1d(8), torch.nn.ReLU())
    ref_m = torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.BatchNorm1d(8), torch.nn.ReLU())
    ref_m.load_state_dict(m.state_dict())
    x = torch.randn(6, 5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = xcompile.compile(m, backend="aot_eager")(x)
    torch.testing.assert_close(out, ref_m(x))
    for (name, a), b in zip(m.state_dict().items(), ref_m.state_dict().values()):
        torch.testing.assert_close(a, b, msg=name)
    assert _written(repro) == []


@pytest.mark.parametrize("knob,value,match", [("repro_after", "dynmo", "repro_after"),
                                              ("repro_level", 7, "repro_level"),
                                              ("repro_level", "x", "repro_level")])
def test_bad_values_are_clear_errors(repro, monkeypatch, knob, value, match):
    monkeypatch.setattr(xcompile.config, "repro_after", "dynamo")
    monkeypatch.setattr(xcompile.config, knob, value)
    with pytest.raises(ValueError, match=match):
        xcompile.compile(ok_fn, backend="eager")(*_inputs())


def test_env_vars_are_read_at_import():
    code = "import xcompile; print(xcompile.config.repro_after, xcompile.config.repro_level, xcompile.config.repro_dir)"
    env = dict(os.environ, XCOMPILE_REPRO_AFTER="aot", XCOMPILE_REPRO_LEVEL="4", XCOMPILE_REPRO_DIR="/tmp/xr")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert r.stdout.split() == ["aot", "4", "/tmp/xr"], r.stderr


def test_attempts_are_capped(repro, monkeypatch):
    # past repro_max_attempts the smallest failing graph found so far is written
    monkeypatch.setattr(xcompile.config, "repro_after", "dynamo")
    monkeypatch.setattr(xcompile.config, "repro_max_attempts", 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(xcompile.exc.BackendCompilerFailed, match="planted failure"):
            xcompile.compile(f, backend="xc_test_planted_relu")(*_inputs())
    text = open(minifier.last_repro_path).read()
    assert "stopped at the limit" in text and "in 2 attempts" in text


def test_a_failing_minifier_leaves_the_programs_exception(repro, monkeypatch):
    monkeypatch.setattr(xcompile.config, "repro_after", "dynamo")

    def broken(*args):
        raise KeyError("minifier bug")
    monkeypatch.setattr(minifier, "minify", broken)
    with pytest.warns(RuntimeWarning, match="could not write a repro"):
        with pytest.raises(xcompile.exc.BackendCompilerFailed, match="planted failure: relu"):
            xcompile.compile(f, backend="xc_test_planted_relu")(*_inputs())
    assert minifier.last_repro_path is None
