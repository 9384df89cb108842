"""Operations run side by side over the shards of one structure (no server needed):
each part has a fork of the attempt, and what the parts did comes back to it: their
notes, their undos (combined into one), whether they were all idle; their reads go out
together.  See ``fdbrecipes._attempt.side_by_side``."""

from __future__ import annotations

from typing import Any, List

from fdbrecipes._attempt import Attempt, side_by_side, undo_all


class Tr:
    """What an Attempt asks of a transaction: a read version (a stand-in future)."""

    def get_read_version(self) -> str:
        return "version"


def part(tr: Any, attempt: Attempt, name: str, waits: List[str], idle: bool) -> Any:
    """An operation that waits for ``waits`` (stand-in futures), notes ``name``, says
    how to undo itself and whether it was idle."""
    yield from waits
    attempt.note(name)
    attempt.undo = (part, (name, [], True))
    attempt.idle = idle
    return name


def drive(op: Any) -> Any:
    """Run ``op``, sending nothing back; the futures it waited for, and its result."""
    seen = []
    try:
        while True:
            seen.append(op.send(None))
    except StopIteration as stop:
        return seen, stop.value


def test_the_parts_wait_together_and_come_back_to_the_attempt() -> None:
    tr = Tr()
    attempt = Attempt(tr)
    calls = [(part, ("a", ["a1", "a2"], True)), (part, ("b", ["b1"], False))]
    seen, results = drive(side_by_side(tr, attempt, calls))
    assert results == ["a", "b"]
    assert seen == ["a1", "b1", "a2"]  # one step of each part at a time
    assert attempt.notes == ["a", "b"] and attempt.idle is False
    undo_op, (undos,) = attempt.undo  # type: ignore[misc]
    assert undo_op is undo_all and [u[1][0] for u in undos] == ["a", "b"]
    again = Attempt(tr)
    seen, _ = drive(undo_all(tr, again, undos))
    assert seen == [] and again.notes == ["a", "b"] and again.idle is True


def test_one_undo_stays_as_it_is_and_all_idle_parts_leave_the_attempt_idle() -> None:
    tr = Tr()
    attempt = Attempt(tr)
    drive(side_by_side(tr, attempt, [(part, ("only", [], True))]))
    assert attempt.undo == (part, ("only", [], True)) and attempt.idle is True
    fork = attempt.fork()
    assert fork.notes == [] and fork.undo is None and not fork.idle
    assert fork.pinned is attempt.pinned
