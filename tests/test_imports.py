"""No import cycles among the modules of the checkout (issue 30, item 4), deferred imports included.

Every ``import`` and ``from ... import`` statement of every module under ``isparse/``, ``pipeline/`` and
``hydra_plugins/`` is read with :mod:`ast`, wherever it stands (top level, inside a function, under ``if
TYPE_CHECKING``): a function-local import that closes a ring is still a ring (its order of imports only works by
luck). An edge goes from the importing module to:

- ``import a.b.c``: the module ``a.b.c`` (the longest prefix that is a module of the checkout);
- ``from a.b import c`` (relative or absolute): the module ``a.b.c`` if ``c`` is a submodule, else the module
  ``a.b`` (a package ``__init__`` whose submodules import names from it is in a ring with them when it imports
  them);
- an import of a module outside the checkout: no edge.

Python also runs the ``__init__`` of every enclosing package when it imports a submodule; those edges are left out
(a package that re-exports its submodules' names would otherwise be a ring by construction).

A cycle is reported as its chain of modules, each edge with the file and line of its import statement. One test per
top-level package, so that a ring in one package does not hide that another is clean.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("isparse", "pipeline", "hydra_plugins")


def modules_of(root: Path, packages) -> dict[str, Path]:
    """{dotted module name: file} of every ``.py`` file under ``root/<package>`` (``a/b/__init__.py`` is ``a.b``)."""
    out = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if "__pycache__" in parts:
                continue
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


def _known(name: str, modules) -> str | None:
    """The longest prefix of ``name`` that is a module of the checkout, or None (a module outside it)."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def imports_of(module: str, path: Path, modules) -> dict[str, int]:
    """{imported module of the checkout: line of the first statement importing it} of one module's file, every
    import statement included (see the module docstring for what an edge is)."""
    is_package = path.name == "__init__.py"
    out: dict[str, int] = {}

    def add(target, line):
        if target is not None and target != module:
            out.setdefault(target, line)

    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(_known(alias.name, modules), node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:   # relative: from the package of this module (a package's own __init__: itself)
                package = module.split(".") if is_package else module.split(".")[:-1]
                up = len(package) - (node.level - 1)
                assert up > 0, f"{path}:{node.lineno}: a relative import above the top-level package"
                base = ".".join(package[:up] + ([node.module] if node.module else []))
            else:
                base = node.module
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                add(submodule if submodule in modules else _known(base, modules), node.lineno)
    return out


def import_graph(root: Path, packages) -> tuple[dict[str, dict[str, int]], dict[str, Path]]:
    """({module: {imported module: line}}, {module: file}) of the packages under ``root``."""
    modules = modules_of(root, packages)
    return {m: imports_of(m, p, modules) for m, p in modules.items()}, modules


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """One cycle per ring (:func:`rings`), as its chain of modules from its first module (by name) back to it; empty
    when the graph has none."""
    return [_chain(graph, ring) for ring in rings(graph)]


def rings(graph: dict[str, dict[str, int]]) -> list[set]:
    """The rings of the graph: its strongly connected components of more than one module, by first module."""
    index, low, stack, on_stack, rings = {}, {}, [], set(), []

    def visit(root):   # Tarjan's algorithm, iterative (a long chain of imports needs no deep recursion)
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            for w in children:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    ring = set()
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        ring.add(w)
                        if w == v:
                            break
                    if len(ring) > 1:
                        rings.append(ring)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(rings, key=min)


def _chain(graph, ring: set) -> list[str]:
    """A shortest cycle through the ring's first module, inside the ring: [a, b, ..., a]."""
    start = min(ring)
    came_from, frontier = {}, [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph[v]):
                if w == start:
                    chain = [v]
                    while chain[-1] != start:
                        chain.append(came_from[chain[-1]])
                    return [*reversed(chain), start]
                if w in ring and w not in came_from:
                    came_from[w] = v
                    nxt.append(w)
        frontier = nxt
    raise AssertionError(f"no cycle through {start} in its ring {sorted(ring)}")


def describe(chain: list[str], graph, modules, root: Path) -> str:
    """``a -> b (a.py:12) -> a (b.py:3)``: the chain with the import statement of each edge."""
    steps = [chain[0]]
    for a, b in zip(chain, chain[1:]):
        steps.append(f"{b} ({modules[a].relative_to(root)}:{graph[a][b]})")
    return " -> ".join(steps)


def _rings_touching(package: str, root: Path = ROOT, packages=PACKAGES) -> list[str]:
    graph, modules = import_graph(root, packages)
    return [f"{describe(_chain(graph, ring), graph, modules, root)}   [its ring: {', '.join(sorted(ring))}]"
            for ring in rings(graph) if any(m == package or m.startswith(package + ".") for m in ring)]


# -- the checkout --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_cycle(package):
    """No ring of imports (deferred ones included) through a module of ``package``."""
    found = _rings_touching(package)
    assert not found, f"{len(found)} import cycle(s) through {package}:\n" + "\n".join(found)


def test_every_package_is_read():
    """The graph holds the modules and the edges it must (a parser that finds nothing finds no cycle)."""
    graph, modules = import_graph(ROOT, PACKAGES)
    assert {"isparse", "pipeline.main", "pipeline.report", "hydra_plugins.isparse_dask_launcher.dask_launcher"} \
        <= set(modules)
    assert "pipeline._store" in graph["pipeline.tracking"]                 # from ._store import ... (relative)
    assert "pipeline.report" in graph["pipeline.sweep"]                    # deferred, inside a method
    assert "pipeline.report._cli" in graph["pipeline.report.__main__"]     # from ._cli import main
    assert "pipeline.report._writing" in graph["pipeline.report"]         # from . import _writing as module
    assert "pipeline.jobenv" in graph["hydra_plugins.isparse_dask_launcher.dask_launcher"]   # absolute, across


# -- the test's own soundness: it finds a ring where there is one ---------------------------------------------------
def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / "pkg" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def test_finds_a_ring_held_by_a_deferred_import(tmp_path):
    root = _package(tmp_path, {"__init__.py": "", "a.py": "def f():\n    from . import b\n    return b\n",
                               "b.py": "import os\n\nfrom pkg.a import f\n"})
    graph, modules = import_graph(root, ["pkg"])
    assert graph == {"pkg": {}, "pkg.a": {"pkg.b": 2}, "pkg.b": {"pkg.a": 3}}
    assert cycles(graph) == [["pkg.a", "pkg.b", "pkg.a"]]
    assert describe(cycles(graph)[0], graph, modules, root) == "pkg.a -> pkg.b (pkg/a.py:2) -> pkg.a (pkg/b.py:3)"
    assert _rings_touching("pkg", root, ["pkg"])


def test_finds_a_package_init_whose_submodule_imports_from_it(tmp_path):
    """``from . import NAME`` (not a submodule) in a submodule is an import of the package's ``__init__``."""
    root = _package(tmp_path, {"__init__.py": "from .a import f\nNAME = 1\n", "a.py": "from . import NAME\n"})
    graph, _ = import_graph(root, ["pkg"])
    assert cycles(graph) == [["pkg", "pkg.a", "pkg"]]


def test_no_ring_where_imports_run_one_way(tmp_path):
    root = _package(tmp_path, {"__init__.py": "from .b import g\n", "sub/__init__.py": "",
                               "sub/c.py": "from ..b import g\nfrom .. import a\n", "a.py": "import pkg.b\n",
                               "b.py": "def g():\n    import json\n"})
    graph, _ = import_graph(root, ["pkg"])
    assert graph["pkg.sub.c"] == {"pkg.b": 1, "pkg.a": 2} and graph["pkg.a"] == {"pkg.b": 1}
    assert cycles(graph) == []
