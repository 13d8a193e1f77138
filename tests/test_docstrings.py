"""The docstrings of isparse's public API: all present (a method's own or inherited), each one parses as numpydoc,
and renders as reStructuredText without a warning (what ``sphinx-build -W`` of the API reference, docs/api.md,
would refuse).

"Public" is what the API reference (docs/api.md) shows: in a module of ``isparse/`` whose path has no component
starting with ``_`` (``__init__.py`` aside), the module itself, its module-level functions and classes whose names do
not start with ``_``, and the methods and properties defined in the body of such a class whose names do not start
with ``_``. The objects are found with ``ast``. A method without a docstring of its own that overrides a documented
method of a base class defined in isparse/ inherits its contract's docstring (``help()`` and autodoc show that one), so
it counts as documented: that is the one place the module is imported, to follow the class's MRO.
"""

from __future__ import annotations

import ast
import importlib
import warnings
from pathlib import Path

import pytest

numpydoc_docscrape = pytest.importorskip("numpydoc.docscrape")
numpydoc_sphinx = pytest.importorskip("numpydoc.docscrape_sphinx")
docutils_core = pytest.importorskip("docutils.core")
pytest.importorskip("sphinx.ext.autosummary")

ROOT = Path(__file__).resolve().parents[1] / "isparse"
#: the public names that may have no docstring, own or inherited: their name and type say all there is to say. Every
#: other public function, class and method must have one (a new one without fails the test)
UNDOCUMENTED = {
    "isparse.engines.stream.RoundServer.listening",
    "isparse.engines.stream.RoundServer.connected",
    "isparse.engines.stream.Stream.close",
}


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


def inherited_docstring(qualname: str) -> str | None:
    """The docstring the method ``qualname`` (``module.Class.method``) inherits: that of the nearest class after its
    own in the MRO that is defined in isparse/ and defines the name with a docstring; None when there is none."""
    module_name, class_name, name = qualname.rsplit(".", 2)
    cls = getattr(importlib.import_module(module_name), class_name, None)
    for base in getattr(cls, "__mro__", ())[1:]:
        if base.__module__.split(".")[0] == "isparse" and name in vars(base):
            member = vars(base)[name]
            doc = getattr(getattr(member, "__func__", member), "__doc__", None)   # classmethod, staticmethod
            if doc and doc.strip():
                return doc
    return None


def undocumented(objects: list[tuple[str, str, str | None]]) -> list[str]:
    """The names of ``objects`` without a docstring, their own or (a method) one inherited from a base in isparse/."""
    return [name for kind, name, doc in objects
            if not doc and not (kind == "method" and inherited_docstring(name))]


def test_the_public_api_has_docstrings():
    objects = public_objects()
    assert len(objects) > 500, "the ast walk found too few public objects: is isparse/ where it was?"
    missing = [name for name in undocumented(objects) if name not in UNDOCUMENTED]
    assert not missing, (f"{len(missing)} of {len(objects)} public functions, classes and methods of isparse/ have no "
                         f"docstring, neither their own nor one inherited from the method they override (write one, "
                         f"or add the name to UNDOCUMENTED if its name and type say it all):\n" + "\n".join(missing))


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


def _rst_problems(text: str) -> list[str]:
    """The warnings and errors docutils reports for the reStructuredText ``text`` (Sphinx's roles and directives
    stand in as no-ops: only the markup itself is checked)."""
    import copy
    import io

    stream = io.StringIO()
    settings = copy.copy(_rst_settings())
    settings.report_level, settings.halt_level, settings.warning_stream = 2, 5, stream
    docutils_core.publish_doctree(text, settings=settings)
    return [line for line in stream.getvalue().splitlines() if any(f"({level})" in line for level in
                                                                   ("WARNING/2", "ERROR/3", "SEVERE/4"))]


_SETTINGS = []


def _rst_settings():
    """docutils' default settings, made once, with Sphinx's roles and directives registered as no-ops."""
    if not _SETTINGS:
        from docutils import nodes
        from docutils.frontend import get_default_settings
        from docutils.parsers.rst import Directive, Parser, directives, roles
        from docutils.readers.standalone import Reader

        def role(name, rawtext, text, lineno, inliner, options=None, content=None):
            return [nodes.literal(rawtext, text)], []

        for name in ("class", "meth", "func", "data", "mod", "attr", "obj", "exc", "ref", "doc", "term"):
            roles.register_local_role(name, role)
            roles.register_local_role(f"py:{name}", role)

        class AnyOptions(dict):
            def __getitem__(self, key):
                return directives.unchanged

            def __contains__(self, key):
                return True

        class NoOp(Directive):
            has_content, optional_arguments, final_argument_whitespace = True, 10, True
            option_spec = AnyOptions()

            def run(self):
                return []

        for name in ("seealso", "only", "autosummary", "versionadded", "versionchanged", "deprecated", "index"):
            directives.register_directive(name, NoOp)
        _SETTINGS.append(get_default_settings(Parser, Reader))
    return _SETTINGS[0]


def test_every_public_docstring_renders_as_rst():
    """What Sphinx would warn about: numpydoc's rendering of each docstring (``|x|`` read as a substitution, an
    unbalanced backtick, a bad indentation, ...), and the one-sentence summary autosummary cuts from it (a literal
    cut in two by a period)."""
    from sphinx.ext.autosummary import extract_summary

    docs = [(name, doc) for _, name, doc in public_objects() if doc] + [(m, d) for m, d in module_docstrings() if d]
    bad = []
    for name, doc in docs:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")   # a numpydoc warning is the other test's
            rendered = str(numpydoc_sphinx.SphinxDocString(doc))
        bad += [f"{name}: {line}" for line in _rst_problems(rendered)]
        summary = extract_summary(doc.splitlines(), _rst_settings())
        bad += [f"{name} (autosummary's summary {summary!r}): {line}" for line in _rst_problems(summary)]
    assert not bad, f"{len(bad)} problems rendering the docstrings of isparse/ as reStructuredText:\n" + "\n".join(bad)


def test_an_override_inherits_and_a_new_name_does_not():
    """The coverage rule itself: an undocumented override of a documented base method (QuadraticProblem.start
    overrides Problem.start) counts as documented; a method that overrides nothing, or a function, does not."""
    cls = "isparse.problems.quadratic.QuadraticProblem"
    assert inherited_docstring(f"{cls}.start")
    assert undocumented([("method", f"{cls}.start", None), ("method", f"{cls}.not_a_base_method", None),
                         ("function", "isparse.problems.quadratic.no_such_function", None)]) \
        == [f"{cls}.not_a_base_method", "isparse.problems.quadratic.no_such_function"]


def test_the_check_catches_a_bad_section():
    """The numpydoc check itself: an unknown section is reported, a clean docstring is not."""
    assert _numpydoc_problem("Summary.\n\nClass attributes\n----------------\nx : int\n    A value.\n")
    assert _numpydoc_problem("Summary.\n\nParameters\n----------\nx : int\n    A value.\n") is None


def test_the_check_catches_bad_rst():
    """The reStructuredText check itself: a ``|v|`` (an undefined substitution) and an unbalanced literal are
    reported, the same text in double backticks is not."""
    assert _rst_problems("The norm |v| of v.")
    assert _rst_problems("The key ``data.dir`` and ``data.path")
    assert not _rst_problems("The norm ``|v|`` of v, :class:`~isparse.Dataset`.")
