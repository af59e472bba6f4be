"""Sphinx configuration of the dynnets documentation site.

Build it with ``python -m sphinx -W --keep-going -b html docs docs/_build/html``
(``pip install -e '.[docs]'`` first). Warnings are errors in CI: a broken
cross-reference to one of our names, a public name without a docstring, a page
outside the navigation all fail the build.
"""
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))
sys.path.insert(0, str(HERE.parent))

import dynnets  # noqa: E402

project = "dynnets"
author = "the dynnets authors"
copyright = "2026, the dynnets authors"
release = dynnets.__version__
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "myst_parser",
    "cliref",
    "publicapi",
    "figcommands",
]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build"]
root_doc = "index"
# options and code words stay as typed: no "--help" turned into an en dash
smartquotes = False

# Markdown pages: ``{ref}`` roles, heading anchors for in-page links, fenced
# ```python blocks stay code blocks (they run in tests/test_readme.py)
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 4

# NumPy-style docstrings (the project's style); signatures as written
napoleon_google_docstring = False
napoleon_numpy_docstring = True
napoleon_use_rtype = False
napoleon_use_ivar = True
autodoc_member_order = "bysource"
autodoc_typehints = "none"
autodoc_default_options = {"members": True, "undoc-members": True}

# Cross-references to our own names must resolve; types from numpy, the
# standard library and plain words in docstrings' type fields ("array of
# int", "callable") are not ours, so they are not checked.
nitpicky = True
nitpick_ignore_regex = [
    (r"py:.*", r"(?!dynnets\.).*"),
    # the implementation modules behind the public names: docstrings may name
    # them (dynnets.autograd.engine.Node), the reference documents the names
    # users import (dynnets.Tensor; a reference to a public object by its
    # defining module resolves to it, see _ext/publicapi.py)
    (r"py:.*", r"dynnets\.(autograd|devices)(\..*)?"),
    # the Numba kernel modules: implementation, each function twinned in numpy
    (r"py:.*", r"dynnets\.[\w.]*kernels(\..*)?"),
    # the static compiler's modules that dynnets.autograd.batchable's
    # docstrings name (its plan is built by them); their public names are
    # documented under dynnets.static
    (r"py:.*", r"dynnets\.static\.(graph|backward|batchable)(\..*)?"),
]

# furo: a modern theme whose CSS, JavaScript and fonts ship inside the package
# (system font stacks, no CDN), so the built site reads offline from file://
# "more than one target found" for a bare attribute name in a type field
# (``shape``, ``dtype``): ambiguous plain words, not broken references
suppress_warnings = ["ref.python"]

html_theme = "furo"
html_title = f"dynnets {release}"
html_static_path = []
html_show_sourcelink = False
html_copy_source = False

