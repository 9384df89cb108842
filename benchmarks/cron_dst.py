"""cronsim and croniter on the daylight-saving table of ``tests/unit/test_cron.py``.

``python benchmarks/cron_dst.py`` runs every row of the table (Europe/Berlin,
America/New_York, Australia/Lord_Howe, both changes of 2026) through each library's
own time zone handling (a tz-aware start, as each documents) and through fdbrecipes'
rule (the library evaluating wall-clock times, ``fdbrecipes._schedules.cron`` mapping
them to instants), and times a next slot.  What docs/scheduler.md reports.  Needs both
libraries (``pip install cronsim croniter``) and no server.
"""

from __future__ import annotations

import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Dict, List
from zoneinfo import ZoneInfo

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.unit.test_cron import DST_TABLE, utc

from fdbrecipes._schedules.cron import Cron

Slots = Callable[[str, str, float, float], List[float]]


def with_cronsim(expression: str, zone: str, start: float, end: float) -> List[float]:
    import cronsim

    found = []
    for at in cronsim.CronSim(expression, datetime.fromtimestamp(start, ZoneInfo(zone))):
        if at.timestamp() > end:
            return found
        found.append(at.timestamp())
    return found


def with_croniter(expression: str, zone: str, start: float, end: float) -> List[float]:
    import croniter

    it = croniter.croniter(expression, datetime.fromtimestamp(start, ZoneInfo(zone)),
                           second_at_beginning=True)
    found: List[float] = []
    while True:
        at = it.get_next(datetime).timestamp()
        if at > end or len(found) > 100:
            return found
        found.append(at)


def with_the_rule(expression: str, zone: str, start: float, end: float) -> List[float]:
    rule, found, at = Cron(expression, zone), [], start
    while (at := rule.next_slot(at)) <= end:
        found.append(at)
    return found


def shown(slots: Any) -> str:
    return " ".join(datetime.fromtimestamp(s, timezone.utc).strftime("%m-%dT%H:%M")
                    for s in slots)


def main() -> int:
    ways: Dict[str, Slots] = {"cronsim, its own zones": with_cronsim,
                              "croniter, its own zones": with_croniter,
                              "fdbrecipes' rule (cronsim)": with_the_rule}
    for way, slots in ways.items():
        passed = 0
        for what, expression, zone, start, end, want in DST_TABLE:
            try:
                got = slots(expression, zone, utc(start), utc(end))
            except Exception as e:
                got, error = [], f"{type(e).__name__}: {e}"
            else:
                error = ""
            if got == [utc(w) for w in want]:
                passed += 1
            else:
                print(f"  {way}: {what}: got {error or shown(got)}")
        print(f"{way}: {passed} of {len(DST_TABLE)} rows")
    for name in ("cronsim", "croniter"):
        begin = time.perf_counter()
        for i in range(2_000):
            (with_cronsim if name == "cronsim" else with_croniter)(
                "*/7 * * * * *", "UTC", 1_767_225_600.0 + i, 1_767_225_607.0 + i)
        print(f"{name}: {(time.perf_counter() - begin) / 2_000 * 1e6:.0f} µs per next slot")
    return 0


if __name__ == "__main__":
    sys.exit(main())
