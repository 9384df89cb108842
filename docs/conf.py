"""Sphinx configuration: Markdown pages (MyST) plus the API reference from docstrings."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.abspath("../src"))

project = "fdbrecipes"
author = "fdbrecipes developers"
extensions = ["myst_parser", "sphinx.ext.autodoc", "sphinx.ext.napoleon", "sphinx.ext.viewcode"]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
exclude_patterns = ["_build", "examples"]
myst_heading_anchors = 3
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_type_aliases = {"Transactor": "fdbrecipes.Transactor", "Value": "fdbrecipes.Value"}
napoleon_google_docstring = True
html_theme = "alabaster"
nitpicky = False
suppress_warnings = ["myst.xref_missing"]
