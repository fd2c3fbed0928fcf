"""Which saved tensors a backward really reads, given which outputs got gradients.

A compiled graph is one autograd node for all its outputs, where eager has one node per op.
When the user writes in place to a tensor the graph saved (``v2[0] += 1`` after a graph break,
where the graph had also computed ``v5 = v2 * v2``) and the loss does not depend on the
outputs whose gradients need it (``v5`` was reassigned), eager never runs the node that saved
it; the compiled node must not refuse to run either. It may run with the written value, since
every term of the backward that reads it is multiplied by the tangent of an unused output
(zeros). If the loss does depend on such an output, eager raises autograd's "modified by an
inplace operation" error, and so do we.

The backward is linear in the tangents. ``saved_needed`` follows, node by node, the terms
each value is a sum of: a term records whether it reads the saved tensor and which tangents
multiply it. Linear ops (add, sum, views, copies...) keep the terms apart; any other op
multiplies its inputs' terms (nonlinear in an input: that input's terms merge first). A saved
tensor is needed when a term of a backward output reads it and carries a tangent that is live.
"""
from __future__ import annotations

import itertools

import torch

Term = tuple[bool, frozenset]          # (reads the saved tensor, tangents multiplying it)
_MAX_TERMS = 64

# ops linear in every tensor argument with no products between them
_LINEAR = {
    "add", "sub", "neg", "sum", "mean", "clone", "contiguous", "view", "_unsafe_view", "reshape",
    "expand", "permute", "transpose", "t", "squeeze", "unsqueeze", "slice", "select", "narrow",
    "cat", "stack", "alias", "_to_copy", "to", "copy", "slice_scatter", "select_scatter",
    "as_strided", "as_strided_scatter", "diagonal", "unfold", "split", "split_with_sizes",
    "unbind", "chunk", "detach", "zeros_like", "new_zeros", "sum_to_size", "flatten",
    "slice_backward", "select_backward", "expand_backward", "as_strided_backward",
    "diagonal_backward", "unfold_backward", "index_select_backward", "squeeze_backward",
}
# ops linear in their first argument (a gradient), nonlinear in the others (saved values)
_FIRST_LINEAR = {
    "div", "threshold_backward", "sigmoid_backward", "tanh_backward", "gelu_backward",
    "silu_backward", "hardtanh_backward", "leaky_relu_backward", "elu_backward",
    "softplus_backward", "hardsigmoid_backward", "hardswish_backward", "mish_backward",
    "_softmax_backward_data", "_log_softmax_backward_data", "masked_fill", "where_backward",
}


def _name(n: torch.fx.Node) -> str:
    t = n.target
    name = getattr(t, "__name__", str(t))
    overload = getattr(t, "_overloadpacket", None)
    if overload is not None:
        name = overload.__name__
    return name.rstrip("_")


def _merge(terms: frozenset) -> frozenset:
    if len(terms) <= 1:
        return terms
    s = any(t[0] for t in terms)
    return frozenset({(s, frozenset().union(*(t[1] for t in terms)))})


def _product(groups: list[frozenset]) -> frozenset:
    out: set[Term] = set()
    for combo in itertools.product(*groups):
        out.add((any(t[0] for t in combo), frozenset().union(*(t[1] for t in combo))))
    return frozenset(out)


def _terms_of(bw_gm: torch.fx.GraphModule, num_saved: int, saved_index: int) -> list[frozenset]:
    """The terms of each backward output, tracking saved tensor ``saved_index``."""
    placeholders = [n for n in bw_gm.graph.nodes if n.op == "placeholder"]
    terms: dict[torch.fx.Node, frozenset] = {}
    for k, n in enumerate(placeholders):
        if k < num_saved:
            terms[n] = frozenset({(k == saved_index, frozenset())})
        else:
            terms[n] = frozenset({(False, frozenset({k - num_saved}))})
    outs: list = []
    for n in bw_gm.graph.nodes:
        if n.op == "output":
            outs = list(n.args[0]) if isinstance(n.args[0], (tuple, list)) else [n.args[0]]
            continue
        if n.op == "placeholder":
            continue
        ins = [terms[a] for a in n.all_input_nodes if a in terms]
        if not ins:
            terms[n] = frozenset({(False, frozenset())})
            continue
        name = _name(n)
        first = n.args[0] if n.args and isinstance(n.args[0], torch.fx.Node) else None
        args = [terms[a] for a in (*n.args, *n.kwargs.values()) if isinstance(a, torch.fx.Node) and a in terms]
        if name in _LINEAR or name == "getitem" or (name in ("mul", "div") and len(args) == 1):
            result = frozenset().union(*ins)        # (times a number)
        elif name in ("mul", "bmm", "mm", "matmul") and len(args) >= 2:
            result = _product(args)                 # x * x multiplies x's terms pairwise
        elif name in _FIRST_LINEAR and first is not None and first in terms:
            others = [terms[a] for a in n.all_input_nodes if a is not first and a in terms]
            result = _product([terms[first], *[_merge(t) for t in others]])
        else:
            result = _product([_merge(t) for t in ins])
        terms[n] = result if len(result) <= _MAX_TERMS else _merge(result)
    return [terms.get(o, frozenset()) if isinstance(o, torch.fx.Node) else frozenset() for o in outs]


def saved_needed(bw_gm: torch.fx.GraphModule, num_saved: int, index: int, live: frozenset) -> bool:
    """Whether saved tensor ``index`` contributes to a gradient when only the tangents in
    ``live`` (positions) are real."""
    for out in _terms_of(bw_gm, num_saved, index):
        for reads, tangents in out:
            if reads and tangents & live:
                return True
    return False
