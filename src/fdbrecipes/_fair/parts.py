"""What a FairQueue is made of: its groups (each a queue, maybe over shards), how each
is served (its policy, checked), what a claim reads of one (its state), what the
counts of one say (its stats), and its leases.

The engine that uses them is :mod:`.engine`; the keys are
:class:`.._layout.FairLayout`.
"""

from __future__ import annotations

from typing import Any, List, NamedTuple, Optional, Tuple, Union

import fdb.tuple

from .._fdb import seconds_to_versions
from .._ordered.counts import QueueStats
from .._ordered.dead import DeadLetters
from .._ordered.engine import Ordered
from .._ordered.front import Front
from .._ordered.leases import Lease, Leases, lease_id, token_of
from .._ordered.listing import Listing
from .._ordered.shard_listing import ShardedDeadLetters, ShardedListing
from .._ordered.shards import Shard, ShardedEngine, ShardedLeases
from .._records.records import Records
from .._values import check_int, check_seconds, unpack_token

__all__ = ["FairLease", "FairStats", "Group", "GroupView", "Policy", "State", "check_group",
           "check_rate", "check_share", "fair_stats", "fair_token", "index_order",
           "parse_fair"]


class Policy(NamedTuple):
    """How a group is served: its ``share`` (weight), ``limit`` (items in flight at
    most; None: none) and ``rate`` (``(count, seconds)``: claims started per window at
    most; None: none)."""

    share: int
    limit: Optional[int]
    rate: Optional[Tuple[int, float]]


class FairLease(Lease):
    """A claimed item of a FairQueue (a :class:`fdbrecipes.Lease`, with its group)."""

    __slots__ = ("group",)

    def __init__(self, lease: Lease, group: Any) -> None:
        super().__init__(lease.value, lease.deliveries, lease.deadline,
                         fair_token(group, lease_id(lease)), lease.visible_since,
                         lease.claimed_at, lease.id)
        self.time_limit, self.cancel_requested = lease.time_limit, lease.cancel_requested
        self.group = group

    def __repr__(self) -> str:
        return (f"FairLease(group={self.group!r}, value={self.value!r}, "
                f"deliveries={self.deliveries}, deadline={self.deadline})")


def fair_token(group: Any, hold_id: bytes) -> bytes:
    """The token of a FairQueue lease: its group and its lease id."""
    token: bytes = fdb.tuple.pack(("fair", group, hold_id))
    return token


def parse_fair(lease: Any, name: str = "lease") -> Tuple[Any, bytes]:
    """(group, lease token in its group's queue) of a FairLease or its token.

    Raises:
        TypeError or ValueError: not a FairQueue lease or token.
    """
    token = lease.token if isinstance(lease, Lease) else lease
    parts = unpack_token(token, name, "a FairLease or its token (bytes)")
    if (parts is None or len(parts) != 3 or parts[0] != "fair"
            or type(parts[2]) is not bytes or type(parts[1]) not in (str, bytes)):
        raise ValueError(f"{name} is not a FairQueue lease token")
    return parts[1], token_of(parts[2])


class Group(NamedTuple):
    """One group's queue engine, its leases, dead letters and listings (over its
    shards, in a sharded FairQueue), and its shards."""

    engine: Union[Ordered, ShardedEngine]
    leases: Union[Leases, ShardedLeases]
    dead: Union[DeadLetters, ShardedDeadLetters]
    listing: Union[Listing, ShardedListing]
    parts: List[Shard]

    @property
    def records(self) -> Records:
        """The group's job records (every shard's are the same)."""
        return self.parts[0].engine.records


class State(NamedTuple):
    """What a group is now: its policy (and whether one was set), its front (two
    visible items at most, read with a conflict), its items in flight and its latest
    claim times."""

    policy: Policy
    front: Front
    in_flight: int
    times: Tuple[int, ...]
    own_policy: bool = False

    def slots(self) -> bool:
        return self.policy.limit is None or self.in_flight < self.policy.limit

    def room(self, now: int) -> bool:
        """Whether the rate allows a claim at ``now``."""
        rate = self.policy.rate
        if rate is None or len(self.times) < rate[0]:
            return True
        return self.times[-rate[0]] <= now - seconds_to_versions(rate[1])

    def eligible(self, now: int) -> bool:
        return bool(self.front.entries) and self.slots() and self.room(now)

    def after_claim(self, now: int) -> State:
        """The state once a claim took the first visible item at ``now``."""
        return State(self.policy, self.front._replace(entries=self.front.entries[1:]),
                     self.in_flight + 1, (*self.times, now), self.own_policy)

    def bare(self) -> bool:
        """Nothing visible, under a hold that ended, or in flight, and no policy set:
        the group may have nothing left at all (its delayed items and dead letters
        are not read here)."""
        return (not self.front.entries and not self.front.holds and self.in_flight <= 0
                and not self.own_policy)



def index_order(group: Any) -> bytes:
    """Sort key of groups: the order of their entries in the index of groups."""
    packed: bytes = fdb.tuple.pack((group,))
    return packed


def check_group(group: Any, name: str = "group") -> Any:
    """Return ``group`` if it is a short str or bytes (at most 255 characters or bytes,
    not empty).

    Raises:
        TypeError or ValueError: otherwise, naming ``name``.
    """
    if type(group) not in (str, bytes):
        raise TypeError(f"{name} must be a str or bytes, not {type(group).__name__}")
    if not 0 < len(group) <= 255:
        raise ValueError(f"{name} must be 1 to 255 characters (or bytes), got {len(group)}")
    return group


class FairStats(NamedTuple):
    """Where one group's items are, and how it is served.

    Attributes:
        visible, delayed, in_flight, dead: as in :class:`fdbrecipes.QueueStats`.
        limit: items in flight at most (None: no limit).
        share: its weight in the lottery.
    """

    visible: int
    delayed: int
    in_flight: int
    dead: int
    limit: Optional[int]
    share: int


class GroupView(NamedTuple):
    """A group's :class:`fdbrecipes.QueueStats` and the :class:`Policy` it is served
    by, as :meth:`FairOps.stats_of` reads them."""

    stats: QueueStats
    policy: Policy


def fair_stats(view: GroupView) -> FairStats:
    """The :class:`FairStats` of a group's stats and policy."""
    stats, policy = view
    return FairStats(stats.visible, stats.delayed, stats.in_flight, stats.dead,
                     policy.limit, policy.share)


def check_share(share: Any, name: str = "share") -> int:
    """A lottery share: an int in [1, 2**32]."""
    return check_int(share, name, low=1, high=2**32)


def check_rate(rate: Any) -> Optional[Tuple[int, float]]:
    """A rate: None, or ``(count, seconds)``."""
    if rate is None:
        return None
    if type(rate) is not tuple or len(rate) != 2:
        raise TypeError("rate must be None or a (count, seconds) tuple")
    return check_int(rate[0], "rate count", low=1, high=10_000), check_seconds(rate[1],
                                                                             "rate seconds")
