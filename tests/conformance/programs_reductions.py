"""Reductions and scans: sum/mean/prod/amax/amin/argmax/var/std/norm/logsumexp/cumsum/softmax..."""
import torch
import torch.nn.functional as F

from .harness import CaseTable, rb, rg, ri, rn, rp

T = CaseTable("reduce")


@T.case(rn(3, 4, 5))
def sum_all_and_dims(a):
    return a.sum(), a.sum(0), a.sum(-1), a.sum((0, 2)), torch.sum(a, dim=1, keepdim=True)


@T.case(rn(3, 4))
def mean_variants(a):
    return a.mean(), a.mean(1), torch.mean(a, dim=0, keepdim=True), a.mean(dim=(0, 1))


@T.case(ri(3, 4, high=5))
def int_sum_dtype(a):
    return a.sum(), a.sum(1, dtype=torch.float32), a.float().mean()


@T.case(rp(3, 4))
def prod(a):
    return a.prod(), a.prod(1), torch.prod(a, 0, keepdim=True)


@T.case(rn(3, 4))
def amax_amin(a):
    return a.amax(), a.amax(1), a.amin(0), torch.amax(a, dim=(0, 1), keepdim=True)


@T.case(rn(3, 4))
def max_min_with_dim(a):
    v, i = a.max(1)
    m = torch.min(a, dim=0)
    return v, i, m.values, m.indices, a.max(), a.min()


@T.case(rn(3, 4))
def argmax_argmin(a):
    return a.argmax(), a.argmax(1), torch.argmin(a, dim=0, keepdim=True)


@T.case(rn(4, 5))
def var_std(a):
    return a.var(), a.var(1), a.std(0), torch.var(a, dim=1, unbiased=False), a.std(correction=0)


@T.case(rn(4, 5))
def var_mean_std_mean(a):
    v, m = torch.var_mean(a, dim=1)
    s, m2 = torch.std_mean(a, dim=0, keepdim=True)
    return v, m, s, m2


@T.case(rn(3, 4))
def norms(a):
    return a.norm(), a.norm(dim=1), torch.linalg.vector_norm(a, ord=1, dim=0), a.norm(p=float("inf"))


@T.case(rn(3, 4))
def logsumexp(a):
    return a.logsumexp(1), torch.logsumexp(a, dim=(0, 1))


@T.case(rn(3, 4))
def cumsum_cumprod(a):
    return a.cumsum(1), torch.cumsum(a, dim=0), a.cumprod(1), torch.cummax(a, 1).values


@T.case(rn(3, 5))
def softmax_family(a):
    return a.softmax(-1), torch.log_softmax(a, dim=1), F.softmax(a, dim=0), F.log_softmax(a, -1)


@T.case(rn(3, 5), rn(3, 5))
def manual_softmax(a, b):
    x = a + b
    x = x - x.amax(-1, keepdim=True)
    e = x.exp()
    return e / e.sum(-1, keepdim=True)


@T.case(rb(3, 4))
def any_all(a):
    return a.any(), a.all(), a.any(1), torch.all(a, dim=0)


@T.case(rn(3, 4))
def count_nonzero_and_bool_sum(a):
    return torch.count_nonzero(a > 0), (a > 0).sum(1), (a > 0).float().mean()


@T.case(rn(4, 6))
def sort_and_topk(a):
    s, i = a.sort(1)
    t = a.topk(2, dim=1)
    return s, i, t.values, t.indices, torch.argsort(a, dim=0, descending=True)


@T.case(rn(5, 3))
def median_and_kthvalue(a):
    return a.median(0).values, torch.kthvalue(a, 2, dim=0).values


@T.case(rn(3, 4), rn(3, 4))
def dist_and_cosine(a, b):
    return torch.dist(a, b), F.cosine_similarity(a, b, dim=1), F.pairwise_distance(a, b)


@T.case(rn(2, 3, 4))
def reductions_after_views(a):
    return a.permute(2, 0, 1).sum(0), a.transpose(0, 1).mean(-1), a.flatten(1).amax(1)


@T.case(rn(4, 5))
def normalize_by_stats(a):
    m = a.mean(1, keepdim=True)
    s = a.std(1, keepdim=True)
    return (a - m) / (s + 1e-5)


@T.case(rn(3, 5))
def aminmax(a):
    r = torch.aminmax(a, dim=1)
    return r.min, r.max


@T.case(rg(3, 5), grad=True)
def reduction_with_grad(a):
    return a.softmax(-1).sum(0), a.norm(dim=1), a.amax(1)


@T.case(rn(6, 5))
def sum_to_size_and_mean_nonempty(a):
    return a.sum_to_size(1, 5), a.nanmean(0), torch.nansum(a, 1)
