"""Views and shape changes: view/reshape/permute/transpose/expand/squeeze/unsqueeze/flatten,
chunk/split/narrow/unbind, and views returned as outputs (aliasing checked by the harness)."""
import torch

from .harness import CaseTable, nc, rn

T = CaseTable("views")


@T.case(rn(2, 3, 4))
def view_basic(a):
    return a.view(6, 4) * 2


@T.case(rn(2, 3, 4))
def view_infer_dim(a):
    return a.view(-1) + 1, a.view(2, -1) - 1


@T.case(rn(2, 3, 4))
def view_returned_aliases_input(a):
    return a.view(4, 6)


@T.case(nc(4, 6))
def reshape_noncontiguous(a):
    return a.reshape(24) + 0, a.reshape(2, 12)


@T.case(rn(2, 3, 4))
def reshape_tuple_arg(a):
    return a.reshape((3, 8)), a.reshape([4, -1])


@T.case(rn(2, 3, 4))
def permute(a):
    return a.permute(2, 0, 1) + 1, a.permute(1, 2, 0).contiguous()


@T.case(rn(2, 3, 4))
def transpose_and_t(a):
    return a.transpose(0, 2), a[0].t(), a.transpose(-1, -2) * 3, a.mT


@T.case(rn(3, 1))
def expand(a):
    return a.expand(3, 4) + 0, a.expand(2, 3, 5).sum(0)


@T.case(rn(3, 1), rn(3, 4))
def expand_as_and_broadcast_to(a, b):
    return a.expand_as(b) * b, torch.broadcast_to(a, (2, 3, 4)).contiguous()


@T.case(rn(1, 3, 1, 4))
def squeeze_variants(a):
    return a.squeeze(), a.squeeze(0), a.squeeze(-2) * 2, a.squeeze((0, 2))


@T.case(rn(3, 4))
def unsqueeze_variants(a):
    return a.unsqueeze(0), a.unsqueeze(-1) + 1, a[:, None, :] * 2, torch.unsqueeze(a, 1)


@T.case(rn(2, 3, 4, 5))
def flatten_unflatten(a):
    return a.flatten(), a.flatten(1), torch.flatten(a, 1, 2), a.flatten(1).unflatten(1, (3, 20))


@T.case(rn(6, 4))
def chunk(a):
    x, y, z = a.chunk(3)
    return x + y * z


@T.case(rn(7, 4))
def chunk_uneven(a):
    return torch.chunk(a, 3, dim=0)


@T.case(rn(6, 5))
def split_sizes(a):
    p, q = a.split([2, 4])
    r = torch.split(a, 2, dim=1)
    return p.sum() + q.sum(), r


@T.case(rn(6, 5))
def narrow(a):
    return a.narrow(0, 1, 3) * 2, torch.narrow(a, 1, 2, 2)


@T.case(rn(3, 4))
def unbind_loop(a):
    acc = torch.zeros(4)
    for row in a.unbind(0):
        acc = acc + row
    return acc


@T.case(rn(2, 3, 4))
def movedim(a):
    return a.movedim(0, -1) + 1, torch.movedim(a, (0, 1), (2, 0)).contiguous()


@T.case(rn(4, 4))
def diagonal_and_tril(a):
    return a.diagonal(), a.diag(), torch.tril(a), a.triu(1), torch.diag_embed(a[0])


@T.case(rn(3, 4))
def view_then_inplace_on_view(a):
    b = a.clone()
    v = b.view(12)
    v.mul_(2)
    return b


@T.case(rn(3, 4))
def contiguous_after_transpose(a):
    t = a.t()
    return t.is_contiguous(), t.contiguous().is_contiguous(), t.contiguous() + 1


@T.case(rn(2, 3))
def repeat_and_tile(a):
    return a.repeat(2, 2), a.tile((3, 1)), a.repeat_interleave(2, dim=0)


@T.case(rn(4, 6))
def unfold_view(a):
    return a.unfold(1, 3, 1).sum(-1)


@T.case(rn(2, 3, 4))
def shape_from_other_tensor(a):
    b = torch.zeros(6, 4)
    return a.view(b.shape) + b, a.reshape(b.size(0), -1)


@T.case(rn(8))
def as_strided_view(a):
    return a.as_strided((3, 2), (2, 1)) + 0


@T.case(rn(2, 3, 4))
def view_as(a):
    b = torch.empty(6, 4)
    return a.view_as(b), a.reshape_as(b) * 2


@T.case(rn(3, 4))
def flip_and_roll(a):
    return a.flip(0), torch.flip(a, (0, 1)), a.roll(1, 1), torch.rot90(a)


@T.case(rn(3, 4, dtype=torch.float32))
def view_dtype_reinterpret(a):
    return a.view(torch.int32) & 0xFF
