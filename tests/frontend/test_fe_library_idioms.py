"""Constructs that Hugging Face transformers uses around its tensor code, each on its own:
config objects with their own ``__getattribute__`` (``attribute_map``) and ``__getattr__``,
``str(type(x))``, ``func.__code__.co_varnames``, ``inspect.signature(fn).parameters``,
``super().get`` inside a dict subclass's ``get``, torch.nn modules made in ``forward``, and which
files are compiled (third-party packages inside the stdlib folder of a Python without a
virtualenv).  Each compiled result is compared with eager; graph counts are exact."""
from __future__ import annotations

import inspect
import os
import sysconfig

import pytest
import torch

import xcompile
from xcompile import code_states
from xcompile.testing import CompileCounter


@pytest.fixture(autouse=True)
def _reset():
    xcompile.reset()
    yield
    xcompile.reset()


def _run(fn, *args, graphs=1):
    cnt = CompileCounter()
    cf = xcompile.compile(fn, backend=cnt)
    for _ in range(2):
        fresh = [torch.randn_like(a) if isinstance(a, torch.Tensor) else a for a in args]
        torch.testing.assert_close(cf(*fresh), fn(*fresh))
    assert cnt.frame_count == graphs, cnt.frame_count
    return cnt


# -- which files are compiled ----------------------------------------------------------------------------------
def test_site_packages_inside_stdlib_is_compiled():
    stdlib = sysconfig.get_paths()["stdlib"]
    inside = os.path.join(stdlib, "site-packages", "somepkg", "mod.py")      # pyenv / conda / python.org
    assert not code_states.skip_file(inside)
    assert not code_states.skip_file("/venv/lib/python3.11/site-packages/somepkg/mod.py")
    assert not code_states.skip_file("/usr/lib/python3/dist-packages/somepkg/mod.py")
    assert code_states.skip_file(os.path.join(stdlib, "json", "decoder.py"))
    assert code_states.skip_file(torch.nn.functional.__file__)
    assert code_states.skip_file(inspect.__file__)


def test_installed_package_frames_are_compiled():
    transformers = pytest.importorskip("transformers")
    from transformers import pytorch_utils
    assert not code_states.skip_code(pytorch_utils.apply_chunking_to_forward.__code__)
    assert transformers.__file__


# -- config objects ---------------------------------------------------------------------------------------------
class MappedConfig:
    """PretrainedConfig's shape: names mapped through a class-level ``attribute_map``."""
    attribute_map = {"hidden": "hidden_size", "layers": "num_layers"}

    def __init__(self):
        self.hidden_size = 3
        self.num_layers = 2
        self.scale = 0.5

    def __setattr__(self, key, value):
        if key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        super().__setattr__(key, value)

    def __getattribute__(self, key):
        if key != "attribute_map" and key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        return super().__getattribute__(key)


class LayeredConfig(MappedConfig):
    """A second ``__getattribute__`` reached through super() (transformers' heterogeneity mixin)."""

    def __getattribute__(self, key):
        spec = super().__getattribute__("__dict__").get("_spec")
        if spec is not None and key in spec:
            raise AttributeError(f"{key} is per-layer")
        return super().__getattribute__(key)


def test_custom_getattribute_mapped_names():
    cfg = MappedConfig()

    def f(x):
        return x * cfg.hidden + cfg.layers + cfg.scale + cfg.hidden_size

    _run(f, torch.randn(4))


def test_custom_getattribute_missing_attribute_defaults():
    cfg = LayeredConfig()

    def f(x):
        v = getattr(cfg, "vision_feature_layer", None)
        has = hasattr(cfg, "use_cache")
        return x + (1 if v is None else 2) + (10 if has else 20) + cfg.hidden

    _run(f, torch.randn(4))


def test_custom_getattribute_raising_in_traced_code_is_caught():
    cfg = LayeredConfig()
    object.__setattr__(cfg, "_spec", ("scale",))

    def f(x):
        try:
            s = cfg.scale
        except AttributeError:
            s = -1.0
        return x * s

    _run(f, torch.randn(4))


def test_custom_getattribute_value_change_recompiles():
    cfg = MappedConfig()

    def f(x):
        return x * cfg.hidden

    cnt = CompileCounter()
    cf = xcompile.compile(f, backend=cnt)
    x = torch.randn(4)
    torch.testing.assert_close(cf(x), x * 3)
    cfg.hidden = 5                                   # stored as hidden_size through __setattr__
    torch.testing.assert_close(cf(x), x * 5)
    assert cnt.frame_count == 2


def test_getattribute_frame_compiled_alone_does_not_recurse():
    """The config's __getattribute__ reached from eager code becomes a compiled frame of its own;
    its guards must not run the same __getattribute__ again (that recursed without end)."""
    cfg = MappedConfig()

    @xcompile.disable
    def eager_reads(c):
        return c.hidden + c.layers

    def f(x):
        return x + eager_reads(cfg)

    cf = xcompile.compile(f, backend="eager")
    for _ in range(3):
        x = torch.randn(3)
        torch.testing.assert_close(cf(x), x + 5)
    assert cfg.hidden == 3


def test_getattr_hook_is_traced():
    class Lazy:
        def __init__(self):
            self.base = 2.0

        def __getattr__(self, name):
            if name.startswith("scaled_"):
                return self.base * int(name[len("scaled_"):])
            raise AttributeError(name)

    obj = Lazy()

    def f(x):
        return x * obj.scaled_3 + getattr(obj, "other", 1.0)

    _run(f, torch.randn(4))


# -- introspection --------------------------------------------------------------------------------------------
def test_str_of_a_class():
    def f(x):
        rep = str(type(x))
        name = repr(type(x))
        return x + (1 if "torch" in rep else 0) + (1 if name.startswith("<class") else 0) + len(format(int))

    _run(f, torch.randn(4))


def test_function_code_varnames():
    def inner(self, use_cache=None, other=None):
        return use_cache

    def f(x):
        names = inner.__code__.co_varnames
        idx = names.index("use_cache") - 1 if "use_cache" in names else None
        return x + idx + inner.__code__.co_argcount

    _run(f, torch.randn(4))


def test_inspect_signature():
    class M(torch.nn.Module):
        def forward(self, a, b=2):
            return a

        def chunk(self, x):
            return x * 2

    m = M()

    def g(x, y=None):
        return x

    def f(x):
        n = len(inspect.signature(m.chunk).parameters)
        k = "b" in inspect.signature(m.forward).parameters
        p = inspect.signature(g).parameters["y"]
        names = list(inspect.signature(m).parameters.keys())
        return x + n + k + (p.default is None) + len(names) + (p.kind == inspect.Parameter.POSITIONAL_OR_KEYWORD)

    _run(f, torch.randn(4))


# -- containers and modules -----------------------------------------------------------------------------------
class Registry(dict):
    """transformers' _CanRecordRegistry: ``get`` overridden, calling ``super().get``."""

    def get(self, model):
        return super().get(str(model.__class__)) or {}


def test_dict_subclass_super_get_across_a_break():
    reg = Registry()
    dict.__setitem__(reg, str(torch.nn.Linear), {"k": 1})

    def f(x, lin):
        flags = reg.get(lin)
        print("", end="")                           # a graph break while `super().get` is live
        return x + len(flags) + len(reg.get(x))

    lin = torch.nn.Linear(2, 2)
    cf = xcompile.compile(f, backend="eager")
    for _ in range(2):
        x = torch.randn(3)
        torch.testing.assert_close(cf(x, lin), f(x, lin))


def test_dict_subclass_super_get_runner():
    """The runner rebuilt after a break binds dict.get itself, never the subclass's override."""
    reg = Registry()
    dict.__setitem__(reg, str(torch.nn.Linear), {"k": 1})

    def f(x, lin):
        getter = super(Registry, reg).get
        xcompile.graph_break()
        return x + len(getter(str(type(lin))))

    lin = torch.nn.Linear(2, 2)
    cf = xcompile.compile(f, backend="eager")
    x = torch.randn(3)
    torch.testing.assert_close(cf(x, lin), x + 1)


def test_stateless_torch_module_made_in_forward():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        def forward(self, x):
            return torch.nn.ReLU()(self.lin(x)) + torch.nn.Softmax(dim=-1)(x)

    m = M()
    _run(m, torch.randn(2, 4))


def test_torch_module_with_parameters_made_in_forward_breaks():
    def f(x):
        return torch.nn.Linear(4, 4)(x).shape[0] + x

    cnt = CompileCounter()
    cf = xcompile.compile(f, backend=cnt)
    x = torch.randn(4)
    torch.testing.assert_close(cf(x), f(x))


# -- locals() ---------------------------------------------------------------------------------------------
def test_locals_is_the_users_frame():
    """``'{name}'.format(**locals())`` (setuptools' import hook does this): traced, never run by the
    graph-break machinery where it would see the runner's own variables."""
    def f(x, fullname):
        method_name = "spec_for_{fullname}".format(**locals())
        return x + 1, method_name

    cf = xcompile.compile(f, backend="eager")
    x = torch.randn(2)
    out, name = cf(x, "abc")
    assert name == "spec_for_abc"
    torch.testing.assert_close(out, x + 1)


def test_locals_after_a_break_sees_every_variable():
    """A resume function keeps the variables only ``locals()`` reads (liveness counts it)."""
    def f(x, fullname):
        y = x + 1
        xcompile.graph_break()
        name = "spec_for_{fullname}".format(fullname=locals()["fullname"])
        return y, name, sorted(locals())

    cf = xcompile.compile(f, backend="eager")
    x = torch.randn(2)
    ref = f(x, "abc")
    out = cf(x, "abc")
    torch.testing.assert_close(out[0], ref[0])
    assert out[1:] == ref[1:]


# -- found on real models -----------------------------------------------------------------------------------
def test_staticmethod_with_defaults_called_on_self():
    """RoBERTa's ``self.create_position_ids_from_input_ids(ids, pad, 0)``: the guard on the
    defaults reads the function behind the staticmethod (it read the staticmethod object, a
    guard that never passed, so the whole model ran eagerly without a word)."""
    class Emb(torch.nn.Module):
        @staticmethod
        def positions(x, offset=0):
            return torch.cumsum(torch.ones_like(x), 0) + offset

        def forward(self, x):
            return x + self.positions(x)

    m = Emb()
    cnt = _run(m, torch.randn(5))
    x = torch.randn(5)
    cf = xcompile.compile(m, backend=cnt)
    cf(x)
    assert cnt.frame_count == 1


def test_int_plus_equals_tensor():
    """T5: ``relative_buckets = 0; relative_buckets += t`` is ``0 + t`` (int has no __iadd__)."""
    def f(x):
        acc = 0
        acc += (x > 0).long() * 3
        scale = 1.0
        scale *= x
        return acc + scale

    _run(f, torch.randn(6))


# -- functools wrappers and descriptors on classes ----------------------------------------------------------
def test_lru_cached_method_runs_once_like_eager():
    """transformers' ``logger.warning_once``: an lru_cache'd function set on a class binds to the
    instance; with constant arguments it runs once (at trace time) and later calls hit the cache,
    as in eager, without a graph break."""
    import functools

    calls = []

    class Logger:
        pass

    @functools.lru_cache(None)
    def warning_once(self, msg):
        calls.append(msg)

    Logger.warning_once = warning_once
    log = Logger()

    def f(x):
        log.warning_once("sdpa does not support output_attentions")
        return x * 2

    cnt = _run(f, torch.randn(3))
    assert calls == ["sdpa does not support output_attentions"]
    assert cnt.frame_count == 1


def test_lru_cached_function_with_tensor_arguments_is_traced():
    import functools

    @functools.lru_cache(None)
    def scale(n):
        return n * 2

    @functools.lru_cache(None)
    def apply(t):          # tensors hash by identity: traced, not cached at trace time
        return t + 1

    def f(x):
        return apply(x) * scale(3)

    _run(f, torch.randn(3))


def test_descriptors_on_a_class_are_bound_or_break():
    import functools

    class Obj:
        def __init__(self):
            self.k = 3

        def _mul(self, x, by):
            return x * by * self.k

        triple = functools.partialmethod(_mul, by=3)

        @functools.cached_property
        def offset(self):
            return self.k + 1

    o = Obj()

    def f(x):
        return o.triple(x) + o.offset

    cf = xcompile.compile(f, backend="eager")
    for _ in range(2):
        x = torch.randn(3)
        torch.testing.assert_close(cf(x), x * 9 + 4)


# -- forward hooks registered inside the compiled frame -------------------------------------------------------
def _hooked_model(remove=True, pre=False, with_kwargs=False):
    class Inner(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        def forward(self, x):
            return torch.relu(self.lin(x)) * 2

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = Inner()

        def forward(self, x):
            seen = []
            handles = []
            for mod in self.modules():
                if isinstance(mod, torch.nn.Linear):
                    if pre:
                        handles.append(mod.register_forward_pre_hook(lambda m, a: (a[0] * 3,)))
                    elif with_kwargs:
                        handles.append(mod.register_forward_hook(lambda m, a, k, o: seen.append(o) or o + 1,
                                                                 with_kwargs=True))
                    else:
                        handles.append(mod.register_forward_hook(lambda m, a, o: seen.append(o)))
            try:
                out = self.inner(x) + 1
            finally:
                if remove:
                    for h in handles:
                        h.remove()
            return out, tuple(seen)

    return M()


@pytest.mark.parametrize("kind", ["post", "pre", "with_kwargs"])
def test_hooks_installed_and_removed_in_forward(kind):
    m = _hooked_model(pre=kind == "pre", with_kwargs=kind == "with_kwargs")
    cnt = CompileCounter()
    cm = xcompile.compile(m, backend=cnt)
    for _ in range(3):
        x = torch.randn(2, 4)
        out, seen = cm(x)
        ref, ref_seen = m(x)
        torch.testing.assert_close(out, ref)
        assert len(seen) == len(ref_seen)
        for a, b in zip(seen, ref_seen):
            torch.testing.assert_close(a, b)
    assert cnt.frame_count == 1                  # one graph, no recompile on later calls
    assert not m.inner.lin._forward_hooks and not m.inner.lin._forward_pre_hooks


def test_hook_left_installed_stays_like_eager():
    m = _hooked_model(remove=False)
    cm = xcompile.compile(m, backend="eager")
    x = torch.randn(2, 4)
    out, seen = cm(x)
    assert len(m.inner.lin._forward_hooks) == 1          # registered for real, as in eager
    assert len(seen) == 1
    out2, seen2 = cm(x)
    assert len(m.inner.lin._forward_hooks) == 2
    assert len(seen2) == 1                                # the old hook appends to the old list
    torch.testing.assert_close(out2, out)
