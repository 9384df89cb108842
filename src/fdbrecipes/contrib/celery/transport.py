"""A kombu transport on fdbrecipes' structures.

Use it from Celery with ``broker_url = "fdbrecipes://"`` and ``broker_transport =
"fdbrecipes.contrib.celery:Transport"`` (options in ``broker_transport_options``: see
:class:`TransportSettings`).  What it does, in kombu's terms:

* each queue is a :class:`fdbrecipes.Queue`, or a :class:`fdbrecipes.PriorityQueue`
  when declared with ``x-max-priority`` (Celery's ``task_queue_max_priority``); the
  higher a message's priority, the sooner it is delivered, as on RabbitMQ;
* a consumer that acks (Celery's tasks) *claims*: taking a message and its lease is one
  transaction, so no crash can lose a message between the two.  The lease is extended
  by the process's heartbeat while the message is held; ``basic_ack`` acks it,
  ``basic_reject`` releases it (``requeue``) or makes it a dead letter, and a closing
  channel gives back what it holds.  A worker killed outright leaves leases that
  expire: its messages are delivered again after ``lease_seconds``, never before
  (after ``max_deliveries`` such deliveries, 20 by default, a message is a dead
  letter);
* a message that is not a kombu message (not JSON, not an object, a body kombu cannot
  decode) is a dead letter at once, its reason naming the problem; the rest of its
  claim is delivered as if it had not been there;
* a message with an ``eta`` header (Celery's ETA and countdown) is pushed delayed
  until then: no worker holds it meanwhile, so no lease can expire under it;
* waiting for messages blocks on FoundationDB watches of the consumed queues (one
  private asyncio loop per connection), woken at once by a push from any process;
* exchanges and bindings live in the cluster (:mod:`._routing`), so fanout (remote
  control) and topic (events) exchanges reach every process's queues.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import socket
import time
from collections import defaultdict, deque
from functools import partial
from queue import Empty
from typing import Any, Deque, Dict, Iterable, List, Optional, Set, Tuple

from amqp.protocol import queue_declare_ok_t
from kombu.exceptions import ChannelError
from kombu.transport import virtual
from kombu.transport.base import to_rabbitmq_queue_arguments
from kombu.utils.json import dumps, loads
from kombu.utils.uuid import uuid

from ... import __version__, _kinds
from .._keeper import Held
from .._queues import FIFO, PRIORITY, Delivery, Undecodable
from ._routing import Binding, Rows
from ._settings import TransportSettings
from ._shared import Outgoing, Shared, shared

__all__ = ["MAX_ETA_SECONDS", "RECHECK_SECONDS", "Channel", "QoS", "Transport",
           "TransportSettings", "eta_delay", "kombu_payload"]


#: While a connection delivers from some queues, seconds before it asks again a queue
#: it found empty (a claim is a transaction: asking an empty remote-control queue
#: before every task would halve a worker's rate).
RECHECK_SECONDS = 0.05

#: The longest delay an ETA makes (ten years); a later ETA waits this long.
MAX_ETA_SECONDS = 10 * 365 * 24 * 3600.0


def eta_delay(headers: Any, now: Optional[datetime.datetime] = None) -> Optional[float]:
    """Seconds until the ``eta`` header (ISO 8601, as Celery writes it) of a message's
    ``headers``, at most :data:`MAX_ETA_SECONDS`; None when there is none, it cannot
    be read, or it has passed.  A naive time is taken as local time (Celery writes
    aware ones)."""
    eta = headers.get("eta") if isinstance(headers, dict) else None
    if not isinstance(eta, str):
        return None
    try:
        when = datetime.datetime.fromisoformat(eta)
    except ValueError:
        return None
    if now is None:
        now = datetime.datetime.now(datetime.timezone.utc if when.tzinfo else None)
    seconds = (when - now).total_seconds()
    return min(seconds, MAX_ETA_SECONDS) if seconds > 0 else None


def kombu_payload(raw: bytes) -> Dict[str, Any]:
    """The kombu message ``raw`` holds (JSON, as :meth:`Channel._outgoing` writes it): an
    object whose ``properties`` and their ``delivery_info`` are objects (made empty
    when absent).

    Raises:
        Undecodable: it is not (its text says why).
    """
    try:
        payload = loads(raw)
    except Exception as e:  # not UTF-8, not JSON, too deep, a bad __type__ marker...
        raise Undecodable.of(e) from e
    if not isinstance(payload, dict):
        raise Undecodable(f"not a kombu message: {_json_kind(payload)}, not an object")
    properties = payload.setdefault("properties", {})
    if not isinstance(properties, dict):
        raise Undecodable(f"not a kombu message: its properties are "
                          f"{_json_kind(properties)}, not an object")
    info = properties.setdefault("delivery_info", {})
    if not isinstance(info, dict):
        raise Undecodable(f"not a kombu message: its delivery_info is "
                          f"{_json_kind(info)}, not an object")
    return payload


def _json_kind(value: Any) -> str:
    """What a decoded JSON value is, in JSON's words ("a JSON array")."""
    if value is None:
        return "a JSON null"
    if isinstance(value, bool):
        return "a JSON boolean"
    if isinstance(value, (int, float)):
        return "a JSON number"
    if isinstance(value, str):
        return "a JSON string"
    return "a JSON array" if isinstance(value, list) else "a JSON object"


class QoS(virtual.QoS):
    """kombu's QoS with acks by lease: ack acks, reject releases or buries, and
    unacked messages are given back (no delivery counted) when the channel closes."""

    def __init__(self, channel: Any, prefetch_count: int = 0) -> None:
        super().__init__(channel, prefetch_count)
        self._shared: Shared = channel.shared  # kept: acks may come after the channel closed

    def ack(self, delivery_tag: str) -> None:
        held = self._shared.keeper.take(delivery_tag)
        if held is not None:
            self._shared.acker.ack(held)  # committed in a batch, by the acker's thread
        super().ack(delivery_tag)
        self.channel.capacity_freed()

    def reject(self, delivery_tag: str, requeue: bool = False) -> None:
        held = self._shared.keeper.take(delivery_tag)
        if held is not None:
            if requeue:
                self._shared.queues.release(held, count=True)
            else:
                self._shared.queues.bury(held, "rejected by the consumer (basic_reject)")
        self._quick_ack(delivery_tag)
        self.channel.capacity_freed()

    def restore_unacked(self) -> List[Tuple[BaseException, Any]]:
        """Give back every delivered, unacked message, at its place, visible now and
        with no delivery counted (a channel closing, a worker shutting down)."""
        self._flush()
        errors: List[Tuple[BaseException, Any]] = []
        while self._delivered:
            try:
                tag, message = self._delivered.popitem()
            except KeyError:  # pragma: no cover (another thread emptied it)
                break
            held = self._shared.keeper.take(tag)
            if held is None:
                continue
            try:
                self._shared.queues.release(held, count=False)
            except Exception as exc:
                errors.append((exc, message))
        return errors


class Channel(virtual.Channel):
    """A kombu channel whose queues, exchanges and bindings are in FoundationDB."""

    QoS = QoS
    supports_fanout = True
    do_restore = True
    min_priority = 0
    max_priority = 255

    def __init__(self, connection: Any, **kwargs: Any) -> None:
        super().__init__(connection, **kwargs)
        self._buffers: Dict[str, Deque[Tuple[Dict[str, Any], str]]] = defaultdict(deque)
        self._no_ack: Set[str] = set()
        self._empty_until: Dict[str, float] = {}

    @property
    def shared(self) -> Shared:
        """The process's view of the transport's directory."""
        return self.connection.shared  # type: ignore[no-any-return]

    def capacity_freed(self) -> None:
        """A delivered message was settled: a consumer waiting for prefetch room
        may take more."""
        transport = self.connection
        if transport is not None:
            transport.notify()

    # -- exchanges -----------------------------------------------------------------------

    def exchange_declare(self, exchange: Optional[str] = None, type: str = "direct",
                         durable: bool = False, auto_delete: bool = False,
                         arguments: Any = None, nowait: bool = False,
                         passive: bool = False) -> None:
        type = type or "direct"
        exchange = exchange or f"amq.{type}"
        if passive:
            if (exchange not in self.state.exchanges
                    and self.shared.routing.exchange_type(exchange) is None):
                raise ChannelError(f"NOT_FOUND - no exchange {exchange!r}", (50, 10),
                                   "Channel.exchange_declare", "404")
            return
        super().exchange_declare(exchange, type, durable, auto_delete, arguments, nowait)
        self.shared.routing.declare_exchange(exchange, type)

    def exchange_delete(self, exchange: str, if_unused: bool = False,
                        nowait: bool = False) -> None:
        self.shared.delete_exchange(exchange)
        self.state.exchanges.pop(exchange, None)

    def typeof(self, exchange: str, default: str = "direct") -> Any:
        try:
            type_ = self.state.exchanges[exchange]["type"]
        except KeyError:
            type_ = self.shared.routing.exchange_type(exchange) or default
        return self.exchange_types[type_]

    def get_table(self, exchange: str) -> List[Tuple[str, Any, str]]:
        return self._prepared(self.typeof(exchange), exchange,
                              self.shared.routing.table(exchange))

    def _prepared(self, type_: Any, exchange: str, rows: Rows) -> List[Tuple[str, Any, str]]:
        return [type_.prepare_bind(queue, exchange, key, None) for key, queue in rows]

    def basic_publish(self, message: Dict[str, Any], exchange: str, routing_key: str,
                      **kwargs: Any) -> None:
        """Publish ``message``: to the queue named ``routing_key`` (no exchange), or
        to the queues ``exchange``'s bindings route it to (as kombu's exchange types
        do: direct, topic, fanout), checked and pushed in one transaction (see
        :meth:`Shared.publish`).  Cost: 1 commit."""
        if not exchange:
            super().basic_publish(message, exchange, routing_key, **kwargs)
            return
        self._inplace_augment_message(message, exchange, routing_key)
        pick = partial(self._route, self.typeof(exchange), exchange, routing_key)
        self.shared.publish(exchange, pick, self._outgoing(message))

    def _route(self, type_: Any, exchange: str, routing_key: str, rows: Rows) -> List[str]:
        """The queues ``type_`` routes ``routing_key`` to among ``rows`` (unroutable:
        none, as kombu's lookup without a dead-letter queue), in order."""
        found = type_.lookup(self._prepared(type_, exchange, rows), exchange, routing_key,
                             None)
        return sorted(q for q in found if q and q != self.deadletter_queue)

    # -- queues --------------------------------------------------------------------------

    def prepare_queue_arguments(self, arguments: Any, **kwargs: Any) -> Any:
        """kombu's queue options as RabbitMQ's arguments (``max_priority`` as
        ``x-max-priority``, ``expires`` as ``x-expires``...), which the queue's
        declaration reads."""
        return to_rabbitmq_queue_arguments(arguments or {}, **kwargs)

    def _new_queue(self, queue: str, **kwargs: Any) -> None:
        arguments = kwargs.get("arguments") or {}
        kind = PRIORITY if arguments.get("x-max-priority") else FIFO
        expires: Optional[float] = None
        if arguments.get("x-expires"):
            expires = float(arguments["x-expires"]) / 1000
        elif kwargs.get("auto_delete"):
            expires = self.shared.settings.auto_delete_expires
        try:
            self.shared.queues.declare(queue, kind, expires)
        except ValueError as e:
            raise ChannelError(f"PRECONDITION_FAILED - {e}", (50, 10),
                               "Channel.queue_declare", "406") from None
        if kwargs.get("auto_delete"):
            self.shared.auto_delete(queue)

    def queue_declare(self, queue: Optional[str] = None, passive: bool = False,
                      **kwargs: Any) -> Any:
        """Declare ``queue`` (see :meth:`_new_queue`); its message count (visible and
        delayed) and 0 consumers.  ``passive``: only ask, as RabbitMQ answers it: an
        existing queue's count whatever its kind and arguments, nothing declared;
        ``ChannelError`` ``NOT_FOUND`` for a missing one (kombu's).  Cost: 2 reads (the
        queue's meta key, its stats), after the declaration's round trip if not
        ``passive``."""
        if passive and queue and self._has_queue(queue):
            return queue_declare_ok_t(queue, self.shared.queues.size(queue), 0)
        return super().queue_declare(queue, passive, **kwargs)

    def _has_queue(self, queue: str, **kwargs: Any) -> bool:
        return self.shared.queues.exists(queue)

    def _size(self, queue: str) -> int:
        return self.shared.queues.size(queue) if self._has_queue(queue) else 0

    def _purge(self, queue: str) -> int:
        return self.shared.queues.purge(queue) if self._has_queue(queue) else 0

    def queue_delete(self, queue: str, if_unused: bool = False, if_empty: bool = False,
                     **kwargs: Any) -> None:
        if if_empty and self._size(queue):
            return
        self._give_back(self._buffers.pop(queue, ()))
        self.shared.delete_queue(queue)

    def queue_bind(self, queue: str, exchange: Optional[str] = None, routing_key: str = "",
                   arguments: Any = None, **kwargs: Any) -> None:
        self.shared.routing.bind(Binding(exchange or "amq.direct", queue, routing_key))

    def queue_unbind(self, queue: str, exchange: Optional[str] = None, routing_key: str = "",
                     arguments: Any = None, **kwargs: Any) -> None:
        self.shared.routing.unbind(Binding(exchange or "amq.direct", queue, routing_key))

    # -- publishing ----------------------------------------------------------------------

    def _put(self, queue: str, message: Dict[str, Any], **kwargs: Any) -> None:
        self.shared.put(queue, self._outgoing(message))

    def _outgoing(self, message: Dict[str, Any]) -> Outgoing:
        """``message`` as pushed: kombu's JSON, its priority, its ETA as a delay."""
        return Outgoing(dumps(message).encode(), self._get_message_priority(message),
                        eta_delay(message.get("headers")))

    # -- consuming -----------------------------------------------------------------------

    def basic_consume(self, queue: str, no_ack: bool, callback: Any, consumer_tag: str,
                      **kwargs: Any) -> Any:
        if no_ack:
            self._no_ack.add(queue)
        self.shared.consuming(queue)
        return super().basic_consume(queue, no_ack, callback, consumer_tag, **kwargs)

    def basic_cancel(self, consumer_tag: str) -> Any:
        queue = self._tag_to_queue.get(consumer_tag) if consumer_tag in self._consumers else None
        result = super().basic_cancel(consumer_tag)
        if queue is not None:
            self._give_back(self._buffers.pop(queue, ()))
            if self.shared.stopped_consuming(queue):
                self.shared.delete_queue(queue)
        return result

    def basic_get(self, queue: str, no_ack: bool = False, **kwargs: Any) -> Any:
        taken = self._take(queue, 1, not no_ack)
        if not taken:
            return None
        message = self.Message(taken[0][0], channel=self)
        if not no_ack:
            self.qos.append(message, message.delivery_tag)
        return message

    def _get(self, queue: str, timeout: Optional[float] = None) -> Dict[str, Any]:
        """The next message of ``queue``: from what the last claim took, else from a
        claim of up to ``batch`` (within the prefetch window).  A queue found empty is
        not asked again for :data:`RECHECK_SECONDS` while other queues deliver (when
        none does, the connection waits on every queue's watch and asks them all)."""
        buffered = self._buffers[queue]
        if not buffered and time.monotonic() >= self._empty_until.get(queue, 0.0):
            leased = queue not in self._no_ack
            n = self._claim_size() if leased else self.shared.settings.batch
            if n > 0:
                buffered.extend(self._take(queue, n, leased))
                if not buffered:
                    self._empty_until[queue] = time.monotonic() + RECHECK_SECONDS
        if not buffered:
            raise Empty()
        return buffered.popleft()[0]

    def _claim_size(self) -> int:
        """How many messages a claim for this channel takes now: up to ``batch``,
        within the prefetch window (delivered and unacked messages count, and so do
        those claimed and not delivered yet); 0 while less than half of
        ``min(batch, window)`` is free, so that a busy consumer claims in batches
        rather than one message for each ack."""
        batch = int(self.shared.settings.batch)
        window = self.qos.prefetch_count
        if not window:
            return batch
        room = self.qos.can_consume_max_estimate() - sum(len(b) for b in self._buffers.values())
        return min(batch, room) if room >= max(1, min(batch, window) // 2) else 0

    def recheck(self) -> None:
        """Ask every queue again at the next look (the connection waited)."""
        self._empty_until.clear()

    def _take(self, queue: str, n: int, leased: bool) -> List[Tuple[Dict[str, Any], str]]:
        """Take up to ``n`` messages (under leases the keeper extends, if
        ``leased``), each with a delivery tag of its own.  Each is decoded on its own:
        one that is not a kombu message is buried at once (see
        :meth:`Queues.undecodable`), after the others are held, which are delivered
        as if it had not been there; a take that got nothing else takes again."""
        queues = self.shared.queues
        structure = queues.structure(queue)
        while True:
            deliveries = queues.take(queue, n, leased)
            taken = []
            bad = []
            for delivery in deliveries:
                try:
                    taken.append(self._taken(structure, delivery))
                except Undecodable as e:
                    bad.append((delivery, e))
            for delivery, error in bad:
                queues.undecodable(queue, delivery, error)
            if taken or not deliveries:
                return taken

    def _taken(self, structure: Any, delivery: Delivery) -> Tuple[Dict[str, Any], str]:
        """A delivery of ``structure`` as the channel delivers it: its payload, tagged
        (and its lease held under that tag).

        Raises:
            Undecodable: it is not a message kombu can build (nothing held).
        """
        payload = kombu_payload(delivery.payload)
        tag = uuid()
        properties = payload["properties"]
        properties["delivery_tag"] = tag
        try:
            self.Message(payload, channel=self)  # what a consumer builds: its body decodes
        except Exception as e:
            raise Undecodable.of(e) from e
        if delivery.lease is not None:
            properties["delivery_info"]["redelivered"] = delivery.lease.deliveries > 1
            self.shared.keeper.hold(tag, Held(structure, delivery.lease, delivery.blob))
        return payload, tag

    def _give_back(self, buffered: Iterable[Tuple[Dict[str, Any], str]]) -> None:
        """Release the leases of messages taken but never delivered (no delivery
        counted)."""
        for _, tag in buffered:
            held = self.shared.keeper.take(tag)
            if held is not None:
                self.shared.queues.release(held, count=False)

    def waitable(self) -> List[str]:
        """The queues this channel would take a message from now: those it consumes
        without acks, and the others while its prefetch window has room for a
        claim."""
        if not self._consumers:
            return []
        room = self._claim_size() > 0
        return [q for q in self._active_queues if room or q in self._no_ack]

    def close(self) -> None:
        if not self.closed:
            for queue in list(self._buffers):
                self._give_back(self._buffers.pop(queue))
        super().close()


class _Waiter:
    """Blocks until a consumed queue has a visible message, a consumer got prefetch
    room back, or a timeout: FoundationDB watches of every queue, awaited at once on a
    private asyncio loop (one per connection)."""

    def __init__(self, shared: Shared) -> None:
        self._shared = shared
        self._loop = asyncio.new_event_loop()
        self._twins: Dict[str, Any] = {}
        self._notified = False
        self._event: Optional[asyncio.Event] = None

    def arm(self) -> None:
        """Forget earlier notifications: the caller is about to look for messages."""
        self._notified = False

    def notify(self) -> None:
        """Wake a wait in progress, or make the next one return at once (any thread)."""
        self._notified = True
        with contextlib.suppress(RuntimeError):  # closed: nobody waits any more
            self._loop.call_soon_threadsafe(self._fire)

    def _fire(self) -> None:
        if self._event is not None:
            self._event.set()

    def wait(self, queues: List[str], timeout: Optional[float]) -> None:
        """Wait for one of ``queues`` to have a visible message (or a lease or delay
        in it to end), a notification, or ``timeout`` seconds."""
        self._event = asyncio.Event()
        if self._notified:
            return
        self._loop.run_until_complete(self._wait_any(queues, timeout))

    async def _wait_any(self, queues: List[str], timeout: Optional[float]) -> None:
        assert self._event is not None
        waits = [asyncio.ensure_future(self._twin(q).wait(self._shared.db, timeout))
                 for q in queues]
        waits.append(asyncio.ensure_future(self._event.wait()))
        try:
            await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()
            await asyncio.gather(*waits, return_exceptions=True)

    def _twin(self, queue: str) -> Any:
        twin = self._twins.get(queue)
        if twin is None:
            structure = self._shared.queues.structure(queue)
            cls = _kinds.of(structure).async_class()
            twin = self._twins[queue] = cls(structure.subspace)
        return twin

    def forget(self, queue: str) -> None:
        self._twins.pop(queue, None)

    def close(self) -> None:
        self._loop.close()


class Transport(virtual.Transport):
    """The kombu transport: ``broker_transport = "fdbrecipes.contrib.celery:Transport"``."""

    Channel = Channel
    driver_type = "fdbrecipes"
    driver_name = "fdbrecipes"
    polling_interval = None  # type: ignore[assignment]  # never: it waits on watches
    implements = virtual.Transport.implements.extend(
        asynchronous=False,
        exchange_type=frozenset(["direct", "topic", "fanout"]),
        heartbeats=False,
    )

    def __init__(self, client: Any, **kwargs: Any) -> None:
        super().__init__(client, **kwargs)
        self.settings = TransportSettings.from_options(client.transport_options or {})
        self._shared: Optional[Shared] = None
        self._waiter: Optional[_Waiter] = None

    @property
    def shared(self) -> Shared:
        """The process's view of the directory (opened on first use)."""
        if self._shared is None:
            self._shared = shared(self.settings)
        return self._shared

    def driver_version(self) -> str:
        return __version__

    def establish_connection(self) -> Any:
        self.shared  # the first contact: a cluster that does not answer fails here  # noqa: B018
        return super().establish_connection()

    def close_connection(self, connection: Any) -> None:
        super().close_connection(connection)
        if self._shared is not None:
            self._shared.acker.flush()
        if self._waiter is not None:
            self._waiter.close()
            self._waiter = None

    def notify(self) -> None:
        """A consumer got prefetch room back: wake the wait, if one runs."""
        if self._waiter is not None:
            self._waiter.notify()

    def drain_events(self, connection: Any, timeout: Optional[float] = None,
                     **kwargs: Any) -> None:
        """Deliver one message, waiting on watches (not polls) for up to ``timeout``
        seconds (None: as long as it takes).

        Raises:
            socket.timeout: nothing came within ``timeout``.
        """
        if self._waiter is None:
            self._waiter = _Waiter(self.shared)
        cycle = self.cycle
        assert cycle is not None  # made by the constructor
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            self._waiter.arm()
            try:
                cycle.get(self._deliver, timeout=timeout)
                return
            except Empty:
                pass
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise socket.timeout()
            queues = sorted({q for ch in self.channels for q in ch.waitable()})
            self._waiter.wait(queues, left)
            for channel in self.channels:
                channel.recheck()
