"""Sphinx configuration of isparse's documentation site.

Build it from the root of a checkout (after the README's first command)::

    .venv/bin/sphinx-build -W --keep-going -b html docs docs/_build/html

The pages are Markdown (MyST); the API reference is generated from the docstrings (autodoc, autosummary) and
rendered by numpydoc.
"""

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

project = "isparse"
author = "the isparse developers"
copyright = "2026, the isparse developers"
release = version = "0.1.0"

extensions = [
    "myst_parser",
    "numpydoc",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.intersphinx",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
]

source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build", "api/generated/*.md"]
templates_path = ["_templates"]

myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist"]
myst_heading_anchors = 4

autosummary_generate = True
autodoc_default_options = {"show-inheritance": True}
autodoc_typehints = "none"
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False

intersphinx_mapping = {
    "python": ("https://docs.python.org/3", None),
    "numpy": ("https://numpy.org/doc/stable", None),
}
# no network on the build machines: intersphinx inventories are not fetched
intersphinx_disabled_reftypes = ["*"]
if os.environ.get("ISPARSE_DOCS_OFFLINE", "1") == "1":
    intersphinx_mapping = {}

html_theme = "pydata_sphinx_theme"
html_title = "isparse"
html_static_path = []
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
}


def _skip_metadata_routing(app, what, name, obj, skip, options):
    """Leave out scikit-learn's generated ``set_<method>_request`` methods of the estimators (isparse.estimators):
    their docstrings point into scikit-learn's own glossary."""
    if name.startswith("set_") and name.endswith("_request"):
        return True
    return None


def setup(app):
    app.connect("autodoc-skip-member", _skip_metadata_routing)
