"""Python/torch-level graph -> functional ATen graph with the decompositions we want.

``trace_aten(fn, inputs)`` runs ``make_fx`` on fake tensors with our decomposition table
(softmax, layer_norm, RMSNorm, group/batch norm, split, ... become the pointwise ops and
reductions the lowering table knows), then functionalizes if any op still mutates.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Sequence, cast

import torch
import torch.fx
from torch._decomp import decompositions as tdec
from torch._decomp import get_decompositions
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND, elementwise_dtypes
from torch.fx.experimental.proxy_tensor import make_fx

if TYPE_CHECKING:
    from torch._ops import OpOverload

aten = torch.ops.aten

_DECOMPOSE = [
    aten._softmax, aten._log_softmax, aten.native_layer_norm, aten.native_group_norm,
    aten._native_batch_norm_legit_no_training, aten._native_batch_norm_legit_functional,
    aten._native_batch_norm_legit, aten.native_batch_norm,
    aten.stack, aten.narrow,
    aten.logsumexp, aten.linalg_vector_norm, aten.log_sigmoid_forward, aten.mse_loss,
    aten.glu, aten.tril, aten.triu, aten.expand_as, aten.rsub, aten.squeeze_copy, aten.unsqueeze_copy,
    aten.nll_loss_forward, aten.masked_fill_, aten.addmv, aten.hardswish_, aten.silu_,
    aten.flip, aten.roll, aten.diagonal, aten.huber_loss, aten.smooth_l1_loss,
    aten.binary_cross_entropy, aten.binary_cross_entropy_with_logits,
    # backward ops (autograd records them above the decomposition: training graphs meet them):
    # the norms' become reductions and pointwise ops that fuse (the activations' backward ops
    # are rows of the lowering table: pointwise, laid out as eager lays them out)
    aten.native_layer_norm_backward, aten.native_group_norm_backward, aten.native_batch_norm_backward,
    aten._softmax_backward_data, aten._log_softmax_backward_data, aten.select_backward, aten.slice_backward,
]
if hasattr(aten, "_fused_rms_norm"):
    _DECOMPOSE.append(aten._fused_rms_norm)
if hasattr(aten, "rms_norm"):
    _DECOMPOSE.append(aten.rms_norm)

# (keyed by OpOverload: get_decompositions expands each packet into its overloads)
DECOMPOSITIONS = cast("dict[OpOverload, Callable]", get_decompositions(_DECOMPOSE))


def _softmax(x: torch.Tensor, dim: int, half_to_float: bool) -> torch.Tensor:
    """torch's decomposition (a contiguous result, as eager's), but scaled by 1/sum as eager's
    kernel does: one division per row, not per element."""
    x = x.contiguous()
    computation_dtype, result_dtype = elementwise_dtypes(
        x, type_promotion_kind=ELEMENTWISE_TYPE_PROMOTION_KIND.DEFAULT)
    x = x.to(computation_dtype)
    amax = getattr(tdec, "_softmax_unbacked_safe_amax", None)
    x_max = amax(x, dim) if amax is not None else torch.amax(x, dim, keepdim=True)
    unnormalized = torch.exp(x - x_max)
    result = unnormalized * torch.reciprocal(torch.sum(unnormalized, dim, keepdim=True))
    return result if half_to_float else result.to(result_dtype)


DECOMPOSITIONS[aten._softmax.default] = _softmax


def _pow_scalar_base(base, exp):
    """``base ** exp`` is contiguous in eager whatever the exponent's layout (its meta function
    sets no strides; the fake kernel follows the exponent): a 0-d base, then a contiguous result."""
    dtype = torch.result_type(base, exp)     # the base as a 0-d tensor of the result dtype: promotes as the scalar
    if dtype in (torch.float16, torch.bfloat16) and exp.dim():
        dtype = torch.float32                 # keep the base at float32 (eager computes in float32)
    out = aten.pow.Tensor_Tensor(torch.scalar_tensor(base, dtype=dtype), exp)
    return out.contiguous()


DECOMPOSITIONS[aten.pow.Scalar] = _pow_scalar_base


# -- signed zeros in the normalizations ------------------------------------------------------------
#
# torch's decompositions compute ``(x - mean) * rstd [* weight] [+ bias]``, adding the bias only
# when there is one.  Eager's CPU kernels always end with an addition:
#   layer_norm  (x - mean) * rstd * gamma + beta, beta = 0 without a bias
#   batch_norm  x * alpha + beta, beta = bias - mean * alpha, bias = 0 without one (eval and train)
#   group_norm  x * scale + bias, bias = -scale * mean + beta once there is a weight (beta = 0
#               without one); without weight and bias it is x * rstd - rstd * mean
# and ``-0.0 + 0.0`` is ``+0.0``: a zero result (x == mean) is always +0.0 in eager where the
# decomposition gives -0.0 (and then ``atan2(y, -1)`` is -pi instead of pi).  So the output gets
# the same ``+ 0.0`` here; it fuses into the last pointwise kernel for free.  CPU only: CUDA's
# eager kernels differ by path (some omit the addition), and were not checked.

def _plus_zero_without_bias(decomp, bias_pos: int, weight_pos: int | None = None):
    """``decomp`` with ``+ 0.0`` on its first output when its bias (argument ``bias_pos``) is
    None (and, with ``weight_pos``, only when that weight is given)."""
    def arg(args, kwargs, pos, name):
        return args[pos] if len(args) > pos else kwargs.get(name)

    def run(*args, **kwargs):
        out = decomp(*args, **kwargs)
        x = args[0]
        if arg(args, kwargs, bias_pos, "bias") is not None or x.device.type != "cpu" or \
                not out[0].dtype.is_floating_point:
            return out
        if weight_pos is not None and arg(args, kwargs, weight_pos, "weight") is None:
            return out
        return (out[0] + 0.0, *out[1:])
    return run


for _op, _pos in ((aten.native_layer_norm.default, (3,)), (aten.native_group_norm.default, (2, 1)),
                  (aten._native_batch_norm_legit_no_training.default, (2,)),
                  (aten._native_batch_norm_legit_functional.default, (2,)),
                  (aten._native_batch_norm_legit.default, (2,)), (aten._native_batch_norm_legit.no_stats, (2,)),
                  (aten.native_batch_norm.default, (2,))):
    if _op in DECOMPOSITIONS:
        DECOMPOSITIONS[_op] = _plus_zero_without_bias(DECOMPOSITIONS[_op], *_pos)


def _mutates(gm: torch.fx.GraphModule) -> bool:
    for n in gm.graph.nodes:
        if n.op == "call_function":
            schema = getattr(n.target, "_schema", None)
            if schema is not None and schema.is_mutable:
                return True
    return False


def trace_aten(fn: Callable, inputs: Sequence, decompositions: dict | None = None) -> torch.fx.GraphModule:
    """A functional ATen graph of ``fn(*inputs)`` with fake-tensor metadata on every node."""
    table = DECOMPOSITIONS if decompositions is None else decompositions
    gm = make_fx(fn, decomposition_table=table, tracing_mode="fake")(*inputs)
    if _mutates(gm):
        # Decompositions may introduce in-place ops on temporaries (e.g. RMSNorm's add_), so
        # functionalize after decomposing rather than before.
        gm = make_fx(torch.func.functionalize(gm, remove="mutations"), tracing_mode="fake")(*inputs)
    gm.graph.eliminate_dead_code()
    gm.recompile()
    return gm
