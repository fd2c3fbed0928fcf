"""ATen calls the kernel graph makes (convolution, max_pool2d...) run on our buffers' layouts,
which may differ from the FX metadata (convolutions get channels-last inputs). Views taken of
their results and graph outputs must still have eager's values and strides."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import xcompile

W = torch.randn(8, 3, 3, 3)

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
