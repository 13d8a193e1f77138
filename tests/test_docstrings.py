"""The docstrings of isparse's public API: (nearly) all present, and each one parses as numpydoc.

"Public" is what the API reference (docs/api.md) shows: in a module of ``isparse/`` whose path has no component
starting with ``_`` (``__init__.py`` aside), the module itself, its module-level functions and classes whose names do
not start with ``_``, and the methods and properties defined in the body of such a class whose names do not start
with ``_``. The objects are found with ``ast`` (nothing is imported), so the count does not depend on what imports.
"""

from __future__ import annotations

import ast
import warnings
from pathlib import Path

import pytest

numpydoc_docscrape = pytest.importorskip("numpydoc.docscrape")

ROOT = Path(__file__).resolve().parents[1] / "isparse"
#: the share of the public functions, classes and methods that must have a docstring
COVERAGE = 0.95


def _public_modules() -> list[Path]:
    return [p for p in sorted(ROOT.rglob("*.py"))
            if not any(part.startswith("_") and part != "__init__.py" for part in p.relative_to(ROOT).parts)]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def public_objects() -> list[tuple[str, str, str | None]]:
    """(kind, qualified name, docstring or None) of every public function, class and method of isparse/."""
    out = []
    for path in _public_modules():
        module = _module_name(path)
        tree = ast.parse(path.read_text(encoding="utf-8"))

        def visit(nodes, prefix, in_class):
            for node in nodes:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) \
                        and not node.name.startswith("_"):
                    kind = "class" if isinstance(node, ast.ClassDef) else ("method" if in_class else "function")
                    out.append((kind, f"{prefix}.{node.name}", ast.get_docstring(node)))
                    if isinstance(node, ast.ClassDef) and not in_class:
                        visit(node.body, f"{prefix}.{node.name}", True)

        visit(tree.body, module, False)
    return out


def module_docstrings() -> list[tuple[str, str | None]]:
    """(module name, docstring or None) of every public module of isparse/."""
    return [(_module_name(p), ast.get_docstring(ast.parse(p.read_text(encoding="utf-8")))) for p in _public_modules()]


def test_the_public_api_has_docstrings():
    objects = public_objects()
    assert len(objects) > 500, "the ast walk found too few public objects: is isparse/ where it was?"
    missing = [name for _, name, doc in objects if not doc]
    share = 1 - len(missing) / len(objects)
    assert share >= COVERAGE, (f"{len(missing)} of {len(objects)} public functions, classes and methods of isparse/ "
                               f"have no docstring ({share:.1%} have one; at least {COVERAGE:.0%} must):\n"
                               + "\n".join(missing))


def _numpydoc_problem(doc: str) -> str | None:
    """What numpydoc says of ``doc`` (an exception or a warning), or None when it parses cleanly."""
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("error")
        try:
            numpydoc_docscrape.NumpyDocString(doc)
        except Exception as exc:   # a numpydoc warning is raised as an exception here
            return f"{type(exc).__name__}: {exc}"
    return None


def test_every_public_docstring_parses_as_numpydoc():
    docs = [(name, doc) for _, name, doc in public_objects() if doc] + [(m, d) for m, d in module_docstrings() if d]
    bad = [f"{name}: {problem}" for name, doc in docs if (problem := _numpydoc_problem(doc))]
    assert not bad, f"{len(bad)} docstrings of isparse/ do not parse cleanly as numpydoc:\n" + "\n".join(bad)


def test_the_check_catches_a_bad_section():
    """The numpydoc check itself: an unknown section is reported, a clean docstring is not."""
    assert _numpydoc_problem("Summary.\n\nClass attributes\n----------------\nx : int\n    A value.\n")
    assert _numpydoc_problem("Summary.\n\nParameters\n----------\nx : int\n    A value.\n") is None
