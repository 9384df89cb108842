"""Where a key range lives and where writes land, on a real cluster.

FoundationDB cuts the key space into shards; each shard is held by a team of storage
servers (as many as the redundancy keeps copies).  Everything pushed to one key range
(a queue's items, say) goes to the team holding the shard there, until data
distribution splits it.  These helpers measure that, for tests::

    from fdbrecipes.testing.placement import shards_of, storage_input_bytes, landed

    before = storage_input_bytes(db)
    q.push_many(db, items)
    print(shards_of(db, q_subspace))                  # [Shard(begin, end, team)]
    print(landed(before, storage_input_bytes(db)))    # bytes received, by process

They read the cluster's shard map (``fdb.locality``: ``\\xff/keyServers``) and its
status JSON (``\\xff\\xff/status/json``): nothing is written.  The fdb bindings are
imported when a function runs (an API version must be selected by then).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Mapping, Set, Tuple

from .._local.status import parse_status, plain_address, storage_counters

__all__ = ["Shard", "StorageInput", "landed", "shards", "shards_of", "status_json",
           "storage_input", "storage_input_bytes", "teams"]


@dataclass(frozen=True)
class Shard:
    """A piece of the key range asked about, and who holds it.

    Attributes:
        begin, end: the piece, ``[begin, end)``, clipped to the range asked about.
        team: the addresses (``"127.0.0.1:port"``) of the storage servers holding it,
            sorted.
    """

    begin: bytes
    end: bytes
    team: Tuple[str, ...]


def shards(db: Any, begin: bytes, end: bytes) -> List[Shard]:
    """The shards of ``[begin, end)``, in key order, each with its team.

    Reads the shard boundaries (``fdb.locality.get_boundary_keys``) and, in one
    transaction, every shard's storage servers side by side
    (``fdb.locality.get_addresses_for_key``; given the Database, that function lets
    its transaction go as it returns, and the answer, not back yet, fails with
    ``transaction_cancelled``).  Cost: the boundaries, then 1 round trip.

    Raises:
        ValueError: ``begin`` is not before ``end``.
    """
    import fdb
    import fdb.locality

    if not begin < end:
        raise ValueError(f"begin must be before end, got {begin!r} and {end!r}")
    starts = [begin] + [bytes(k) for k in fdb.locality.get_boundary_keys(db, begin, end)
                        if bytes(k) > begin]
    tr = db.create_transaction()
    while True:
        try:
            asked = [fdb.locality.get_addresses_for_key(tr, start) for start in starts]
            found = [tuple(sorted({plain_address(bytes(a).decode()) for a in addresses.wait()}))
                     for addresses in asked]
            break
        except fdb.FDBError as e:
            tr.on_error(e).wait()
    return [Shard(start, stop, team)
            for start, stop, team in zip(starts, [*starts[1:], end], found)]


def shards_of(db: Any, subspace: Any) -> List[Shard]:
    """:func:`shards` of everything under ``subspace`` (an ``fdb.Subspace``)."""
    r = subspace.range()
    return shards(db, r.start, r.stop)


def teams(found: Iterable[Shard]) -> Set[Tuple[str, ...]]:
    """The distinct teams holding ``found``."""
    return {shard.team for shard in found}


def status_json(db: Any) -> Dict[str, Any]:
    """The cluster's status JSON, read through the client (one read of
    ``\\xff\\xff/status/json``)."""
    text = db[b"\xff\xff/status/json"]
    return parse_status(bytes(text).decode())


def storage_input_bytes(db: Any) -> Dict[str, int]:
    """Bytes of mutations each storage process has received so far (status JSON's
    ``input_bytes`` counter of its storage roles), by address.  The counters are
    cumulative from each process's start and the status is a few seconds stale at
    most: compare two readings taken around a workload with :func:`landed` (and see
    :func:`storage_input` for how far a reading goes)."""
    return storage_input(db).bytes


@dataclass(frozen=True)
class StorageInput:
    """The storage processes' ``input_bytes`` counters, and how far they go.

    Attributes:
        bytes: bytes of mutations each storage process has received so far, by
            address (as :func:`storage_input_bytes`).
        version: every mutation committed at or before this version is counted (the
            lowest ``data_version`` the storage processes reported with their
            counters).  The counters are reported every few seconds: to count a
            workload exactly, take a reading whose version is at least a read version
            taken before it starts, run it, and poll until a reading's version reaches
            a read version taken after it ends.
    """

    bytes: Dict[str, int]
    version: int


def storage_input(db: Any) -> StorageInput:
    """The storage processes' :class:`StorageInput` (one read of status JSON)."""
    counters = storage_counters(status_json(db))
    return StorageInput({address: c.input_bytes for address, c in counters.items()},
                        min((c.version for c in counters.values()), default=0))


def landed(before: Mapping[str, int], after: Mapping[str, int]) -> Dict[str, int]:
    """What each storage process received between two :func:`storage_input_bytes`
    readings (a process that restarted in between counts from 0 again)."""
    return {address: count - before.get(address, 0) if count >= before.get(address, 0)
            else count for address, count in after.items()}
