"""Sphinx configuration: Markdown pages (MyST) plus the API reference from docstrings.

Built with ``sphinx-build -n -W docs docs/_build`` (nitpicky: every reference resolves);
links to Python's and the FoundationDB bindings' documentation come from intersphinx,
through the inventories kept in ``docs/_inventories`` (Sphinx's plain-text format,
version 1: "name type page" per line), never fetched: the build needs no network and
gives the same pages everywhere (``.ci/run`` builds them offline).  A new reference to
Python or to the bindings fails the build until its line is added there, with the page
that documents it (its anchor is the name).
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.abspath("../src"))

project = "fdbrecipes"
author = "fdbrecipes developers"
extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
    "sphinx.ext.intersphinx",
]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
exclude_patterns = ["_build", "_inventories", "examples"]
myst_heading_anchors = 3
autodoc_member_order = "bysource"
autodoc_typehints = "description"

napoleon_google_docstring = True
html_theme = "alabaster"
nitpicky = True
intersphinx_mapping = {
    "python": ("https://docs.python.org/3", "_inventories/python.inv"),
    "fdb": ("https://apple.github.io/foundationdb", "_inventories/fdb.inv"),
}

# TypeVars have no page of their own.
# type variables: F of aio.transactional; V, the values of Queue[V] and the others
# (explained on the API page)
nitpick_ignore = [("py:class", "fdbrecipes.aio._transactional.F"),
                  ("py:class", "fdbrecipes._values.V"), ("py:class", "V"),
                  # the operations object of a face (Face[OpsT]), a lease type of the
                  # protocol, an operation's result type
                  ("py:class", "fdbrecipes._face.OpsT"), ("py:class", "fdbrecipes.protocol.L"),
                  ("py:class", "fdbrecipes._drivers.blocking.T"),
                  ("py:class", "fdbrecipes._drivers.awaiting.T"),
                  # the blocking driver's interrupt, a testing aid of the library's own
                  ("py:class", "fdbrecipes._drivers.blocking.Interrupt"),
                  # a task's parameters (a ParamSpec) and result type
                  ("py:class", "P"), ("py:class", "~P"), ("py:obj", "typing.~P"),
                  ("py:class", "R"), ("py:class", "fdbrecipes.tasks.task.R"),
                  ("py:class", "fdbrecipes.tasks.app.R"),
                  ("py:class", "fdbrecipes.tasks.task.R_co"),
                  ("py:class", "fdbrecipes.tasks.app.TaskDecorator"),
                  # what a task asks of its app (an App is one), the harness of
                  # app.testing(...): internal, named by Task's and Testing's constructors
                  ("py:class", "Host"), ("py:class", "Harness")]


def public_name(app, env, node, contnode):
    """Resolve a type named by where it is defined (``fdbrecipes._fair.Policy``,
    ``fdb.subspace_impl.Subspace``) by where it is documented (``fdbrecipes...``,
    ``fdb.Subspace``)."""
    from sphinx.ext import intersphinx

    target = node.get("reftarget", "")
    package, _, name = target.partition(".")
    name = name.rpartition(".")[2]
    if package == "fdb" and name:
        node["reftarget"] = f"fdb.{name}"
        return intersphinx.missing_reference(app, env, node, contnode)
    if package != "fdbrecipes" or "._" not in "." + target.partition(".")[2]:
        return None
    py = env.get_domain("py")
    found = [full for full, entry in py.objects.items()
             if full.rpartition(".")[2] == name and "._" not in full and not entry.aliased]
    if len(found) != 1:
        return None
    return py.resolve_xref(env, node["refdoc"], app.builder, node["reftype"], found[0],
                           node, contnode)


def setup(app):
    app.connect("missing-reference", public_name)
