"""Compiled functions called from several threads at once: one compilation per guard set (a
thread that waited for another's compile uses its entry), correct results everywhere."""
import threading
import time

import torch

import xcompile


def test_concurrent_first_calls_compile_once():
    xcompile.reset()
    calls = []

    def slow_backend(gm, example_inputs):
        calls.append(1)
        time.sleep(0.2)                      # drops the GIL: the other threads miss meanwhile
        return gm.forward

    def f(x):
        return torch.sin(x) * 2

    cf = xcompile.compile(f, backend=slow_backend)
    x = torch.randn(8)
    start, errors = threading.Barrier(4), []

    def work():
        try:
            start.wait()
            for _ in range(5):
                torch.testing.assert_close(cf(x), f(x))
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(calls) == 1
    xcompile.reset()


def test_threads_with_graph_breaks_and_modules():
    xcompile.reset()
    m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))
    cm = xcompile.compile(m, backend="eager")

    def g(a, b):
        z = a @ b
        xcompile.graph_break()
        return z.relu() + 1

    cg = xcompile.compile(g, backend="eager")
    errors = []

    def work(k):
        try:
            for i in range(10):
                x = torch.randn(2 + (i + k) % 3, 8)
                torch.testing.assert_close(cm(x), m(x))
                a, b = torch.randn(3, 4), torch.randn(4, 5)
                torch.testing.assert_close(cg(a, b), g(a, b))
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    # the first batch size static, then one entry with a symbolic batch serves the others
    # (automatic dynamic shapes, as torch.compile)
    assert len(xcompile._C.cache_entries(torch.nn.Sequential.forward.__code__)) == 2
    xcompile.reset()
