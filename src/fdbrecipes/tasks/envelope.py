"""What a task's item holds: its task's name, its arguments as the app's codec made
them, and the trace context of the call that deferred it.

The item's value is a tuple, ``("fdbrecipes.task/1", name, payload, trace)``: the tag
says it is a task's; ``payload`` is the codec's bytes (encrypted ones, with
:class:`.codecs.Encrypted`); ``trace`` the W3C trace context headers (``traceparent``,
``tracestate``) as a tuple of pairs, or None.  The name and the trace context are in
the clear: a worker names a job it cannot decode, and a dashboard shows what task an
item is for without its key.  A call of a task with limits has a fifth element, the
limits it carries (:mod:`.limiting`), also in the clear: a claim reads them without
the codec.  Pure computation: no FoundationDB.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Optional, Tuple

__all__ = ["TAG", "Envelope", "Trace", "open_envelope", "seal"]

#: The first element of a task's item.
TAG = "fdbrecipes.task/1"
#: W3C trace context headers, as (name, value) pairs.
Trace = Tuple[Tuple[str, str], ...]


class Envelope(NamedTuple):
    """A task's item, opened: its task's name, its arguments' bytes, its trace
    context."""

    name: str
    payload: bytes
    trace: Optional[Trace]


def seal(name: str, payload: bytes, trace: Optional[Trace],
         carried: Tuple[Any, ...] = ()) -> Tuple[Any, ...]:
    """The value of the item of a call of task ``name`` (``carried``: the limits it
    carries, if any)."""
    return (TAG, name, payload, trace, carried) if carried else (TAG, name, payload, trace)


def open_envelope(value: Any) -> Envelope:
    """The envelope ``value`` (an item's value) is.

    Raises:
        ValueError: it is not a task's item (saying what it is instead).
    """
    if (type(value) is not tuple or len(value) not in (4, 5) or value[0] != TAG
            or type(value[1]) is not str or type(value[2]) is not bytes):
        raise ValueError(f"not a task's item: {value!r:.80}")
    trace = value[3]
    if trace is not None and not (type(trace) is tuple and all(
            type(p) is tuple and len(p) == 2 and all(type(x) is str for x in p)
            for p in trace)):
        trace = None  # a malformed trace context is dropped, not fatal
    return Envelope(value[1], value[2], trace)
