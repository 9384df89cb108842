"""The package as it would be published: license, metadata, links, the version in
one place, and the FoundationDB version CI installs equal to the one the docs cite."""

from __future__ import annotations

import re
from pathlib import Path

import fdbrecipes

ROOT = Path(__file__).resolve().parents[2]


def test_the_license_is_apache_2_and_shipped() -> None:
    assert "Apache License" in (ROOT / "LICENSE").read_text()
    assert "Version 2.0" in (ROOT / "LICENSE").read_text()
    project = (ROOT / "pyproject.toml").read_text()
    assert 'license-files = ["LICENSE"]' in project and '"LICENSE"' in project


def test_the_version_is_in_one_place() -> None:
    project = (ROOT / "pyproject.toml").read_text()
    assert 'dynamic = ["version"]' in project
    assert 'path = "src/fdbrecipes/__init__.py"' in project
    assert re.fullmatch(r"\d+\.\d+\.\d+", fdbrecipes.__version__)
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert "## [Unreleased]" in changelog and f"## [{fdbrecipes.__version__}]" in changelog


def test_readme_links_are_absolute() -> None:
    """Relative links break on the package index."""
    readme = (ROOT / "README.md").read_text()
    relative = re.findall(r"\]\((?!https?://|#)([^)]+)\)", readme)
    assert not relative, relative


def test_ci_installs_the_foundationdb_the_docs_cite() -> None:
    ci = (ROOT / ".github/workflows/ci.yml").read_text()
    installed = re.search(r'FDB_VERSION: "([\d.]+)"', ci)
    assert installed is not None
    readme = (ROOT / "README.md").read_text()
    assert f"We test FoundationDB {installed.group(1)}" in readme


def test_classifiers_name_every_python_ci_tests() -> None:
    ci = (ROOT / ".github/workflows/ci.yml").read_text()
    matrix = re.search(r"python: \[([^\]]+)\]", ci)
    assert matrix is not None
    versions = re.findall(r'"(3\.\d+)"', matrix.group(1))
    project = (ROOT / "pyproject.toml").read_text()
    for version in versions:
        assert f'"Programming Language :: Python :: {version}"' in project
    assert '"Framework :: Pytest"' in project
    assert "[project.urls]" in project


def test_the_docs_build_is_nitpicky_with_links_to_python_and_the_bindings() -> None:
    """CI builds the docs with -n -W (every reference must resolve, a warning fails),
    and intersphinx resolves Python's and the fdb bindings' names."""
    ci = (ROOT / ".github/workflows/ci.yml").read_text()
    assert re.search(r"sphinx-build -n -W\b", ci)
    conf = (ROOT / "docs/conf.py").read_text()
    assert "sphinx.ext.intersphinx" in conf and "nitpicky = True" in conf
    assert '"https://docs.python.org/3"' in conf
    assert '"https://apple.github.io/foundationdb"' in conf


def test_the_plugin_autoload_is_documented_with_how_to_turn_it_off() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "pytest11" in readme and "-p no:fdbrecipes" in readme
    assert "PYTEST_DISABLE_PLUGIN_AUTOLOAD" in readme
