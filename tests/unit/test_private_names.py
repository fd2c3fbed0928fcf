"""Every private torch name xcompile's code reads exists on the running torch (issue #30).

The names are found in the source, not listed by hand: every ``import torch._x``, ``from
torch._x import y`` and attribute chain ``torch.a._b.c`` in ``python/xcompile`` (the parsed
code; strings and comments are not names). Each must resolve on this torch, so a torch that
moves one fails here, naming the symbol and the file that reads it, instead of in some user's
call. The names a version lacks on purpose are read only through ``_torch_compat`` (or
``getattr`` with a default) and are listed in ``OPTIONAL`` with the versions that lack them.

The matrix (``make test-matrix``) runs this file on every torch of the range.
"""
from __future__ import annotations

import ast
import importlib
import os

import pytest
import torch

PACKAGE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                       "python", "xcompile")

# name -> why some torch in the range lacks it (read with getattr/hasattr, or per version in
# _torch_compat): these may be missing; every other private name must resolve.
OPTIONAL = {
    "torch.fx._symbolic_trace._is_fx_tracing_flag": "gone in 2.14: read only on older torches (_torch_compat)",
}


def _is_private(dotted: str) -> bool:
    return any(p.startswith("_") and not (p.startswith("__") and p.endswith("__")) for p in dotted.split("."))


def _chain(node: ast.AST, aliases: dict[str, str]) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name) and node.id in aliases:
        return ".".join([aliases[node.id]] + parts[::-1])
    return None


def _aliases(tree: ast.Module) -> dict[str, str]:
    """{local name: the torch name it stands for} of a file's module-level imports."""
    aliases = {"torch": "torch"}
    for node in tree.body:
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("torch.") and a.asname:
                    aliases[a.asname] = a.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and \
                node.module.startswith("torch"):
            for a in node.names:
                aliases[a.asname or a.name] = f"{node.module}.{a.name}"
    return aliases


def private_names() -> dict[str, str]:
    """{dotted private torch name: the first file (relative) that reads it}."""
    found: dict[str, str] = {}
    for root, _dirs, files in os.walk(PACKAGE):
        for fname in files:
            if not fname.endswith(".py"):
                continue
            path = os.path.join(root, fname)
            rel = os.path.relpath(path, PACKAGE)
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read(), path)
            aliases = _aliases(tree)
            for node in ast.walk(tree):
                names = []
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names if a.name.startswith("torch.")]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and \
                        (node.module == "torch" or node.module.startswith("torch.")):
                    names = [f"{node.module}.{a.name}" for a in node.names if a.name != "*"]
                elif isinstance(node, ast.Attribute) and not isinstance(getattr(node, "_xc_parent", None),
                                                                         ast.Attribute):
                    chain = _chain(node, aliases)
                    if chain:
                        names = [chain]
                elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                        node.func.id == "getattr" and len(node.args) == 2 and \
                        isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str):
                    chain = _chain(node.args[0], aliases) if not isinstance(node.args[0], ast.Name) \
                        else aliases.get(node.args[0].id)
                    if chain:                       # getattr(x, "name") with no default: required
                        names = [f"{chain}.{node.args[1].value}"]
                for child in ast.iter_child_nodes(node):
                    child._xc_parent = node  # type: ignore[attr-defined]
                for n in names:
                    if _is_private(n):
                        found.setdefault(n, rel)
    return found


def resolve(dotted: str) -> object:
    """The object ``dotted`` names: the longest importable module prefix, then attributes."""
    parts = dotted.split(".")
    obj, k = None, len(parts)
    while k > 0:
        try:
            obj = importlib.import_module(".".join(parts[:k]))
            break
        except ImportError:
            k -= 1
    if obj is None:
        raise ImportError(dotted)
    for p in parts[k:]:
        obj = getattr(obj, p)
    return obj


NAMES = private_names()


def test_the_scan_finds_the_names_xcompile_is_known_to_read():
    # a scan that finds nothing passes everything: it must see names we know are read
    for expected in ("torch._subclasses.fake_tensor", "torch._C._set_grad_enabled", "torch._ops.OpOverload",
                     "torch.fx._symbolic_trace"):
        assert any(n == expected or n.startswith(expected + ".") for n in NAMES), expected
    assert len(NAMES) > 100, len(NAMES)


def test_a_missing_name_is_reported():
    with pytest.raises((ImportError, AttributeError)):
        resolve("torch._C._no_such_name_xcompile_reads")


def test_every_private_name_resolves_on_this_torch():
    missing = []
    for name, where in sorted(NAMES.items()):
        try:
            resolve(name)
        except (ImportError, AttributeError) as e:
            if name not in OPTIONAL:
                missing.append(f"{name} (read in {where}): {type(e).__name__}: {e}")
    assert not missing, f"torch {torch.__version__} lacks private names xcompile reads:\n" + "\n".join(missing)


def test_optional_names_are_still_read():
    # an OPTIONAL entry nobody reads any more is a stale excuse
    stale = [n for n in OPTIONAL if n not in NAMES]
    assert not stale, stale
