"""Indexing: ints, slices, None, Ellipsis, bool masks, index tensors, gather/scatter, setitem."""
import torch

from .harness import CaseTable, Perm, rb, rg, ri, rn

T = CaseTable("index")


@T.case(rn(4, 5))
def int_index(a):
    return a[0], a[-1], a[1, 2], a[2][3]


@T.case(rn(6, 5))
def slices(a):
    return a[1:3], a[:, 2:], a[::2], a[1:5:2, ::3], a[-3:]


@T.case(rn(6, 5))
def slices_with_arithmetic_bounds(a):
    n = a.shape[0]
    return a[: n // 2] + a[n // 2:], a[1: n - 1]


@T.case(rn(3, 4))
def none_index(a):
    return a[None], a[:, None], a[None, :, None], a[..., None]


@T.case(rn(2, 3, 4))
def ellipsis(a):
    return a[..., 0], a[0, ...], a[..., 1:3], a[0, ..., 2]


@T.case(rn(4, 5), rb(4, 5))
def bool_mask_select(a, m):
    # masked selection has a data-dependent size; use masked_fill/where to stay static
    return a.masked_fill(m, 0.0), torch.where(m, a, -a)


@T.case(rn(4, 5), ri(3, high=4))
def index_tensor_rows(a, idx):
    return a[idx], a[idx, 1:], a[:, idx]


@T.case(rn(4, 5), ri(3, high=4), ri(3, high=5))
def index_tensor_pairs(a, i, j):
    return a[i, j], a[i[:, None], j[None, :]]


@T.case(rn(4, 5))
def index_list_of_ints(a):
    return a[[0, 2, 3]], a[:, [1, 1, 4]]


@T.case(rn(5, 4), ri(5, 3, high=4))
def gather(a, idx):
    return a.gather(1, idx), torch.gather(a, 1, idx) * 2


@T.case(rn(5, 4), ri(3, high=5))
def index_select(a, idx):
    return a.index_select(0, idx), torch.index_select(a, 1, idx.clamp(max=3))


@T.case(rn(4, 5))
def setitem_int(a):
    b = a.clone()
    b[0] = 0.0
    b[1, 2] = 5.0
    return b


@T.case(rn(4, 5))
def setitem_slice_with_tensor(a):
    b = torch.zeros(4, 5)
    b[1:3] = a[:2]
    b[:, -1] = 7
    return b


@T.case(rn(4, 5), rb(4, 5))
def setitem_bool_mask(a, m):
    b = a.clone()
    b[m] = 0.0
    return b


@T.case(rn(6, 3), Perm(6, 3), rn(3, 3))
def setitem_index_tensor(a, idx, v):
    b = a.clone()
    b[idx] = v
    return b


@T.case(rn(4, 5))
def setitem_on_input(a):
    a[0] = 1.0
    a[:, 1] *= 2
    return a.sum(1)


@T.case(rn(4, 5), rn(5))
def setitem_broadcast_row(a, row):
    out = a.clone()
    out[..., :] = row
    out[2] += 1
    return out


@T.case(rn(5, 3), ri(4, high=5), rn(4, 3))
def index_add_and_put(a, idx, src):
    return a.index_add(0, idx, src), a.index_put((idx,), src, accumulate=True)


@T.case(rn(3, 5), ri(3, 5, high=5), rn(3, 5))
def scatter_family(a, idx, src):
    return a.scatter(1, idx, src), a.scatter_add(1, idx, src), torch.zeros(3, 5).scatter_(1, idx, 1.0)


@T.case(rn(4, 5), ri(4, 5, high=2))
def masked_ops_from_int_mask(a, m):
    mask = m.bool()
    return a.masked_fill(mask, -1.0), a * mask


@T.case(rn(3, 4, 5))
def mixed_index(a):
    return a[0, 1:3, None], a[:, 0, ::2], a[-1, ..., None, 1]


@T.case(rn(3, 4))
def take_along_dim(a):
    idx = a.argsort(1)
    return torch.take_along_dim(a, idx, dim=1)


@T.case(rn(6, 4), ri(6, high=3))
def embedding_like_lookup(table, ids):
    return table[ids].sum(0)


@T.case(rg(4, 5), ri(3, high=4), grad=True)
def index_with_grad(a, idx):
    return a[idx] * 2, a[1:3, ::2].exp()


@T.case(rn(4, 5))
def setitem_through_view(a):
    b = a.clone()
    row = b[1]
    row[2:] = 0.0
    return b, row
