"""When a schedule's slots are: a period, or a cron expression in a time zone.

A *rule* gives a schedule's slots as instants (epoch seconds): :meth:`Rule.next_slot`
is the first after a time, :meth:`Rule.last_slots` the latest ones up to a time.

* :class:`Every`: the multiples of a period, in seconds since the epoch.
* :class:`Cron`: the wall-clock times a cron expression matches in an IANA time zone
  (``zoneinfo``).  The expression has 5 fields (minute, hour, day of month, month, day
  of week) or 6 (a seconds field first), or is one of the usual nicknames
  (:data:`NICKNAMES`).  It is parsed and evaluated by ``cronsim`` (extra
  ``fdbrecipes[cron]``) on local wall-clock times; each time it matches is then one
  slot, at an instant given by the rule of daylight-saving changes (docs/scheduler.md):

  - a time that happens once is a slot at that instant;
  - a time the clock skips (it moves forward over it) is a slot at the shift, the first
    instant after the gap: every skipped time fires once, there, together with the
    time the clock shows at the shift if that one matches too (one slot per instant);
  - a time the clock shows twice (it moves back over it) is one slot, at its first
    occurrence.

  So every matching wall-clock time fires exactly once, and no two slots share an
  instant.  Why not ``cronsim``'s own time zone handling (nor ``croniter``'s): see the
  comparison in docs/scheduler.md.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone, tzinfo
from typing import Any, List, Optional, Protocol

__all__ = ["INSTALL_HINT", "NICKNAMES", "Cron", "Every", "Rule", "check_zone", "rule_of"]

#: What a missing ``cronsim`` says.
INSTALL_HINT = "cron schedules need the extra: pip install 'fdbrecipes[cron]'"
#: The nicknames, as Vixie cron defines them (``@reboot`` has no meaning here).
NICKNAMES = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
             "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *",
             "@hourly": "0 * * * *"}
#: Longest cron expression accepted, in characters.
MAX_EXPRESSION = 200
_UTC = timezone.utc
_EPOCH = datetime(1970, 1, 1)


class Rule(Protocol):
    """When a schedule's slots are (instants, in epoch seconds)."""

    def next_slot(self, after: float) -> float:
        """The first slot strictly after ``after``."""

    def last_slots(self, now: float, after: float, count: int) -> List[float]:
        """The latest ``count`` slots (at most) in ``(after, now]``, oldest first."""

    def describe(self) -> str:
        """The rule as a person reads it (``every 60 s``, ``0 3 * * * Europe/Berlin``)."""


class Every:
    """Slots at the multiples of ``seconds`` (seconds since the epoch)."""

    __slots__ = ("seconds",)

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def index(self, at: float) -> int:
        """The last multiple at or before ``at``, as ``k`` of ``k * seconds`` (exact:
        the division alone may round across a multiple)."""
        k = math.floor(at / self.seconds)
        if (k + 1) * self.seconds <= at:
            return k + 1
        return k - 1 if k * self.seconds > at else k

    def next_slot(self, after: float) -> float:
        return (self.index(after) + 1) * self.seconds

    def last_slots(self, now: float, after: float, count: int) -> List[float]:
        last = self.index(now)
        first = max(self.index(after) + 1, last - count + 1)
        return [k * self.seconds for k in range(first, last + 1)]

    def describe(self) -> str:
        return f"every {self.seconds:g} s"


def check_zone(tz: Any) -> tzinfo:
    """The IANA time zone named ``tz`` (``zoneinfo``; some platforms need the
    ``tzdata`` package, which the extra ``fdbrecipes[cron]`` installs).

    Raises:
        TypeError or ValueError: not a str, or no time zone has that name.
    """
    from zoneinfo import ZoneInfo

    if type(tz) is not str:
        raise TypeError(f"tz must be the name of an IANA time zone (a str), not "
                        f"{type(tz).__name__}")
    try:
        return ZoneInfo(tz)
    except (KeyError, ValueError, OSError):  # ZoneInfoNotFoundError is a KeyError
        raise ValueError(f"tz: unknown time zone {tz!r} (give an IANA name such as "
                         "'Europe/Berlin' or 'UTC')") from None


def _cronsim() -> Any:
    try:
        import cronsim
    except ImportError as e:
        raise ImportError(f"{INSTALL_HINT} ({e})") from e
    return cronsim


def check_expression(expression: Any) -> str:
    """``expression`` with a nickname replaced by its fields, once ``cronsim``
    accepts it.

    Raises:
        TypeError or ValueError: not a str, or not a cron expression (the message names
            it and says why).
        ImportError: ``cronsim`` is not installed.
    """
    if type(expression) is not str:
        raise TypeError(f"cron must be a cron expression (a str), not "
                        f"{type(expression).__name__}")
    if len(expression) > MAX_EXPRESSION:
        raise ValueError(f"cron: at most {MAX_EXPRESSION} characters, got {len(expression)}")
    fields = NICKNAMES.get(expression.strip().lower(), expression).split()
    if len(fields) not in (5, 6):
        raise ValueError(f"cron: {expression!r} is not a cron expression: it needs 5 fields "
                         "(minute hour day month weekday), 6 with seconds first, or a "
                         f"nickname ({', '.join(NICKNAMES)})")
    cronsim = _cronsim()
    if len(fields) == 6 and not hasattr(cronsim.cronsim.Field, "SECOND"):
        raise ValueError(f"cron: {expression!r} has a seconds field, which needs cronsim "
                         ">= 2.7 (Python >= 3.10)")
    text = " ".join(fields)
    try:
        cronsim.CronSim(text, datetime(2000, 1, 1))
    except cronsim.CronSimError as e:
        raise ValueError(f"cron: {expression!r} is not a cron expression: {e}") from None
    return text


class Cron:
    """The slots of a cron expression in a time zone (see the module docstring)."""

    __slots__ = ("expression", "fields", "tz", "zone")

    def __init__(self, expression: str, tz: str) -> None:
        self.expression = expression
        self.fields = check_expression(expression)
        self.tz = tz
        self.zone = check_zone(tz)

    def describe(self) -> str:
        return f"{self.expression} {self.tz}"

    def next_slot(self, after: float) -> float:
        labels = _cronsim().CronSim(self.fields, self._first_after(after))
        for label in labels:
            slot = self._instant(label)
            if slot > after:
                return slot
        raise ValueError(f"cron {self.expression!r} matches no time after {after}")

    def last_slots(self, now: float, after: float, count: int) -> List[float]:
        found: List[float] = []
        if count <= 0 or now <= after:
            return found
        labels = _cronsim().CronSim(self.fields, self._last_up_to(now), reverse=True)
        try:
            for label in labels:
                slot = self._instant(label)
                if slot <= after:
                    break
                if not found or slot != found[-1]:  # skipped times: one slot at the shift
                    found.append(slot)
                    if len(found) == count:
                        break
        except StopIteration:  # no match in the 50 years before
            pass
        return found[::-1]

    # -- wall-clock times and instants -------------------------------------------------

    def _instant(self, label: datetime) -> float:
        """The slot of the wall-clock time ``label``: its instant, its first occurrence
        if the clock shows it twice, the shift if the clock skips it."""
        first = label.replace(tzinfo=self.zone, fold=0).astimezone(_UTC)
        if first.astimezone(self.zone).replace(tzinfo=None) == label:
            return first.timestamp()
        later = label.replace(tzinfo=self.zone, fold=1).astimezone(_UTC)  # before the gap
        return _shift(self.zone, later.timestamp(), first.timestamp())

    def _repeated_end(self, instant: float) -> Optional[datetime]:
        """When ``instant`` is in the second pass of a time the clock shows twice, the
        wall-clock time where that repetition ends; else None."""
        local = datetime.fromtimestamp(instant, self.zone)
        if not local.fold:
            return None
        label = local.replace(tzinfo=None, fold=0)
        earlier = label.replace(tzinfo=self.zone, fold=0)  # its first occurrence
        before, after = earlier.utcoffset(), local.utcoffset()
        if before is None or after is None or before == after:
            return None
        shift = _shift(self.zone, earlier.timestamp(), instant)
        return _EPOCH + timedelta(seconds=shift) + before

    def _first_after(self, after: float) -> datetime:
        """Where the forward evaluation starts: every time it finds after this one has
        its slot after ``after`` (times repeated before ``after`` fired at their first
        occurrence)."""
        end = self._repeated_end(after)
        if end is not None:
            return end - timedelta(microseconds=1)
        return datetime.fromtimestamp(after, self.zone).replace(tzinfo=None)

    def _last_up_to(self, now: float) -> datetime:
        """Where the backward evaluation starts: it finds the times from this one down,
        exactly those whose slot is at or before ``now``."""
        end = self._repeated_end(now)
        if end is not None:
            return end
        label = datetime.fromtimestamp(now, self.zone).replace(tzinfo=None)
        return label.replace(microsecond=0) + timedelta(microseconds=1)


def _offset(zone: tzinfo, instant: float) -> Optional[timedelta]:
    return datetime.fromtimestamp(instant, zone).utcoffset()


def _shift(zone: tzinfo, before: float, after: float) -> float:
    """The instant in ``(before, after]`` where ``zone``'s offset changes to the one it
    has at ``after`` (by bisection over whole seconds: zones shift on whole seconds)."""
    target = _offset(zone, after)
    low, high = math.floor(before), math.ceil(after)
    while high - low > 1:
        middle = (low + high) // 2
        if _offset(zone, middle) == target:
            high = middle
        else:
            low = middle
    return float(high)


def rule_of(cron: Optional[str], tz: Optional[str], every: Optional[float]) -> Rule:
    """The rule of a schedule stored with ``cron`` and ``tz``, or with ``every``."""
    if cron is not None:
        return Cron(cron, tz or "UTC")
    assert every is not None
    return Every(every)
