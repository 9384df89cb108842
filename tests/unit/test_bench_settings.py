"""The benchmark's command-line options and the settings they make."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import List

import pytest

from fdbrecipes.bench.settings import (
    GROUPS,
    add_arguments,
    client_counts,
    settings_from_args,
)


def parse(argv: List[str]) -> argparse.Namespace:
    """``argv`` parsed by a parser carrying the benchmark's options."""
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(argv)


def test_defaults() -> None:
    s = settings_from_args(parse([]))
    assert s.clients == (1, 2, 4, 8, 16) and s.most == 16 and s.ends == (1, 16)
    assert s.coarse == (1, 4, 16)
    assert (s.duration, s.items, s.samples) == (5.0, 2000, 500)
    assert s.sizes == (10**3, 10**4, 10**5, 10**6)
    assert s.out == Path("bench-results")
    assert s.only == GROUPS and all(s.runs(g) for g in GROUPS)


def test_quick_and_explicit_values() -> None:
    quick = settings_from_args(parse(["--quick", "--clients", "6"]))
    assert quick.duration == 1.0 and quick.sizes[-1] == 10**5
    assert quick.clients == (1, 2, 4, 6) and quick.ends == (1, 6) and quick.coarse == (1, 4, 6)
    explicit = settings_from_args(parse(["--quick", "--duration", "2.5", "--out", "x"]))
    assert explicit.duration == 2.5 and explicit.out == Path("x")
    one = settings_from_args(parse(["--clients", "1"]))
    assert one.clients == (1,) and one.ends == (1,) and one.coarse == (1,)
    assert settings_from_args(parse(["--clients", "32"])).coarse == (1, 4, 16, 32)


@pytest.mark.parametrize("argv", [["--clients", "0"], ["--clients", "2.5"],
                                  ["--duration", "-1"], ["--duration", "nan"],
                                  ["--items", "many"], ["--only", "pops,bogus"],
                                  ["--only", ""], ["--only", "pops,,claim"]])
def test_bad_values_are_refused(argv: List[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse(argv)
    assert "error: argument" in capsys.readouterr().err


def test_only_selects_groups_in_run_order_with_the_limit() -> None:
    s = settings_from_args(parse(["--only", "claim, pops"]))
    assert s.only == ("limit", "pops", "claim")
    assert s.runs("limit") and s.runs("pops") and not s.runs("push")
    assert settings_from_args(parse(["--only", "limit"])).only == ("limit",)
    assert settings_from_args(parse(["--only", "latency,tree,pq,push"])).only == (
        "limit", "push", "tree", "pq", "latency")


def test_unknown_group_names_the_groups(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse(["--only", "pop"])
    err = capsys.readouterr().err
    assert "unknown group 'pop'" in err and ", ".join(GROUPS) in err


def test_claim_items_are_enough_for_ten_claims_per_client_and_bounded() -> None:
    s = settings_from_args(parse([]))
    assert s.claim_items(1) == 2000  # --items is more than 10 claims of 100
    assert s.claim_items(16) == 16_000
    assert s.claim_items(1000) == 100_000  # capped
    big = settings_from_args(parse(["--items", "200000"]))
    assert big.claim_items(16) == 200_000


def test_client_counts() -> None:
    assert client_counts(16) == (1, 2, 4, 8, 16)
    assert client_counts(3) == (1, 2, 3)
    assert client_counts(32) == (1, 2, 4, 8, 16, 32)
