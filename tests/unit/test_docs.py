"""The docs build offline: intersphinx reads inventories kept in the repository, never
the network, so a machine without one still checks every reference (the project's own
among them) with ``sphinx-build -n -W``; ``.ci/run`` builds them."""

from __future__ import annotations

import importlib.util
import re
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def test_intersphinx_reads_only_the_inventories_kept_here() -> None:
    conf = runpy.run_path(str(DOCS / "conf.py"))
    mapping = conf["intersphinx_mapping"]
    assert set(mapping) == {"python", "fdb"}
    for target, inventory in mapping.values():
        assert target.startswith("https://")
        assert isinstance(inventory, str) and "://" not in inventory, inventory
        lines = (DOCS / inventory).read_text().splitlines()
        assert lines[0] == "# Sphinx inventory version 1"
        assert lines[1].startswith("# Project: ") and lines[2].startswith("# Version: ")
        entries = [line.split() for line in lines[3:]]
        assert entries and all(len(entry) == 3 for entry in entries), entries
        assert len({name for name, _, _ in entries}) == len(entries)
        assert all(re.fullmatch(r"[\w/.-]+\.html", page) for _, _, page in entries)


def test_ci_builds_the_docs_with_every_reference_checked() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    assert "pip install --quiet -e '.[test,docs]'" in ci
    assert re.search(r"^\.venv/bin/sphinx-build -E -n -W .* docs docs/_build$", ci, re.M)


@pytest.mark.skipif(importlib.util.find_spec("sphinx") is None,
                    reason="Sphinx is not installed (the docs extra: pip install -e '.[docs]')")
def test_the_docs_build_without_a_warning_and_without_the_network(tmp_path: Path) -> None:
    """Nitpicky, warnings as errors (about 15 s): every reference of the pages and of
    the docstrings resolves, from the inventories kept here (none is fetched)."""
    done = subprocess.run([sys.executable, "-m", "sphinx", "-E", "-n", "-W", "--keep-going",
                           "-q", "-d", str(tmp_path / "doctrees"), str(DOCS),
                           str(tmp_path / "html")],
                          capture_output=True, text=True, check=False, timeout=300, cwd=ROOT)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    api = (tmp_path / "html" / "api.html").read_text()
    assert "https://docs.python.org/3/library/uuid.html#uuid.UUID" in api
    assert "https://apple.github.io/foundationdb/api-python.html#fdb.Subspace" in api
