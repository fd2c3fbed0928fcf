import logging

import pytest
import torch

import xcompile
from xcompile import config, log
from xcompile.backends.registry import list_backends, lookup_backend, register_backend


def test_config_patch_restores_on_exit_and_error():
    old = config.cache_size_limit
    with config.patch(cache_size_limit=3):
        assert config.cache_size_limit == 3
    assert config.cache_size_limit == old
    with pytest.raises(RuntimeError):
        with config.patch(cache_size_limit=4):
            raise RuntimeError("boom")
    assert config.cache_size_limit == old


def test_config_patch_as_decorator_and_unknown_knob():
    @config.patch(verify=True)
    def f():
        return config.verify

    assert f() is True and config.verify is False
    with pytest.raises(AttributeError, match="no knob"):
        config.patch(not_a_knob=1)


def test_set_logs_rejects_unknown_and_logs_enabled(caplog):
    with pytest.raises(ValueError, match="unknown log artifact"):
        xcompile.set_logs(nonsense=True)
    xcompile.set_logs(guards=True)
    try:
        assert log.enabled("guards")
        logging.getLogger("xcompile").propagate = True
        with caplog.at_level(logging.DEBUG, logger="xcompile.guards"):
            log.log("guards", "hello %s", "world")
        assert "hello world" in caplog.text
    finally:
        xcompile.set_logs(guards=False)
        logging.getLogger("xcompile").propagate = False
    assert not log.enabled("guards")


def test_registry_lookup():
    assert {"eager", "aot_eager", "inductor"} <= set(list_backends())
    fn = lookup_backend("eager")
    gm = torch.fx.symbolic_trace(lambda x: x + 1)
    assert fn(gm, [torch.ones(2)])(torch.ones(2)).tolist() == [2.0, 2.0]

    def mine(gm, example_inputs):
        return gm.forward

    assert lookup_backend(mine) is mine
    register_backend("mine_for_test", mine)
    assert lookup_backend("mine_for_test") is mine
    with pytest.raises(ValueError, match="unknown backend 'nope'"):
        lookup_backend("nope")
    with pytest.raises(TypeError, match="backend must be"):
        lookup_backend(3)


def test_compile_argument_errors():
    with pytest.raises(RuntimeError, match="Either mode or options"):
        xcompile.compile(lambda x: x, mode="default", options={})
    with pytest.raises(RuntimeError, match="Unrecognized mode"):
        xcompile.compile(lambda x: x, mode="fastest")
    with pytest.raises(TypeError, match="callable"):
        xcompile.compile(3)
    f = lambda x: x  # noqa: E731
    assert xcompile.compile(f, disable=True) is f
