"""A compiled frame that reads global state through a torch getter (torch.get_num_threads(),
torch.backends.mkldnn.enabled, torch.backends.cuda.matmul.allow_tf32, ...) folds the answer
into its trace, so it guards on that answer: when the setting changes, the next call
recompiles and gives eager's answer (issue #19 item 5, the torch.backends flags)."""
from __future__ import annotations

import types

import pytest
import torch

import xcompile
from xcompile import _C
from xcompile.testing import CompileCounterWithBackend


def _set_attr(owner, name):
    return lambda v: setattr(owner, name, v)


def _precision(v):
    torch.set_float32_matmul_precision("high" if v else "highest")


def _threads(v):
    torch.set_num_threads(1 if v else 2)


def _seed(v):
    torch.manual_seed(1 if v else 2)


def reads_cublas_tf32(x):
    return x + 1 if torch.backends.cuda.matmul.allow_tf32 else x - 1


def reads_mkldnn(x):
    return x + 1 if torch.backends.mkldnn.enabled else x - 1


def reads_cudnn_tf32(x):
    return x + 1 if torch.backends.cudnn.allow_tf32 else x - 1


def reads_precision(x):
    return x + 1 if torch.get_float32_matmul_precision() == "highest" else x - 1


def reads_threads(x):
    return x * torch.get_num_threads()


def reads_seed(x):
    return x + torch.initial_seed()


READERS = [
    (reads_cublas_tf32, _set_attr(torch.backends.cuda.matmul, "allow_tf32"),
     lambda: torch.backends.cuda.matmul.allow_tf32),
    (reads_mkldnn, _set_attr(torch.backends.mkldnn, "enabled"), lambda: torch.backends.mkldnn.enabled),
    (reads_cudnn_tf32, _set_attr(torch.backends.cudnn, "allow_tf32"), lambda: torch.backends.cudnn.allow_tf32),
    (reads_precision, _precision, torch.get_float32_matmul_precision),
    (reads_threads, _threads, torch.get_num_threads),
    (reads_seed, _seed, torch.initial_seed),
]


@pytest.mark.parametrize("backend", ["eager", "inductor"])
@pytest.mark.parametrize("fn,flip,read", READERS, ids=[r[0].__name__ for r in READERS])
def test_a_changed_setting_recompiles_and_matches_eager(fn, flip, read, backend):
    before = read()
    xcompile.reset()
    try:
        cnt = CompileCounterWithBackend(backend)
        cf = xcompile.compile(fn, backend=cnt)
        x = torch.randn(4)
        for setting in (False, True, False, True):
            flip(setting)
            torch.testing.assert_close(cf(x), fn(x), rtol=0, atol=0)
        assert cnt.frame_count == 2               # each setting once; the old entry serves again
    finally:
        if read is torch.initial_seed:
            torch.manual_seed(before)
        elif read is torch.get_float32_matmul_precision:
            torch.set_float32_matmul_precision(before)
        elif read is torch.get_num_threads:
            torch.set_num_threads(before)
        else:
            flip(before)
        xcompile.reset()


def test_the_guard_names_the_getter():
    xcompile.reset()
    cf = xcompile.compile(reads_threads, backend="eager")
    cf(torch.randn(2))
    dump = _C.cache_entries(cf.__wrapped__.__code__)[0].guard.dump()
    assert "get_num_threads()" in dump
    xcompile.reset()
    cf = xcompile.compile(reads_mkldnn, backend="eager")
    cf(torch.randn(2))
    assert "torch.backends.mkldnn.enabled" in _C.cache_entries(cf.__wrapped__.__code__)[0].guard.dump()
    xcompile.reset()


def test_pure_and_globally_guarded_getters_add_no_call_guard():
    def f(x):
        dt = torch.promote_types(torch.float32, torch.float64)
        if torch.is_grad_enabled() and torch.get_default_dtype() == torch.float32:
            return x.to(dt)
        return x
    xcompile.reset()
    cf = xcompile.compile(f, backend="eager")
    x = torch.randn(2)
    torch.testing.assert_close(cf(x), f(x))
    dump = _C.cache_entries(cf.__wrapped__.__code__)[0].guard.dump()
    assert "promote_types(" not in dump and "is_grad_enabled(" not in dump
    xcompile.reset()


class _FlagModule(types.ModuleType):
    """A module with a property, as torch.backends' modules have (PropModule, ContextProp)."""

    fail = False
    value = 3

    @property
    def flag(self):
        if _FlagModule.fail:
            raise RuntimeError("flag unavailable")
        return _FlagModule.value

    @flag.setter
    def flag(self, v):
        _FlagModule.value = v


flagmod = _FlagModule("flagmod")


def reads_flagmod(x):
    return x + flagmod.flag


def test_a_module_property_is_guarded_by_asking_again():
    xcompile.reset()
    cnt = CompileCounterWithBackend("eager")
    cf = xcompile.compile(reads_flagmod, backend=cnt)
    x = torch.zeros(2)
    try:
        torch.testing.assert_close(cf(x), x + 3)
        flagmod.flag = 5
        torch.testing.assert_close(cf(x), x + 5)
        assert cnt.frame_count == 2
        _FlagModule.fail = True
        with pytest.raises(RuntimeError, match="flag unavailable"):
            cf(x)                                 # the guard fails; the new trace raises eager's error
        _FlagModule.fail = False
        torch.testing.assert_close(cf(x), x + 5)
        assert cnt.frame_count == 2               # the entry for 5 serves again
    finally:
        _FlagModule.fail, _FlagModule.value = False, 3
        xcompile.reset()


def test_a_python_torch_function_is_guarded_only_when_it_reads_state():
    import torch.backends.mha as mha

    def f(x):
        if torch.backends.mha.get_fastpath_enabled():
            return x + 1
        return x - 1

    def g(x):
        m = torch.nn.functional._canonical_mask(mask=None, mask_name="m", other_type=None,
                                                other_name="o", target_type=torch.float32)
        return x + 1 if m is None else x

    xcompile.reset()
    before = mha.get_fastpath_enabled()
    try:
        cf = xcompile.compile(f, backend="eager")
        x = torch.zeros(2)
        for flag in (True, False, True):
            mha.set_fastpath_enabled(flag)
            torch.testing.assert_close(cf(x), f(x))
        cg = xcompile.compile(g, backend="eager")
        torch.testing.assert_close(cg(x), g(x))
        assert "_canonical_mask(" not in _C.cache_entries(cg.__wrapped__.__code__)[0].guard.dump()
    finally:
        mha.set_fastpath_enabled(before)
        xcompile.reset()


def test_compiling_under_cprofile_leaves_the_profiler_running():
    import cProfile
    import sys

    def g(x):
        m = torch.nn.functional._canonical_mask(mask=None, mask_name="m", other_type=None,
                                                other_name="o", target_type=torch.float32)
        return x + 1 if m is None else x

    def after():
        return 1

    xcompile.reset()
    pr = cProfile.Profile()
    pr.enable()
    try:
        torch.testing.assert_close(xcompile.compile(g, backend="eager")(torch.zeros(2)), torch.ones(2))
        if sys.version_info >= (3, 12):       # cProfile runs on sys.monitoring (PEP 669) from 3.12
            assert sys.monitoring.get_tool(sys.monitoring.PROFILER_ID) == "cProfile"
        else:
            assert sys.getprofile() is pr
        after()
    finally:
        pr.disable()
        xcompile.reset()
    pr.create_stats()
    assert any(k[2] == "after" for k in pr.stats)
