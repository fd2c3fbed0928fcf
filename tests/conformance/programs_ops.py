"""Tensor-level ops: where/cat/stack/einsum/matmul/bmm/linear algebra, and F.* activations,
losses and functional layers."""
import torch
import torch.nn.functional as F

from .harness import CaseTable, rb, rg, ri, rn, rp

T = CaseTable("ops")


@T.case(rb(3, 4), rn(3, 4), rn(3, 4))
def where_tensors(c, a, b):
    return torch.where(c, a, b), a.where(c, b)


@T.case(rn(3, 4))
def where_scalars(a):
    return torch.where(a > 0, a, 0.0), torch.where(a < 0, 1.0, -1.0)


@T.case(rn(2, 3), rn(4, 3))
def cat_dims(a, b):
    return torch.cat([a, b]), torch.cat((a, b), dim=0) * 2, torch.cat([a.t(), b.t()], dim=1)


@T.case(rn(2, 3), rn(2, 3), rn(2, 3))
def stack_variants(a, b, c):
    return torch.stack([a, b, c]), torch.stack((a, b), dim=-1), torch.hstack([a, b]), torch.vstack([a, c])


@T.case([rn(2), rn(2), rn(2), rn(2)])
def cat_list_input(xs):
    return torch.cat(xs), torch.stack(xs, 1)


@T.case(rn(3, 4), rn(4, 5))
def matmul_2d(a, b):
    return a @ b, torch.matmul(a, b), a.mm(b), torch.mm(a, b)


@T.case(rn(2, 3, 4), rn(2, 4, 5))
def bmm_and_batched_matmul(a, b):
    return torch.bmm(a, b), a @ b, a.matmul(b[0])


@T.case(rn(4), rn(4), rn(3, 4))
def vector_products(u, v, m):
    return u @ v, torch.dot(u, v), m @ v, torch.mv(m, v), torch.outer(u, v), torch.inner(u, v)


@T.case(rn(2, 3), rn(3, 4), rn(2, 4))
def addmm_baddbmm(a, b, c):
    return torch.addmm(c, a, b), torch.baddbmm(c[None], a[None], b[None], beta=0.5, alpha=2.0)


@T.case(rn(2, 3, 4), rn(4, 5))
def einsum_contractions(a, b):
    return (torch.einsum("bij,jk->bik", a, b), torch.einsum("bij->j", a),
            torch.einsum("ij,ij->i", a[0], a[1]), torch.einsum("bii->b", a[:, :3, :3]))


@T.case(rn(3, 4), rn(3, 4))
def einsum_outer_and_trace(a, b):
    return torch.einsum("i,j->ij", a[0], b[0]), torch.einsum("ii", a[:, :3]), torch.einsum(a[0], [0], [])


@T.case(rn(4, 4))
def linalg_basics(a):
    m = a @ a.t() + 4 * torch.eye(4)
    return torch.trace(m), torch.linalg.norm(m), m.tril().sum()


@T.case(rn(3, 4))
def activations_basic(a):
    return F.relu(a), F.gelu(a), F.silu(a), torch.sigmoid(a), torch.tanh(a), F.leaky_relu(a, 0.1)


@T.case(rn(3, 4))
def activations_more(a):
    return (F.elu(a), F.selu(a), F.softplus(a), F.mish(a), F.hardtanh(a), F.hardswish(a),
            F.gelu(a, approximate="tanh"), F.relu6(a * 4), F.softsign(a), F.logsigmoid(a))


@T.case(rn(3, 4))
def glu_and_prelu(a):
    return F.glu(a, dim=-1), F.prelu(a, torch.tensor([0.25]))


@T.case(rn(3, 6))
def normalize_and_layer_norm(a):
    w = torch.ones(6) * 2
    return F.normalize(a, dim=1), F.layer_norm(a, (6,), w, None), F.rms_norm(a, (6,))


@T.case(rn(4, 5), ri(4, high=5))
def cross_entropy_and_nll(logits, target):
    return (F.cross_entropy(logits, target), F.nll_loss(F.log_softmax(logits, 1), target),
            F.cross_entropy(logits, target, reduction="none", label_smoothing=0.1))


@T.case(rn(4, 5), rn(4, 5))
def regression_losses(a, b):
    return F.mse_loss(a, b), F.l1_loss(a, b), F.smooth_l1_loss(a, b), F.huber_loss(a, b, delta=0.5)


@T.case(rn(4, 5), rn(4, 5))
def bce_with_logits(a, b):
    p, q = torch.sigmoid(a), torch.sigmoid(b)
    return F.binary_cross_entropy_with_logits(a, q), F.binary_cross_entropy(p, q)


@T.case(rn(2, 3, 8, 8), rn(4, 3, 3, 3), rtol=1e-4, atol=1e-5)
def functional_conv_and_pool(x, w):
    y = F.conv2d(x, w, padding=1)
    return F.max_pool2d(y, 2), F.avg_pool2d(y, 2), F.adaptive_avg_pool2d(y, 1)


@T.case(rn(2, 3, 4, 4))
def pad_and_interpolate(x):
    return (F.pad(x, (1, 1, 2, 0)), F.pad(x, (1, 1), value=3.0),
            F.interpolate(x, scale_factor=2, mode="nearest"))


@T.case(ri(5, high=4))
def one_hot_and_embedding(ids):
    w = torch.arange(12, dtype=torch.float32).reshape(4, 3)
    return F.one_hot(ids, 4), F.embedding(ids, w)


@T.case(rn(3, 4), rn(3, 4))
def dropout_disabled(a, b):
    return F.dropout(a, p=0.5, training=False) + b, F.dropout(b, p=0.0)


@T.case(rg(3, 4), rg(4, 2), grad=True)
def activations_and_matmul_with_grad(a, w):
    return F.gelu(a @ w).sum(0), F.silu(a).mean()


@T.case(rn(3, 4))
def clone_and_detach(a):
    return a.clone(), a.detach(), torch.clone(a).contiguous(memory_format=torch.contiguous_format)


@T.case(rn(4, 3), rn(3))
def tensor_methods_mix(a, b):
    return a.mv(b).relu().unsqueeze(1) * a, torch.addmv(torch.ones(3), a.t(), torch.ones(4))


@T.case(rp(3, 4), rp(3, 4))
def elementwise_binary_special(a, b):
    return (torch.atan2(a, b), torch.hypot(a, b), torch.xlogy(a, b), torch.logaddexp(a, b),
            torch.copysign(a, -b))


@T.case(rn(2, 3), rn(2, 3))
def complex_views(a, b):
    z = torch.complex(a, b)
    return torch.view_as_real(z * z), z.abs(), z.angle()


@T.case(rn(3, 4))
def tensor_constructors_from_python(a):
    t = torch.tensor([1.0, 2.0, 3.0, 4.0])
    s = torch.tensor(2.0)
    return a * t + s, torch.as_tensor([[1, 2, 3, 4]]) + a.int()


@T.case(rn(5, 5))
def triangular_masking_attention_style(a):
    mask = torch.ones(5, 5, dtype=torch.bool).tril()
    return a.masked_fill(~mask, float("-inf")).softmax(-1)
