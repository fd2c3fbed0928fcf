"""The debug dump (debug/dump.py; torch's TORCH_COMPILE_DEBUG=1): config.debug_dir / config.debug
write one folder of readable files per compiled frame."""
from __future__ import annotations

import re
import warnings

import pytest
import torch

import xcompile
from xcompile import config
from xcompile.debug import dump


@pytest.fixture(autouse=True)
def _fresh():
    xcompile.reset()
    yield
    xcompile.reset()


def _frames(base) -> dict[str, object]:
    runs = list(base.glob("run_*-pid_*"))
    assert len(runs) == 1, runs
    return {p.name: p for p in sorted(runs[0].iterdir())}


def _one(frames: dict, pattern: str):
    hits = [p for name, p in frames.items() if re.fullmatch(pattern, name)]
    assert len(hits) == 1, (pattern, list(frames))
    return hits[0]


def broken(x, y):
    a = torch.sin(x) + y
    print("graph break here")
    return torch.cos(a) * 2


def test_graph_break_inductor(tmp_path, capsys):
    x, y = torch.randn(4, 8), torch.randn(4, 8)
    with config.patch(debug_dir=str(tmp_path), warm_start=False):
        fn = xcompile.compile(broken, backend="inductor")
        torch.testing.assert_close(fn(x, y), broken(x, y))
        fn(x, y)                                          # no new compile, no new folder
    err = capsys.readouterr().err
    assert err.count("xcompile: debug dump in ") == 1     # the run folder, printed once
    frames = _frames(tmp_path)
    assert len(frames) == 2, list(frames)
    top = _one(frames, r"001_broken")
    resume = _one(frames, r"002_xcompile_resume_in_broken_at_\d+")

    code = (top / "bytecode.txt").read_text()
    assert "## original bytecode" in code and "LOAD_GLOBAL" in code
    assert "def xcompile_runner_broken(" in code                    # the runner's generated source
    assert "xcompile_resume_in_broken_at_" in code and "resume function" in code
    assert "graph break" in (top / "frame.txt").read_text()
    graph = (top / "graph.py").read_text()
    assert "torch.sin" in graph and "forward" in graph
    inputs = (top / "graph_inputs.txt").read_text()
    assert "L['x']" in inputs and "float32[4, 8]" in inputs
    assert "TENSOR_MATCH" in (top / "guards.txt").read_text()
    assert "torch.cos" in (resume / "graph.py").read_text()
    for folder in (top, resume):
        names = {p.name for p in folder.iterdir()}
        assert any(re.fullmatch(r"kernel\d+\.cpp", n) for n in names), names
        assert {"wrapper.py", "loop_ir_lower.txt", "loop_ir_fuse.txt", "aten_graph.py"} <= names
        assert "def call(" in (folder / "wrapper.py").read_text()
        times = (folder / "timings.txt").read_text()
        assert "frontend.trace" in times and "kernels.lower" in times


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_training_graph(tmp_path, backend):
    model = torch.nn.Linear(8, 3)

    def step(x, t):
        return torch.nn.functional.mse_loss(model(x), t)

    x, t = torch.randn(4, 8), torch.randn(4, 3)
    with config.patch(debug_dir=str(tmp_path), warm_start=False):
        loss = xcompile.compile(step, backend=backend)(x, t)
        folder = _one(_frames(tmp_path), r"001_(.*\.)?step")
        assert not (folder / "backward_wrapper.py").exists()          # compiled at the first backward
        loss.backward()
    assert model.weight.grad is not None
    part = (folder / "partition.txt").read_text()
    saved = re.findall(r"^  saved (\S+)$", part, re.M)
    assert saved, part
    fw, bw = (folder / "aot_forward.py").read_text(), (folder / "aot_backward.py").read_text()
    for name in saved:
        assert name in fw and name in bw, name
    assert "saved for the backward" in fw
    names = {p.name for p in folder.iterdir()}
    if backend == "inductor":             # the lazily compiled backward's kernels went to the same folder
        assert {"forward_wrapper.py", "backward_wrapper.py", "backward_loop_ir_lower.txt"} <= names
        times = (folder / "timings.txt").read_text()
        assert "(backward graph, compiled at a later call)" in times
    else:
        assert not any("wrapper" in n for n in names)


def test_sizes_compiled_at_later_calls_join_the_frames_folder(tmp_path):
    fn = xcompile.compile(lambda x: (x.sin() + 1).sum(), backend="inductor")
    with config.patch(debug_dir=str(tmp_path), warm_start=False, dynamic_kernels=False):
        fn(torch.randn(3))
        fn(torch.randn(5))            # recompiled with a symbolic size: one graph compiled per size
        fn(torch.randn(7))            # a new size, compiled at this call
    folder = _one(_frames(tmp_path), r"002_.*lambda.*")
    names = {p.name for p in folder.iterdir()}
    assert {"wrapper.py", "wrapper_2.py", "loop_ir_lower_2.txt"} <= names, names
    assert "compiled at a later call" in (folder / "timings.txt").read_text()
    assert "float32[s" in (folder / "graph_inputs.txt").read_text()


def test_off_by_default(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert not dump.on()
    with config.patch(warm_start=False):
        fn = xcompile.compile(broken, backend="inductor")
        fn(torch.randn(3), torch.randn(3))
    assert list(tmp_path.iterdir()) == []


def test_debug_flag_uses_cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with config.patch(debug=True):
        xcompile.compile(lambda x: x.sin() + 1, backend="eager")(torch.randn(3))
    frames = _frames(tmp_path / "xcompile_debug")
    folder = _one(frames, r"001_.*lambda.*")
    assert {"bytecode.txt", "graph.py", "guards.txt", "timings.txt", "frame.txt"} <= {p.name for p in folder.iterdir()}


def test_bad_debug_dir_warns_and_compiles(tmp_path):
    bad = tmp_path / "a_file"
    bad.write_text("not a folder")
    x = torch.randn(5)
    with config.patch(debug_dir=str(bad / "under")), warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        out = xcompile.compile(lambda x: x.cos() * 3, backend="aot_eager")(x)
    torch.testing.assert_close(out, x.cos() * 3)
    assert any("debug dump" in str(w.message) and "cannot create" in str(w.message) for w in seen), \
        [str(w.message) for w in seen]
    assert bad.read_text() == "not a folder"
