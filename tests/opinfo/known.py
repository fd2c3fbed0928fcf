"""What the OpInfo harness knows in advance about some ops, each entry with its reason.

``RANDOM``: ops whose eager result is random or undefined memory. Eager run twice disagrees with
itself, so only the structure of the result (types, shapes, dtypes) is compared.

``OTHERS``: ops skipped while someone fixes them, each with the reason (none now).

``NO_GRAPH``: (op, backend) pairs whose frame gives no graph, so the call runs eagerly, with
the reason (the default-run slice requires a graph otherwise).

``STRIDES``: ops whose compiled output has other strides than eager's for a reason outside
xcompile, with the reason; their values, shapes and dtypes are still compared.

``GRAD_TOL``: float32 gradient tolerances (rtol, atol) looser than the harness's, with the reason.

``FALLBACK``: ops xcompile runs eagerly on purpose, with the reason. The harness still compares
them with eager (a fallback must agree exactly). Empty: every op either agrees or is listed by
``run.py`` as failing. A failing op may never be hidden here without the fallback being real.
"""
from __future__ import annotations

_EMPTY = "returns uninitialized memory"
_RNG = "draws from the random generator (a compiled kernel draws other numbers than eager)"

RANDOM: dict[str, str] = {
    "bernoulli": _RNG,
    "cauchy": _RNG,
    "exponential": _RNG,
    "geometric": _RNG,
    "log_normal": _RNG,
    "multinomial": _RNG,
    "normal": _RNG,
    "normal.in_place": _RNG,
    "normal.number_mean": _RNG,
    "uniform": _RNG,
    "rand_like": _RNG,
    "randn_like": _RNG,
    "randint_like": _RNG,
    "randint": _RNG,
    "randn": _RNG,
    "nn.functional.dropout": _RNG,
    "nn.functional.dropout2d": _RNG,
    "nn.functional.dropout3d": _RNG,
    "nn.functional.alpha_dropout": _RNG,
    "nn.functional.feature_alpha_dropout.with_train": _RNG,
    "empty": _EMPTY,
    "empty_like": _EMPTY,
    "empty_permuted": _EMPTY,
    "empty_strided": _EMPTY,
    "new_empty": _EMPTY,
    "new_empty_strided": _EMPTY,
    "torch.ops.aten._efficient_attention_forward": _RNG,
}

# (empty: the five ops once fixed in parallel, multi_head_attention_forward, rrelu,
# fractional_max_pool3d, fft.ifft and fft.ihfft, are fixed; tests/kernels/test_opinfo_regressions.py)
OTHERS: dict[str, str] = {}

FALLBACK: dict[str, str] = {}

NO_GRAPH: dict[tuple[str, str], str] = {
    ("narrow_copy", "inductor-dynamic"):
        "torch's meta for narrow_copy calls storage_offset(), which a tensor of symbolic sizes refuses: "
        "the op is a graph break (its fake kernel fails where eager runs) and runs eagerly",
}

_LN_ONE = ("a layer norm over one element: the exact gradient is 0; eager's kernel leaves rounding noise "
           "(x - mean is not exactly 0 in its vectorized mean, ~1e-4), the compiled one gives 0")
GRAD_TOL: dict[str, tuple[float, float]] = {
    "nn.functional.layer_norm": (1e-5, 5e-4),
    "native_layer_norm": (1e-5, 5e-4),
}
GRAD_TOL_REASONS: dict[str, str] = {"nn.functional.layer_norm": _LN_ONE, "native_layer_norm": _LN_ONE}

STRIDES: dict[str, str] = {
    name: "torch's fake (meta) kernel gives a contiguous result for a channels-last input where the CPU kernel "
          "keeps channels-last; the kernel generator plans the fake's layout and restrides the extern's "
          "result into it (kernels/wrapper.py _restride_lines), as torch.compile plans from the fake kernel"
    for name in ("nn.functional.max_unpool1d", "nn.functional.max_unpool2d", "nn.functional.max_unpool3d",
                 "nn.functional.max_unpool1d.grad", "nn.functional.max_unpool2d.grad",
                 "nn.functional.max_unpool3d.grad")
}
