"""xcompile and torch.compile in one process (benchmarks compare them side by side).

Runs in a subprocess: the failure mode seen so far is a segfault in code-object deallocation
(CPython calls every code-extra free function, with NULL for slots a user never set)."""
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import gc, torch, xcompile, xcompile.testing
    def f(a, b):
        return (a * b).sin() + 1
    x, y = torch.randn(8), torch.randn(8)
    ref = torch.compile(f, backend="eager", fullgraph=True)
    ours = xcompile.compile(f, backend=xcompile.testing.CompileCounter(), fullgraph=True)
    for _ in range(3):
        torch.testing.assert_close(ref(x, y), f(x, y))
        torch.testing.assert_close(ours(x, y), f(x, y))
        torch.testing.assert_close(torch.compile(lambda t: t * 2, backend="eager")(x), x * 2)
        gc.collect()
    import torch._dynamo
    torch._dynamo.reset()
    xcompile.reset()
    del ref, ours
    gc.collect()
    print("OK")
""")


def test_torch_compile_and_xcompile_in_one_process():
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("OK"), (
        f"exit code {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
