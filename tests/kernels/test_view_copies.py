"""The ``*_copy`` ops (issue #31): a view's values in a new tensor of its own.

The kernel generator lowered ``view_copy``, ``permute_copy`` and ``expand_copy`` with their view's
row, which keeps a strided reference into the base laid out as the node's meta says; a copy's
meta is contiguous, so ``permute_copy`` read the input with the wrong strides (22 of 24 values
wrong), ``expand_copy`` read past the input's storage (setStorage raised) and ``view_copy``
returned the input's memory. Every ``*_copy`` op is checked on every backend: values, strides,
and that the result does not share the input's memory.
"""
import pytest
import torch
from tests.opinfo.harness import compile_on

BACKENDS = ("eager", "aot_eager", "inductor", "inductor-dynamic")

COPIES = {
    "permute_copy": lambda x: torch.permute_copy(x, (1, 2, 0)),
    "permute_copy of an intermediate": lambda x: torch.permute_copy(x * 2, (2, 0, 1)) + 1,
    "expand_copy": lambda x: torch.expand_copy(x[:, :1], (2, 3, 4)),
    "expand_copy, new dims": lambda x: torch.expand_copy(x[0, 0], (5, 2, 4)),
    "view_copy": lambda x: torch.view_copy(x, (6, 4)),
    "view_copy of an intermediate": lambda x: torch.view_copy(x.transpose(0, 1) * 1, (12, 2)),
    "transpose_copy": lambda x: torch.transpose_copy(x, 0, 2),
    "t_copy": lambda x: torch.t_copy(x[0]),
    "unsqueeze_copy": lambda x: torch.unsqueeze_copy(x, 1),
    "squeeze_copy": lambda x: torch.squeeze_copy(x[:, :1], 1),
    "diagonal_copy": lambda x: torch.diagonal_copy(x, 0, 1, 2),
    "select_copy": lambda x: torch.select_copy(x, 1, 2),
    "slice_copy": lambda x: torch.slice_copy(x, 2, 1, 4, 2),
    "unfold_copy": lambda x: torch.unfold_copy(x, 2, 2, 1),
    "as_strided_copy": lambda x: torch.as_strided_copy(x, (3, 2), (1, 3), 2),
    "alias_copy": lambda x: torch.alias_copy(x),
    "detach_copy": lambda x: torch.detach_copy(x),
    "narrow_copy": lambda x: torch.narrow_copy(x, 2, 1, 2),
    "split_copy": lambda x: torch.split_copy(x, 2, 2),
    "split_with_sizes_copy": lambda x: torch.split_with_sizes_copy(x, [1, 3], 2),
    "unbind_copy": lambda x: torch.unbind_copy(x, 1),
    "view_as_real_copy": lambda x: torch.view_as_real_copy(torch.complex(x, -x)),
    "view_as_complex_copy": lambda x: torch.view_as_complex_copy(x.reshape(2, 6, 2)),
    "indices: _reshape_alias_copy": lambda x: torch.ops.aten._reshape_alias_copy(x, (4, 6), (6, 1)),
}


pytestmark = pytest.mark.usefixtures("fresh_compilers")
_compile = compile_on


def _leaves(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(COPIES))
def test_copy_ops_are_copies(backend, name):
    fn = COPIES[name]
    x = torch.randn(2, 3, 4)
    ref = _leaves(fn(x))
    out = _leaves(_compile(fn, backend)(x))
    assert len(out) == len(ref)
    for r, o in zip(ref, out):
        assert (o.shape, o.dtype, o.stride()) == (r.shape, r.dtype, r.stride())
        torch.testing.assert_close(o, r, rtol=0, atol=0)
        assert o.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()
    before = x.clone()
    for o in out:
        o.add_(1)                   # writing the copy leaves the input alone
    assert torch.equal(x, before)
