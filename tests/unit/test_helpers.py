"""The tests' own statistics: the chi-square p-value against known quantiles."""

from __future__ import annotations

from typing import List

import pytest

from tests.helpers import chi_square_p


def counts_with(df: int, statistic: float) -> List[float]:
    """Counts of ``df + 1`` cells, each expected 10^6, whose chi-square statistic is
    ``statistic``: two cells off by as much in opposite directions."""
    off = (statistic * 1e6 / 2) ** 0.5
    return [1e6 + off, 1e6 - off] + [1e6] * (df - 1)


@pytest.mark.parametrize("df, statistic, p", [
    (1, 3.841459, 0.05), (2, 5.991465, 0.05), (3, 11.344867, 0.01), (10, 18.307038, 0.05),
    (1, 0.0, 1.0), (4, 1.063623, 0.9), (2, 13.815511, 0.001), (30, 43.772972, 0.05),
])
def test_chi_square_p_matches_the_tables(df: int, statistic: float, p: float) -> None:
    assert chi_square_p(counts_with(df, statistic), [1e6] * (df + 1)) == pytest.approx(
        p, abs=1e-5)
