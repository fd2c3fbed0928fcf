"""Guards printed for a trace, the source chains they use, and the bytecode decoder (3.11 and 3.12)."""
import os
import subprocess
import textwrap

import pytest
import torch

import xcompile.frontend.graph_break  # noqa: F401  (fills the handler table)
from xcompile.bytecode.instructions import decode
from xcompile.bytecode.versions import TABLE
from xcompile.frontend.tracer import HANDLERS

from .helpers import frame_of, trace

THRESHOLD = 0.5


def test_guards_exact_listing():
    def fn(x, n, flag, unused):
        return torch.relu(x) * n if flag else x, THRESHOLD
    c = trace(fn, torch.randn(2, 3), 3, True, "u")
    assert str(c.guards).splitlines()[:-1] == [       # in the order the trace looked at things
        "EQUALS_MATCH: L['flag'] True",
        f"ID_MATCH: G['torch'] id={id(torch):#x} (module)",
        "TENSOR_MATCH: L['x'] Tensor, dtype=torch.float32, device=cpu, size=[2, 3], stride=[3, 1], "
        "requires_grad=False",
        "EQUALS_MATCH: L['n'] 3",
        "EQUALS_MATCH: G['THRESHOLD'] 0.5",
    ]
    assert c.guards.no_aliasing == c.input_sources
    assert c.output == ("tuple", [("out", 0), ("const", 0.5)])


def test_every_guard_source_fetches_its_value():
    lin = torch.nn.Linear(2, 2)
    data = {"w": torch.randn(2), "k": 2}

    def fn(x, d, m):
        return m(x) * d["w"] * d["k"]
    frame = frame_of(fn, torch.randn(2), data, lin)
    c = trace(fn, torch.randn(2), data, lin)
    fetch = (frame.f_locals, frame.f_globals, frame.f_builtins, frame.closure)
    for g in c.guards.guards:
        g.source.fetch(*fetch)                    # raises if a chain is wrong
    kinds = {g.kind for g in c.guards.guards}
    assert {"TENSOR_MATCH", "MODULE_TREE", "DICT_KEYS", "TYPE_MATCH", "EQUALS_MATCH"} <= kinds


def test_tensor_guard_records_requires_grad_and_strides():
    x = torch.randn(3, 4).t().requires_grad_()

    def fn(x):
        return x * 2
    c = trace(fn, x)
    line = str(c.guards).splitlines()[0]
    assert "size=[4, 3], stride=[1, 4], requires_grad=True" in line


def _sample(x, *args, **kw):
    a, *b = args
    with torch.no_grad():
        y = x + 1
    for i in range(2):
        y = y[1:2] if i else -y
    return [t for t in b], {**kw}, (*args, 1), f"{a}", super


def test_decoder_normalizes_this_version():
    instrs = decode(_sample.__code__)
    names = {i.opname for i in instrs}
    assert "LOAD_METHOD" not in names and "EXTENDED_ARG" not in names
    assert not any(n.startswith("POP_JUMP_FORWARD") or n.startswith("POP_JUMP_BACKWARD") for n in names)
    for i in instrs:
        if i.target is not None:
            assert 0 <= i.target < len(instrs)
    assert names - set(HANDLERS) == set(), "opcodes without a handler"


def test_version_table_covers_311_to_313():
    assert set(TABLE) == {(3, 11), (3, 12), (3, 13)}
    assert TABLE[(3, 12)].load_attr_method_bit and not TABLE[(3, 11)].load_attr_method_bit
    assert TABLE[(3, 12)].for_iter_skips_end_for
    t13 = TABLE[(3, 13)]
    assert t13.null_above_callable and not TABLE[(3, 12)].null_above_callable
    assert (t13.for_iter_skip, t13.end_for_pops) == (2, 1) and TABLE[(3, 12)].for_iter_skip == 1
    assert not t13.make_function_flags and t13.closure_by_load_fast


_OTHER_PYTHONS = {(3, 12): "/root/.pyenv/versions/3.12.1/bin/python3.12",
                  (3, 13): "/root/.pyenv/versions/3.13.0/bin/python3.13"}


@pytest.mark.parametrize("version", sorted(_OTHER_PYTHONS))
def test_decoder_on_other_cpython_has_handlers_for_every_opcode(version):
    """Decode typical code under CPython 3.12 / 3.13 (no torch needed there) and check every
    opcode has a handler."""
    python = _OTHER_PYTHONS[version]
    if not os.path.exists(python):
        pytest.skip(f"no CPython {version} on this machine")
    src = os.path.join(os.path.dirname(__file__), "..", "..", "python")
    script = textwrap.dedent(f"""
        import sys; sys.path.insert(0, {os.path.abspath(src)!r})
        import importlib.util, types
        pkg = types.ModuleType("xcompile"); pkg.__path__ = [{os.path.abspath(os.path.join(src, 'xcompile'))!r}]
        sys.modules["xcompile"] = pkg
        from xcompile.bytecode.instructions import decode
        class B:
            def forward(self, x): return x
        class A(B):
            def forward(self, x, *args, **kw):
                a = super().forward(x)
                y = [t * 2 for t in args if t]
                z = {{k: v for k, v in kw.items()}}
                with open(x) as f:
                    pass
                x[1:2] = x[0:1]
                s = x[1:3]
                for i in range(3):
                    a = a + i
                g = lambda q=1: q + i                  # closure + defaults (3.13: SET_FUNCTION_ATTRIBUTE)
                return (+a, f(*args, **kw), (*args, 1), f"{{a}}", s, y, z, x.shape, x if a else None,
                        sum(q for q in args), f"{{a!r:>3}}", sorted(args, key=g), not a)
        seen = set()
        def walk(code):
            for ins in decode(code):
                seen.add((ins.opname, ins.push_null, ins.argval if ins.opname == "CALL_INTRINSIC_1" else None))
            for c in code.co_consts:
                if hasattr(c, "co_code"):
                    walk(c)
        walk(A.forward.__code__)
        print(sorted({{n for n, _, _ in seen}}))
        assert ("LOAD_SUPER_ATTR", True, None) in seen
        assert ("LOAD_ATTR", True, None) in seen
        assert any(n == "CALL_INTRINSIC_1" and a == "INTRINSIC_UNARY_POSITIVE" for n, _, a in seen)
    """)
    out = subprocess.run([python, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    names = set(eval(out.stdout.strip().splitlines()[-1]))  # noqa: S307  (the test's own expression)
    exc_only = TABLE[version].exception_only
    missing = {n for n in names - set(HANDLERS) - exc_only}
    # other versions' opcodes are registered by name even though this interpreter never produces them
    assert missing == set(), missing
