"""Who may do what on the dashboard: an :class:`Access` per request.

``create_app(..., access=...)`` takes one :class:`Access` for every request
(:data:`FULL`, :data:`READ_ONLY`, or rights of your own), or a function of the request
(a ``starlette.requests.Request``) returning one, or None for a request that may
see nothing (every page and action answers 403), called once per request: the
application's own login decides.  A read-only access sees every page, is shown no
action, and any action it posts is refused with 403.  ``who`` names the person in the
audit log.  Importing this module needs neither Starlette nor ``libfdb_c``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, FrozenSet, Iterable, Optional, Union

__all__ = ["ACTIONS", "FULL", "READ_ONLY", "Access", "AccessRule", "access_of"]

#: Every action the dashboard offers: requeue dead letters, purge them, remove a
#: pending job by id, cancel a job, quiet a worker, stop a worker, pause a structure,
#: resume it, set a FairQueue group's policy, give items in flight back (release: they
#: are delivered again) or delete them (ack), pause a stored schedule, resume it, ask
#: for one of its jobs now, set a stored limit or delete it, cancel a workflow.
ACTIONS = ("requeue", "purge", "remove", "cancel", "quiet", "stop", "pause", "resume",
           "policy", "release", "ack", "pause-schedule", "resume-schedule", "run-now",
           "set-limit", "delete-limit", "cancel-workflow")


@dataclass(frozen=True)
class Access:
    """What one request may do: the ``actions`` it is allowed (names of
    :data:`ACTIONS`), and ``who`` makes it (for the audit log)."""

    actions: FrozenSet[str] = frozenset()
    who: str = "anonymous"

    def __post_init__(self) -> None:
        if not isinstance(self.actions, frozenset):
            raise TypeError(f"actions must be a frozenset, not {type(self.actions).__name__}")
        unknown = sorted(set(self.actions) - set(ACTIONS))
        if unknown:
            raise ValueError(f"actions: unknown {unknown} (known: {', '.join(ACTIONS)})")
        if not isinstance(self.who, str):
            raise TypeError(f"who must be a str, not {type(self.who).__name__}")

    @classmethod
    def allowing(cls, actions: Iterable[str], who: str = "anonymous") -> Access:
        """An access allowing ``actions`` (any iterable of names of :data:`ACTIONS`)."""
        return cls(frozenset(actions), who)

    def allows(self, action: str) -> bool:
        """Whether this access may do ``action``."""
        return action in self.actions

    @property
    def read_only(self) -> bool:
        """True when no action is allowed."""
        return not self.actions


#: Every action allowed.
FULL = Access(frozenset(ACTIONS))
#: Look only.
READ_ONLY = Access()

#: What ``create_app(access=...)`` takes: one Access, or a function of the request
#: returning one (None: this request may see nothing).
AccessRule = Union[Access, Callable[[Any], Optional[Access]]]


def access_of(rule: AccessRule, request: Any) -> Optional[Access]:
    """The access ``rule`` gives ``request``; None when its function denies it all.

    Raises:
        TypeError: the rule's function returned something else than an Access or None.
    """
    if isinstance(rule, Access):
        return rule
    found = rule(request)
    if found is not None and not isinstance(found, Access):
        raise TypeError(f"the access function returned {type(found).__name__}, not an "
                        "Access or None")
    return found
