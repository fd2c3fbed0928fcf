"""How the house stands (issue #10): imports written inside functions, import cycles, long files.

    python tools/house_counts.py           # the counts, the worst files and every cycle
    python tools/house_counts.py --short   # one line
    python tools/house_counts.py --check   # one line; exit status 1 if a module-level import cycle
                                           # exists (make lint runs this)

Counted over python/xcompile with the ast module: an import of an xcompile module inside a
function body; the strongly connected components of the module import graph, once with
module-level imports only (cycles Python must resolve at import time) and once with the imports
inside functions too (the circles those imports hold shut); files over 600 lines.
"""
from __future__ import annotations

import ast
import collections
import os
import sys

ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python", "xcompile")
PKG = "xcompile"


def _module_name(path: str) -> str:
    rel = os.path.relpath(path, os.path.dirname(ROOT))[:-3].replace(os.sep, ".")
    return rel[: -len(".__init__")] if rel.endswith(".__init__") else rel


def _sources() -> dict[str, str]:
    out = {}
    for dirpath, _, files in os.walk(ROOT):
        for f in sorted(files):
            if f.endswith(".py"):
                out[os.path.join(dirpath, f)] = _module_name(os.path.join(dirpath, f))
    return out


class _Imports(ast.NodeVisitor):
    """Targets of the xcompile imports in one module: (target, inside a function)."""

    def __init__(self, module: str, is_package: bool, modules: set[str]):
        self.module, self.is_package, self.modules = module, is_package, modules
        self.depth = 0
        self.found: list[tuple[str, bool]] = []
        self.statements_in_functions = 0     # import statements inside functions naming xcompile

    def visit_FunctionDef(self, node):
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_If(self, node):
        if isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            return                                      # not imported at run time
        self.generic_visit(node)

    def visit_Import(self, node):
        n = len(self.found)
        for a in node.names:
            self._add(a.name)
        self._count(n)

    def visit_ImportFrom(self, node):
        base = node.module or ""
        if node.level:
            parts = self.module.split(".") if self.is_package else self.module.split(".")[:-1]
            parts = parts[: len(parts) - (node.level - 1)]
            base = ".".join(parts + ([node.module] if node.module else []))
        n = len(self.found)
        for a in node.names:
            full = f"{base}.{a.name}"
            self._add(full if full in self.modules else base)
        self._count(n)

    def _count(self, before: int) -> None:
        if self.depth and len(self.found) > before:
            self.statements_in_functions += 1

    def _add(self, target: str) -> None:
        if target.startswith(PKG) and target != self.module:
            self.found.append((target, self.depth > 0))


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10_000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def counts() -> dict:
    sources = _sources()
    # the extension (_C, typed by _C.pyi) is a module too: `from . import _C` does not import the package
    modules = set(sources.values()) | {f"{PKG}._C"}
    in_functions: collections.Counter = collections.Counter()
    top: dict[str, set[str]] = {m: set() for m in modules}
    every: dict[str, set[str]] = {m: set() for m in modules}
    lines = {}
    for path, module in sources.items():
        with open(path) as f:
            text = f.read()
        lines[os.path.relpath(path, os.path.dirname(os.path.dirname(ROOT)))] = text.count("\n")
        v = _Imports(module, path.endswith("__init__.py"), modules)
        v.visit(ast.parse(text))
        for target, inside in v.found:
            if target not in modules:
                continue
            every[module].add(target)
            if not inside:
                top[module].add(target)
        if v.statements_in_functions:
            in_functions[module] = v.statements_in_functions
    return {"in_functions": in_functions, "top_cycles": _cycles(top), "all_cycles": _cycles(every),
            "lines": lines}


def main() -> None:
    c = counts()
    long_files = sorted(((n, p) for p, n in c["lines"].items() if n > 600), reverse=True)
    longest = max(c["lines"].items(), key=lambda x: x[1])
    summary = (f"house: {sum(c['in_functions'].values())} import statements inside functions, "
               f"{len(c['top_cycles'])} module-level import cycles "
               f"(largest {max((len(x) for x in c['top_cycles']), default=0)} modules), "
               f"{len(c['all_cycles'])} cycles counting function imports "
               f"(largest {max((len(x) for x in c['all_cycles']), default=0)}), "
               f"{len(long_files)} files over 600 lines (longest {longest[0]}, {longest[1]})")
    print(summary)
    if "--check" in sys.argv and c["top_cycles"]:
        for comp in c["top_cycles"]:
            print("module-level import cycle: " + " -> ".join(comp), file=sys.stderr)
        sys.exit(1)
    if "--short" in sys.argv or "--check" in sys.argv:
        return
    print("\nimports inside functions, by module:")
    for m, n in c["in_functions"].most_common():
        print(f"  {n:4d}  {m}")
    for title, cycles in (("module-level import cycles", c["top_cycles"]),
                          ("cycles counting imports inside functions", c["all_cycles"])):
        print(f"\n{title}:")
        for comp in cycles:
            print(f"  {len(comp):3d}: " + ", ".join(m.removeprefix(PKG + ".") for m in comp))
    print("\nfiles over 600 lines:")
    for n, p in long_files:
        print(f"  {n:5d}  {p}")


if __name__ == "__main__":
    main()
