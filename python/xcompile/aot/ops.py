"""Which ATen ops the partitioner may recompute in the backward, and why not.

One table, read top to bottom; the first rule that matches decides. A new op is a
new row. ``recompute_policy(node)`` returns ``(may_recompute, reason)``.
"""
from __future__ import annotations

import operator

import torch
import torch.fx
from torch.utils.checkpoint import CheckpointPolicy

aten = torch.ops.aten

# Expensive: never recomputed (the whole point of saving activations).
COMPUTE_INTENSIVE = frozenset({
    "mm", "bmm", "addmm", "baddbmm", "addbmm", "addmv", "mv", "dot", "vdot", "matmul", "_int_mm",
    "_scaled_mm", "convolution", "convolution_backward", "_convolution", "cudnn_convolution",
    "mkldnn_convolution", "_slow_conv2d_forward", "slow_conv3d_forward", "conv_depthwise2d",
    "_flash_attention_forward", "_efficient_attention_forward", "upsample_bilinear2d",
    "_cdist_forward", "cumsum", "cumprod", "sort", "topk", "kthvalue", "median",
})
COMPUTE_INTENSIVE_PREFIXES = ("_scaled_dot_product", "linalg_", "_linalg_", "cudnn_", "miopen_", "mkldnn_")

# Cheap ops that are neither pointwise- nor reduction-tagged but are fine to redo.
CHEAP = frozenset({
    "native_layer_norm", "_native_batch_norm_legit_functional", "_native_batch_norm_legit_no_training",
    "native_group_norm", "_softmax", "_log_softmax", "logsumexp", "var", "var_mean", "std", "std_mean",
    "_to_copy", "clone", "copy", "cat", "stack", "full", "full_like", "zeros", "zeros_like", "ones",
    "ones_like", "empty", "empty_like", "empty_strided", "scalar_tensor", "arange", "iota", "new_zeros",
    "new_ones", "new_empty", "new_full", "lift_fresh_copy", "_unsafe_view", "reshape", "index",
    "gather", "index_select", "embedding", "constant_pad_nd", "triu", "tril", "sum_to_size",
    "_grad_sum_to_size", "masked_fill", "repeat", "flip", "roll", "argmax", "argmin",
    "max", "min", "amax", "amin", "sum", "mean", "prod", "any", "all",
})

_SEEDED = torch.Tag.nondeterministic_seeded
_POINTWISE = torch.Tag.pointwise
_REDUCTION = torch.Tag.reduction


def op_name(node: torch.fx.Node) -> str:
    target = node.target
    if isinstance(target, torch._ops.OpOverload):
        return target._schema.name.split("::")[-1]
    return getattr(target, "__name__", str(target))


def is_view(node: torch.fx.Node) -> bool:
    target = node.target
    return node.op == "call_function" and isinstance(target, torch._ops.OpOverload) and target.is_view


def aliases_input(node: torch.fx.Node) -> bool:
    """A view, or an element of a multi-view op (split, unbind, chunk): shares its input's storage."""
    if is_view(node):
        return True
    return (node.op == "call_function" and node.target is operator.getitem
            and isinstance(node.args[0], torch.fx.Node) and is_view(node.args[0]))


def is_random(node: torch.fx.Node) -> bool:
    target = node.target
    return isinstance(target, torch._ops.OpOverload) and _SEEDED in target.tags


def is_compute_intensive(node: torch.fx.Node) -> bool:
    if not isinstance(node.target, torch._ops.OpOverload):
        return False
    name = op_name(node)
    return name in COMPUTE_INTENSIVE or name.startswith(COMPUTE_INTENSIVE_PREFIXES)


_EQUALITY = frozenset({"eq", "ne"})


def _compared_for_equality(node: torch.fx.Node) -> bool:
    """Is ``node``'s value (directly or through views) an operand of eq/ne? The backward of
    max/amax/min masks ``x == reduce(x)``: if x were recomputed by other code than the value
    the reduction saw, the mask could select nothing (a 0 count, inf/NaN grads)."""
    todo, seen = list(node.users), set()
    while todo:
        u = todo.pop()
        if u in seen or u.op != "call_function" or not isinstance(u.target, torch._ops.OpOverload):
            continue
        seen.add(u)
        if op_name(u) in _EQUALITY:
            return True
        if u.target.is_view:
            todo.extend(u.users)
    return False


def checkpointed(node: torch.fx.Node) -> bool:
    """``node`` comes from a ``torch.utils.checkpoint`` region (frontend/tracing_rules.py)."""
    return node.meta.get("recompute") in (CheckpointPolicy.PREFER_RECOMPUTE, CheckpointPolicy.MUST_RECOMPUTE)


def recompute_policy(node: torch.fx.Node) -> tuple[bool, str]:
    """May ``node`` be recomputed in the backward? Always with the reason. Inside a checkpointed
    region every op may (as eager's checkpoint reruns them), except random ops, mutations and
    values compared for equality, which are saved as outside one."""
    if node.op == "placeholder":
        return False, "graph input"
    if node.op != "call_function":
        return False, f"{node.op} node"
    target = node.target
    if target is operator.getitem:
        return True, "tuple element"
    if not isinstance(target, torch._ops.OpOverload):
        return False, f"non-ATen call {op_name(node)}"
    if _SEEDED in target.tags:
        return False, "random op (its RNG state is not replayed)"
    if checkpointed(node) and not target._schema.is_mutable and not _compared_for_equality(node):
        return True, "in a checkpointed region"
    if is_compute_intensive(node):
        return False, "compute intensive"
    if target._schema.is_mutable:
        return False, "mutates its inputs"
    if target.is_view:
        return True, "view"
    if _compared_for_equality(node):
        return False, "compared with eq/ne (a recomputation in another kernel may differ in the last bit)"
    if _POINTWISE in target.tags:
        return True, "pointwise"
    if _REDUCTION in target.tags:
        return True, "reduction"
    if op_name(node) in CHEAP:
        return True, "cheap op"
    return False, "not in the recompute allowlist"
