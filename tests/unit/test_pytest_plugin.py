"""fdbrecipes' pytest plugin where no cluster can be had: tests using its fixtures are
skipped with the reason, or fail with FDBRECIPES_REQUIRE_SERVER=1."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

USES_THE_DATABASE = '''
def test_uses_the_database(fdb_database):
    pass
'''


def run_pytest(directory: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """Run pytest (the plugin loaded from its entry point) on a test using the
    ``fdb_database`` fixture, written to ``directory``, with ``env`` added."""
    (directory / "test_example.py").write_text(USES_THE_DATABASE)
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
                           str(directory)], capture_output=True, text=True, check=False,
                          timeout=120, cwd=directory, env={**os.environ, **env})


def test_without_a_cluster_the_test_is_skipped(tmp_path: Path, no_cluster: str) -> None:
    done = run_pytest(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 skipped" in done.stdout
    assert no_cluster in done.stdout


def test_with_require_server_the_test_fails(tmp_path: Path, no_cluster: str) -> None:
    done = run_pytest(tmp_path, FDBRECIPES_REQUIRE_SERVER="1")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 error" in done.stdout
    assert f"FDBRECIPES_REQUIRE_SERVER=1 but {no_cluster}" in done.stdout
