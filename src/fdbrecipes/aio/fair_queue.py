"""AsyncFairQueue: :class:`fdbrecipes.FairQueue` for asyncio code.

The same constructor arguments and the same key layout as FairQueue; every method is
an ``async def`` twin of the sync method of the same name, with its docstring, awaiting
the same operation (:class:`fdbrecipes._ops.fair.FairOps`).
"""

from __future__ import annotations

from typing import Any, AsyncContextManager, Dict, Iterable, List, Optional, Tuple, Union

from .._drivers.awaiting import drive
from .._face import twin
from .._fair.parts import FairLease, FairStats, Policy
from .._fdb import Transactor
from .._ops.fair import FairOps
from .._ordered.dead import DeadLetter
from .._ordered.listing import DelayedItem, LeaseInfo
from .._ordered.paging import PendingItem, Row
from .._records.records import JobError, JobRecord
from .._values import Value
from ..fair_queue import FairBase, FairQueue, Group
from ._heartbeat import kept_alive
from ._jobs_face import AsyncJobMethods

__all__ = ["AsyncFairQueue"]


@twin(FairQueue)
class AsyncFairQueue(FairBase, AsyncJobMethods[FairOps]):
    """A queue per group, served by weighted lottery, for asyncio code (see
    :class:`fdbrecipes.FairQueue`, and :class:`fdbrecipes.aio.AsyncQueue` for what
    ``tr`` and cancellation mean here: a claim cancelled while its commit is in flight
    gives its items back once it landed)."""

    async def set_group(self, tr: Transactor, group: Group, *, share: Optional[int] = None,
                        limit: Optional[int] = None,
                        rate: Optional[Tuple[int, float]] = None) -> None:
        await drive(self._ops.set_group(tr, group, share, limit, rate))

    async def group_policy(self, tr: Transactor, group: Group) -> Policy:
        return await drive(self._ops.group_policy(tr, group))

    async def lottery(self, tr: Transactor) -> Dict[Group, int]:
        return await drive(self._ops.lottery(tr))

    async def groups(self, tr: Transactor, limit: Optional[int] = None, *,
                     after: Optional[Group] = None) -> List[Group]:
        return await drive(self._ops.groups(tr, limit, after))

    async def push(self, tr: Transactor, value: Value, *, group: Group,
                   id: Optional[bytes] = None, delay: Optional[float] = None,
                   time_limit: Optional[float] = None) -> Optional[bytes]:
        request = self._ops.request(group, value, id, delay, time_limit)
        await drive(self._ops.push(tr, request))
        return request.request.item_id(0)

    async def push_many(self, tr: Transactor, values: Iterable[Value], *, group: Group,
                        delay: Optional[float] = None,
                        time_limit: Optional[float] = None) -> List[bytes]:
        request = self._ops.requests(group, values, delay, time_limit)
        await drive(self._ops.push(tr, request))
        return list(request.request.ids)

    async def claim(self, tr: Transactor, lease_seconds: float) -> Optional[FairLease]:
        return await drive(self._ops.claim(tr, lease_seconds))

    async def claim_many(self, tr: Transactor, n: int,
                         lease_seconds: float) -> List[FairLease]:
        return await drive(self._ops.claim_many(tr, n, lease_seconds))

    def claimed(self, db: Any, lease_seconds: float, *, timeout: Optional[float] = None,
                release_delay: Optional[float] = None
                ) -> AsyncContextManager[Optional[FairLease]]:
        claim, seconds = self._ops.claiming(db, lease_seconds, timeout, release_delay)
        return kept_alive(self, db, claim, seconds, release_delay)

    async def claim_wait(self, db: Any, lease_seconds: float,
                         timeout: Optional[float] = None) -> Optional[FairLease]:
        return await drive(self._ops.claim_wait(db, lease_seconds, timeout))

    async def wait(self, db: Any, timeout: Optional[float] = None) -> bool:
        return await drive(self._ops.wait(db, timeout))

    async def ack(self, tr: Transactor, lease: Union[FairLease, bytes]) -> None:
        await drive(self._ops.ack(tr, lease))

    async def ack_many(self, tr: Transactor,
                       leases: Iterable[Union[FairLease, bytes]]) -> List[bool]:
        return await drive(self._ops.ack_many(tr, leases))

    async def extend(self, tr: Transactor, lease: Union[FairLease, bytes],
                     seconds: float) -> FairLease:
        return await drive(self._ops.extend(tr, lease, seconds))

    async def extend_many(self, tr: Transactor, leases: Iterable[Union[FairLease, bytes]],
                          seconds: float) -> List[Optional[FairLease]]:
        return await drive(self._ops.extend_many(tr, leases, seconds))

    async def release(self, tr: Transactor, lease: Union[FairLease, bytes], *,
                      delay: Optional[float] = None, count: bool = True,
                      error: Optional[JobError] = None) -> bool:
        return await drive(self._ops.release(tr, lease, delay, count, error))

    async def bury(self, tr: Transactor, lease: Union[FairLease, bytes],
                   reason: Optional[str] = None, *, error: Optional[JobError] = None) -> bool:
        return await drive(self._ops.bury(tr, lease, reason, error))

    async def job(self, tr: Transactor, id: bytes, *, group: Group) -> Optional[JobRecord]:
        return await drive(self._ops.job(tr, group, id))

    async def result(self, db: Any, id: bytes, *, group: Group,
                     timeout: Optional[float] = None) -> Any:
        return await drive(self._ops.result(db, group, id, timeout))

    async def cancel(self, tr: Transactor, id: bytes, *, group: Group) -> Optional[str]:
        return await drive(self._ops.cancel(tr, group, id))

    async def stats(self, tr: Transactor, group: Optional[Group] = None
                    ) -> Union[FairStats, Dict[Group, FairStats]]:
        if group is not None:
            return await drive(self._ops.group_stats(tr, group))
        return await drive(self._ops.all_stats(tr))

    async def peek(self, tr: Transactor, group: Group) -> Optional[Value]:
        return await drive(self._ops.peek(tr, group))

    async def items(self, tr: Transactor, group: Group,
                    limit: Optional[int] = None) -> List[Value]:
        return await drive(self._ops.items(tr, group, limit))

    async def pending(self, tr: Transactor, group: Group, limit: Optional[int] = None, *,
                      after: Optional[bytes] = None) -> List[PendingItem]:
        return await drive(self._ops.pending(tr, group, limit, after))

    async def leases(self, tr: Transactor, group: Group, limit: Optional[int] = None, *,
                     after: Optional[bytes] = None) -> List[LeaseInfo]:
        return await drive(self._ops.leases(tr, group, limit, after))

    async def delayed(self, tr: Transactor, group: Group, limit: Optional[int] = None, *,
                      after: Optional[bytes] = None) -> List[DelayedItem]:
        return await drive(self._ops.delayed(tr, group, limit, after))

    async def remove(self, tr: Transactor, *, group: Group, id: bytes) -> Optional[Value]:
        return await drive(self._ops.remove(tr, group, id))

    async def lookup(self, tr: Transactor, group: Group, token: bytes) -> Optional[Row]:
        return await drive(self._ops.lookup(tr, group, token))

    async def remove_many(self, tr: Transactor, group: Group,
                          tokens: Iterable[bytes]) -> List[Optional[Value]]:
        return await drive(self._ops.remove_many(tr, group, tokens))

    async def dead(self, tr: Transactor, group: Group, limit: Optional[int] = None, *,
                   after: Optional[bytes] = None) -> List[DeadLetter]:
        return await drive(self._ops.dead(tr, group, limit, after))

    async def requeue_dead(self, tr: Transactor, group: Group, limit: Optional[int] = None, *,
                           tokens: Optional[Iterable[bytes]] = None) -> int:
        return await drive(self._ops.requeue_dead(tr, group, limit, tokens))

    async def purge_dead(self, tr: Transactor, group: Group, *,
                         tokens: Optional[Iterable[bytes]] = None) -> int:
        return await drive(self._ops.purge_dead(tr, group, tokens))

    async def clear(self, tr: Transactor) -> None:
        await drive(self._ops.clear(tr))
