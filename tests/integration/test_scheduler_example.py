"""The docs' scheduler example: heavy tasks keep arriving, the light task still runs."""

from __future__ import annotations

import importlib.util
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import chi_square_p

pytestmark = pytest.mark.integration

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "scheduler.py"


def load_example() -> Any:
    spec = importlib.util.spec_from_file_location("scheduler_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_scheduler_shares(fdb_database: Any, fdb_subspace: Any,
                          capsys: pytest.CaptureFixture[str]) -> None:
    example = load_example()
    runs = example.simulate(fdb_database, fdb_subspace, 4000)
    shares = example.report(runs)
    print(capsys.readouterr().out)  # the observed shares, shown with -s
    counts = Counter(runs)
    assert abs(shares["heavy"] - 0.5) < 0.03
    recurring = [counts["backup"], counts["report"], counts["reindex"]]
    expected = [sum(recurring) * w / 10 for w in (1, 3, 6)]
    assert chi_square_p(recurring, expected) > 0.001
    for start in range(0, 4000, 500):
        assert "backup" in runs[start:start + 500], f"backup starved in ticks {start}+"
