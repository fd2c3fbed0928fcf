"""ATen calls the kernel graph makes (convolution, max_pool2d...) run on our buffers' layouts,
which may differ from the FX metadata (convolutions get channels-last inputs). Views taken of
their results and graph outputs must still have eager's values and strides."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import xcompile

W = torch.randn(8, 3, 3, 3)
WP, BP, W8 = torch.randn(8, 3, 2, 2), torch.randn(8), torch.randn(4, 8, 3, 3)

CASES = {
    "conv_flatten": lambda x: F.conv2d(x, W).flatten(1),
    "conv_pool_flatten": lambda x: F.max_pool2d(F.conv2d(x, W), 2).flatten(1),
    "conv_pool_reshape_mul": lambda x: F.max_pool2d(F.conv2d(x, W), 2).reshape(2, -1) * 1,
    "conv_out": lambda x: F.conv2d(x, W),
    "conv_pool_out": lambda x: F.max_pool2d(F.conv2d(x, W), 2),
    "conv_pool_indices": lambda x: F.max_pool2d(F.conv2d(x, W), 2, return_indices=True),
    "conv_transpose_view": lambda x: F.conv2d(x, W).transpose(1, 2),
    "conv_slice": lambda x: F.conv2d(x, W)[:, 1:3],
    "conv_adaptive_flatten": lambda x: F.adaptive_avg_pool2d(F.conv2d(x, W), 3).flatten(1),
    "conv_expand_out": lambda x: F.conv2d(x, W).sum((2, 3), keepdim=True).expand(2, 8, 4, 4),
    # patch embeddings (kernel == stride): a gather and an addmm, channels-last output
    "patch_tokens": lambda x: F.conv2d(x, WP, BP, stride=2).flatten(2).transpose(1, 2) + 1,
    "patch_out": lambda x: F.conv2d(x, WP, BP, stride=2),
    "patch_slice_out": lambda x: (F.conv2d(x, WP, stride=2)[:, 1:3], F.conv2d(x, WP, stride=2)),
    "patch_pool": lambda x: F.max_pool2d(F.conv2d(x[..., :15], WP, BP, stride=2), 2),
    "patch_then_conv": lambda x: F.conv2d(F.conv2d(x, WP, BP, stride=2).relu(), W8),
    "patch_rect": lambda x: F.conv2d(x, torch.ones(4, 3, 3, 2), stride=(3, 2)).sum(1),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_values_and_strides_match_eager(name):
    f = CASES[name]
    xcompile.reset()
    x = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        out, ref = xcompile.compile(f, backend="inductor")(x), f(x)
    out = out if isinstance(out, tuple) else (out,)
    ref = ref if isinstance(ref, tuple) else (ref,)
    for o, r in zip(out, ref):
        torch.testing.assert_close(o, r, atol=1e-4, rtol=1e-4)
        assert o.shape == r.shape and o.dtype == r.dtype
        if 0 not in r.stride():
            assert o.stride() == r.stride()


def test_conv_pool_linear_model_train_and_eval():
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                      nn.Flatten(), nn.Linear(8 * 7 * 7, 10))
    import copy
    m2 = copy.deepcopy(m)
    xcompile.reset()
    cm = xcompile.compile(m2, backend="inductor")
    for train in (True, False):
        m.train(train), m2.train(train)
        x = torch.randn(2, 3, 16, 16)
        ref, out = m(x), cm(x)
        torch.testing.assert_close(out, ref, atol=1e-4, rtol=1e-4)
        if train:
            ref.sum().backward(), out.sum().backward()
            for (n, p), (_, q) in zip(m.named_parameters(), m2.named_parameters()):
                torch.testing.assert_close(q.grad, p.grad, atol=1e-4, rtol=1e-4, msg=n)


# -- ATen results whose real strides differ from the plan (findings K1-K3) -------------------------

def _compile_raising(f):
    xcompile.reset()
    cf = xcompile.compile(f, backend="inductor")

    def run(*a):
        with xcompile.config.patch(kernel_raise_errors=True):
            return cf(*a)
    return run


def test_graph_output_layout_is_fixed_before_an_extern_reads_it():
    """K1: the relu result is saved for backward (a graph output, eager's contiguous strides), and
    max_pool2d reads it: the pool's output layout must be taken from the final layout."""
    def f(x, w, b):
        return F.max_pool2d(F.relu(F.conv2d(x, w)), 2).flatten(1) @ b
    w = torch.randn(4, 3, 3, 3, requires_grad=True)
    b = torch.randn(16, 5)
    x = torch.randn(2, 3, 6, 6)
    w2 = w.detach().clone().requires_grad_()
    out, ref = _compile_raising(f)(x, w2, b), f(x, w, b)
    torch.testing.assert_close(out, ref, atol=1e-4, rtol=1e-4)
    g = torch.randn_like(ref)
    out.backward(g), ref.backward(g)
    torch.testing.assert_close(w2.grad, w.grad, atol=1e-4, rtol=1e-4)


def test_graph_output_read_by_extern_keeps_the_planned_layout():
    from xcompile.kernels.graph import GraphLowering
    from xcompile.kernels.ir import Layout
    L = GraphLowering.__new__(GraphLowering)
    L.buffers, L.meta_exact, L.extern_reads, L.eager_layouts = {}, set(), {"buf0"}, {}
    L.nodes, L.current, L._counter = [], None, 1
    from xcompile.kernels.graph import TV
    from xcompile.kernels.ir import Buffer, TensorRef
    cl = Layout(torch.float32, (2, 4, 3, 3), (36, 1, 12, 4))
    L.buffers["buf0"] = Buffer("buf0", cl, "computed")
    tv = TV(torch.float32, cl.size, lambda ops, idx: ops.load("buf0", idx), TensorRef("buf0"))
    out = L._eager_layout(tv, torch.empty(2, 4, 3, 3))
    assert L.buffers["buf0"].layout == cl            # an ATen call already read it as it is
    assert out.ref.name != "buf0" and L.buffers[out.ref.name].layout.stride == (36, 9, 3, 1)


def test_extern_result_with_other_strides_than_its_fake_kernel():
    """K2: max_unpool2d on channels-last input: the fake kernel says contiguous, the CPU kernel
    returns channels-last; the consumer must read the real values."""
    def f(x, w):
        y, i = F.max_pool2d(F.conv2d(x, w), 2, return_indices=True)
        return F.max_unpool2d(y, i, 2) * 2 + 1, F.max_unpool2d(y, i, 2)
    x, w = torch.randn(2, 3, 6, 6), torch.randn(4, 3, 3, 3)
    with torch.no_grad():
        out, ref = _compile_raising(f)(x, w), f(x, w)
    for o, r in zip(out, ref):
        torch.testing.assert_close(o, r)
        assert o.stride() == r.stride()


def test_extern_backward_result_with_other_strides_than_its_fake_kernel():
    """K3: native_layer_norm_backward with a transposed grad: fake strides follow grad_out, the
    CPU kernel returns a contiguous grad_input."""
    def f(x, w):
        return x + (F.layer_norm(x, (8,)).transpose(1, 2) @ w).transpose(1, 2)
    x = torch.randn(2, 4, 8, requires_grad=True)
    w = torch.randn(4, 4)
    xc = x.detach().clone().requires_grad_()
    g = torch.randn(2, 4, 8)
    _compile_raising(f)(xc, w).backward(g)
    f(x, w).backward(g)
    torch.testing.assert_close(xc.grad, x.grad, atol=1e-5, rtol=1e-5)


def test_restride_helper():
    from xcompile.kernels.wrapper import _restride
    t = torch.randn(2, 3, 4, 5).permute(0, 2, 3, 1)
    r = _restride(t, (2, 4, 5, 3), (60, 15, 3, 1))
    assert r.stride() == (60, 15, 3, 1) and torch.equal(r, t)
    s = torch.randn(3, 1, 4)
    assert _restride(s, (3, 1, 4), (4, 1, 1)) is s       # only a size-1 dim's stride differs


def test_training_graphs_keep_convolutions_nchw():
    """Inference feeds convolutions channels-last input; the graphs of a training step do not
    (oneDNN's convolution_backward is slower on what a channels-last forward saves)."""
    from xcompile.kernels.compile import compile_aten_graph
    from xcompile.kernels.decompose import trace_aten

    def f(x, w):
        return torch.relu(F.conv2d(x, w, padding=1))
    x, w = torch.randn(2, 3, 8, 8), torch.randn(4, 3, 3, 3)
    gm = trace_aten(f, [x, w])
    channels_last = "(192, 1, 24, 3)"
    inference = compile_aten_graph(gm, [x, w])
    training = compile_aten_graph(gm, [x, w], training=True)
    assert channels_last in inference.wrapper_src
    assert channels_last not in training.wrapper_src, training.wrapper_src
    for fn in (inference, training):
        torch.testing.assert_close(fn(x, w)[0], f(x, w))


def test_patch_embedding_is_a_matmul():
    from .util import compile_fn
    wp, bp = torch.randn(16, 4, 2, 2), torch.randn(16)
    fn = lambda x, w, b: F.conv2d(x, w, b, stride=2).flatten(2).transpose(1, 2)   # noqa: E731
    x = torch.randn(2, 4, 8, 8)
    compiled = compile_fn(fn, [x, wp, bp])
    assert not any("convolution" in f and "matmul" not in f for f in compiled.fallbacks), compiled.fallbacks
    torch.testing.assert_close(compiled(x, wp, bp)[0], fn(x, wp, bp), atol=1e-5, rtol=1e-5)
