"""Cron expressions in time zones, and what a fire does with due slots (no server).

The daylight-saving table: Europe/Berlin and America/New_York (one-hour shifts) and
Australia/Lord_Howe (a 30-minute shift), both changes of 2026.  Each row lists every
slot in its window as a UTC instant, worked out by hand from the rule in
docs/scheduler.md: a skipped wall-clock time fires once, at the shift; a repeated
one fires once, at its first occurrence.  Each row is checked forwards (``next_slot``
from the window's start, then from each slot), backwards (``last_slots``), and from
every instant of the window a prime number of seconds apart (inside the repeated
and skipped times too).
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Dict, List, Optional

import pytest

pytest.importorskip("cronsim")

import fdb.tuple as fdb_tuple

from fdbrecipes import catch_up
from fdbrecipes._schedules.cron import Cron, Every, check_zone
from fdbrecipes._schedules.records import (
    CAUGHT_UP,
    ON_TIME,
    Definition,
    State,
    plan,
)


def utc(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=timezone.utc).timestamp()


#: (what, expression, zone, window start, window end (UTC), every slot in it (UTC)).
DST_TABLE = [
    ("Berlin spring: 02:30 is skipped, fires at the shift (03:00 CEST)", "30 2 * * *",
     "Europe/Berlin", "2026-03-27T23:00", "2026-03-30T23:00",
     ["2026-03-28T01:30", "2026-03-29T01:00", "2026-03-30T00:30"]),
    ("Berlin autumn: 02:30 happens twice, fires at the first (CEST)", "30 2 * * *",
     "Europe/Berlin", "2026-10-23T22:00", "2026-10-26T22:00",
     ["2026-10-24T00:30", "2026-10-25T00:30", "2026-10-26T01:30"]),
    ("Berlin spring, hourly: 02:00 is 03:00's instant, one slot", "0 * * * *",
     "Europe/Berlin", "2026-03-28T22:30", "2026-03-29T02:30",
     ["2026-03-28T23:00", "2026-03-29T00:00", "2026-03-29T01:00", "2026-03-29T02:00"]),
    ("Berlin autumn, hourly: the repeated 02:00 fires once", "0 * * * *",
     "Europe/Berlin", "2026-10-24T21:30", "2026-10-25T02:30",
     ["2026-10-24T22:00", "2026-10-24T23:00", "2026-10-25T00:00", "2026-10-25T02:00"]),
    ("Berlin spring, with a seconds field", "0 30 2 * * *",
     "Europe/Berlin", "2026-03-27T23:00", "2026-03-30T23:00",
     ["2026-03-28T01:30", "2026-03-29T01:00", "2026-03-30T00:30"]),
    ("Berlin autumn, with a seconds field", "0 30 2 * * *",
     "Europe/Berlin", "2026-10-23T22:00", "2026-10-26T22:00",
     ["2026-10-24T00:30", "2026-10-25T00:30", "2026-10-26T01:30"]),
    ("New York spring: 02:30 is skipped, fires at the shift (03:00 EDT)", "30 2 * * *",
     "America/New_York", "2026-03-07T00:00", "2026-03-10T00:00",
     ["2026-03-07T07:30", "2026-03-08T07:00", "2026-03-09T06:30"]),
    ("New York autumn: 01:30 happens twice, fires at the first (EDT)", "30 1 * * *",
     "America/New_York", "2026-10-31T00:00", "2026-11-03T00:00",
     ["2026-10-31T05:30", "2026-11-01T05:30", "2026-11-02T06:30"]),
    ("New York autumn, every 30 minutes: the repeated hour fires once", "*/30 * * * *",
     "America/New_York", "2026-11-01T03:59", "2026-11-01T07:59",
     ["2026-11-01T04:00", "2026-11-01T04:30", "2026-11-01T05:00", "2026-11-01T05:30",
      "2026-11-01T07:00", "2026-11-01T07:30"]),
    ("Lord Howe spring: 02:15 is skipped (02:00-02:30), fires at 02:30 +11", "15 2 * * *",
     "Australia/Lord_Howe", "2026-10-02T12:00", "2026-10-05T12:00",
     ["2026-10-02T15:45", "2026-10-03T15:30", "2026-10-04T15:15"]),
    ("Lord Howe spring, every 15 minutes: 02:00, 02:15 and 02:30 fire once", "*/15 * * * *",
     "Australia/Lord_Howe", "2026-10-03T15:10", "2026-10-03T15:50",
     ["2026-10-03T15:15", "2026-10-03T15:30", "2026-10-03T15:45"]),
    ("Lord Howe autumn: 01:45 happens twice (01:30-02:00), fires at the first",
     "45 1 * * *", "Australia/Lord_Howe", "2026-04-03T12:00", "2026-04-06T12:00",
     ["2026-04-03T14:45", "2026-04-04T14:45", "2026-04-05T15:15"]),
    ("Lord Howe autumn, every 15 minutes: the repeated half hour fires once",
     "*/15 * * * *", "Australia/Lord_Howe", "2026-04-04T13:59", "2026-04-04T15:31",
     ["2026-04-04T14:00", "2026-04-04T14:15", "2026-04-04T14:30", "2026-04-04T14:45",
      "2026-04-04T15:30"]),
]


@pytest.mark.parametrize(("what", "expression", "zone", "start", "end", "slots"), DST_TABLE,
                         ids=[row[0].split(":")[0] + f" {row[1]}" for row in DST_TABLE])
def test_every_slot_fires_once_across_daylight_saving_changes(
        what: str, expression: str, zone: str, start: str, end: str, slots: List[str]) -> None:
    rule = Cron(expression, zone)
    want = [utc(slot) for slot in slots]
    got, at = [], utc(start)
    while True:
        at = rule.next_slot(at)
        if at > utc(end):
            break
        got.append(at)
    assert got == want, what
    assert rule.last_slots(utc(end), utc(start), 100) == want, what
    at = utc(start)
    while at < utc(end):
        later = [s for s in want if s > at]
        if later:
            assert rule.next_slot(at) == later[0], (what, at)
        assert rule.last_slots(at, utc(start), 1) == [s for s in want if s <= at][-1:], (what, at)
        at += 97


def test_nicknames_are_their_fields() -> None:
    day = utc("2026-05-05T10:00")
    assert Cron("@daily", "UTC").next_slot(day) == utc("2026-05-06T00:00")
    assert Cron("@hourly", "UTC").next_slot(day) == utc("2026-05-05T11:00")
    assert Cron("@weekly", "UTC").next_slot(day) == utc("2026-05-10T00:00")  # a Sunday
    assert Cron("@monthly", "UTC").next_slot(day) == utc("2026-06-01T00:00")
    assert Cron("@yearly", "UTC").next_slot(day) == utc("2027-01-01T00:00")
    assert Cron("*/5 * * * * *", "UTC").next_slot(day) == day + 5


@pytest.mark.parametrize("expression", ["", "* * *", "61 * * * *", "0 25 * * *",
                                        "0 0 30 2 *", "@reboot", "a b c d e", "* " * 7])
def test_an_invalid_expression_is_refused_naming_it(expression: str) -> None:
    with pytest.raises(ValueError, match="cron"):
        Cron(expression, "UTC")


def test_an_expression_of_another_type_is_refused() -> None:
    with pytest.raises(TypeError, match="cron"):
        Cron(5, "UTC")  # type: ignore[arg-type]


@pytest.mark.parametrize("zone", ["Europe/Nowhere", "", "../etc/passwd", "utc+2"])
def test_an_unknown_time_zone_is_refused_naming_it(zone: str) -> None:
    with pytest.raises(ValueError, match="unknown time zone"):
        check_zone(zone)
    with pytest.raises(TypeError, match="tz"):
        check_zone(2)


def test_every_counts_from_the_epoch() -> None:
    rule = Every(60.0)
    assert rule.next_slot(120.0) == 180.0
    assert rule.next_slot(121.5) == 180.0
    assert rule.last_slots(300.0, 100.0, 10) == [120.0, 180.0, 240.0, 300.0]
    assert rule.last_slots(300.0, 100.0, 2) == [240.0, 300.0]
    assert rule.last_slots(300.0, 300.0, 2) == []


def definition(catch: int = 0, grace: float = 60.0) -> Definition:
    return Definition(None, None, 60.0, b"q", (), b"\x01", catch, grace, 0.0, 0.0)


def state(last: float, paused_at: Optional[float] = None) -> State:
    return State(1, paused_at, 0.0, last, (), ())


def test_a_slot_on_time_fires_and_missed_ones_are_skipped() -> None:
    rule = Every(60.0)
    assert plan(rule, definition(), state(600.0), 661.0) == ([(660.0, ON_TIME)], 660.0)
    # down from 660 to 905: 720 ... 900 are due; 900 is 5 s late, the others missed
    assert plan(rule, definition(), state(660.0), 905.0) == ([(900.0, ON_TIME)], 900.0)
    # the latest is later than the grace: missed too
    assert plan(rule, definition(grace=1.0), state(660.0), 905.0) == ([], 900.0)
    assert plan(rule, definition(), state(900.0), 905.0) == ([], None)


def test_a_worker_running_behind_fires_every_slot_within_the_grace() -> None:
    rule = Every(60.0)
    assert plan(rule, definition(grace=200.0), state(660.0), 905.0) == (
        [(720.0, ON_TIME), (780.0, ON_TIME), (840.0, ON_TIME), (900.0, ON_TIME)], 900.0)
    assert plan(rule, definition(catch_up(1).n, grace=100.0), state(600.0), 905.0) == (
        [(780.0, CAUGHT_UP), (840.0, ON_TIME), (900.0, ON_TIME)], 900.0)


def test_catch_up_fires_the_latest_missed_slots_oldest_first() -> None:
    rule = Every(60.0)
    n = catch_up(2).n
    assert plan(rule, definition(n), state(660.0), 905.0) == (
        [(780.0, CAUGHT_UP), (840.0, CAUGHT_UP), (900.0, ON_TIME)], 900.0)
    assert plan(rule, definition(n, grace=1.0), state(660.0), 905.0) == (
        [(840.0, CAUGHT_UP), (900.0, CAUGHT_UP)], 900.0)
    assert plan(rule, definition(10), state(660.0), 725.0) == ([(720.0, ON_TIME)], 720.0)


def test_a_paused_schedule_fires_no_slot() -> None:
    assert plan(Every(60.0), definition(), state(600.0, paused_at=610.0), 905.0) == ([], None)


@pytest.mark.parametrize("n", [0, -1, 1001, 2.0, True])
def test_catch_up_needs_a_count(n: object) -> None:
    with pytest.raises((TypeError, ValueError), match="catch_up"):
        catch_up(n)  # type: ignore[arg-type]


def test_every_agrees_with_itself_where_the_division_rounds() -> None:
    # 2992 * 0.1 is 299.20000000000005, which divided by 0.1 is 2991.9999...: a slot the
    # rule gives must be a slot the rule counts
    for seconds, after in ((0.1, 299.15), (0.7, 698.5), (0.3, 8674.1), (0.2, 1e9 + 0.05),
                           (1.1, 2194.0), (3.0, 1_774_830_000.05)):
        rule = Every(seconds)
        for _ in range(200):
            slot = rule.next_slot(after)
            assert slot > after and rule.last_slots(slot, after, 5) == [slot], (seconds, slot)
            assert rule.next_slot(slot) > slot and rule.last_slots(slot, slot, 5) == []
            after = slot


class Untouchable:
    """A database that fails the test if anything reaches it."""

    def __getattr__(self, name: str) -> None:
        raise AssertionError(f"the database was used ({name}) before the arguments were checked")


@pytest.mark.parametrize(("error", "match", "arguments"), [
    (ValueError, "cron: '61", dict(cron="61 * * * *")),
    (ValueError, "unknown time zone 'Nowhere/Land'", dict(cron="@daily", tz="Nowhere/Land")),
    (TypeError, "exactly one of cron= and every=", dict()),
    (TypeError, "exactly one of cron= and every=", dict(cron="@daily", every=60)),
    (ValueError, "tz applies to cron", dict(every=60, tz="UTC")),
    (ValueError, "every", dict(every=0)),
    (TypeError, "misfire", dict(every=60, misfire="never")),
    (ValueError, "grace", dict(every=60, grace=-1)),
    (TypeError, "jitter", dict(every=60, jitter="1")),
    (TypeError, "a Queue takes no priority", dict(every=60, priority=1)),
    (TypeError, "target", dict(every=60, target=object())),
    (TypeError, "name", dict(every=60, name=5)),
    (ValueError, "name", dict(every=60, name="")),
    (TypeError, "value", dict(every=60, value=[1])),
    (TypeError, "paused", dict(every=60, paused=1)),
])
def test_the_store_refuses_bad_arguments_before_touching_anything(
        error: type, match: str, arguments: Dict[str, Any]) -> None:
    from fdb.subspace_impl import Subspace

    from fdbrecipes import Queue, Schedules

    store = Schedules(Subspace(("schedules",)))
    given = {"name": "n", "target": Queue(Subspace(("jobs",))), **arguments}
    with pytest.raises(error, match=match):
        store.add(Untouchable(), given.pop("name"), **given)
    for call in (store.pause, store.resume, store.run_now, store.remove, store.get):
        with pytest.raises(TypeError, match="name"):
            call(Untouchable(), 5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Schedule"):
        store.upsert(Untouchable(), "n")


def test_a_definitions_limit_keys_are_stored_after_it_only_when_given() -> None:
    plain = definition()
    keyed = plain._replace(limit_keys=(("per-customer", ("acme", 7)),))
    old = fdb_tuple.pack((1, None, None, 60.0, b"q", (), b"\x01", 0, 60.0, 0.0, 0.0))
    assert plain.pack() == old  # as a definition without them was always written
    assert Definition.unpack(old) == plain and Definition.unpack(old).limit_keys == ()
    assert Definition.unpack(keyed.pack()) == keyed
    assert keyed.limit_keys_args == {"per-customer": ("acme", 7)}
    assert plain.limit_keys_args is None
    assert plain.same(plain._replace(created_at=5.0))  # when it was added is aside
    assert not plain.same(keyed)
