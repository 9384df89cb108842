"""The kombu transport and the result store on a real server, without workers: queue
declare, size, purge and delete; passive declares; priorities; fanout and topic
routing across connections; messages larger than a value; consumers without acks; what
a closing channel gives back; rejects; the default delivery limit; messages that are
not kombu messages; expiring queues; results with expiry, sweeping, chunks and exact
counters."""

from __future__ import annotations

import json
import threading
import time
import uuid
from typing import Any, Dict, Iterator, List

import fdb
import pytest

from fdbrecipes import Queue
from tests.helpers import RandomFaults, eventually, run_threads, unknown_results

kombu = pytest.importorskip("kombu", reason="the celery extra needs Python >= 3.10")

from kombu import Connection, Exchange  # noqa: E402
from kombu import Queue as KQueue  # noqa: E402

from fdbrecipes.contrib._results import SWEEP_BATCH, Counted, ExpiringStore  # noqa: E402

pytestmark = pytest.mark.integration

TRANSPORT = "fdbrecipes.contrib.celery:Transport"


@pytest.fixture
def path(db: Any) -> Iterator[tuple]:
    path = ("fdbrecipes-test", uuid.uuid4().hex)
    yield path
    fdb.directory.remove_if_exists(db, path)


@pytest.fixture
def connect(fdb_cluster_file: str, path: tuple) -> Iterator[Any]:
    made: List[Any] = []

    def make(**options: Any) -> Any:
        conn = Connection("fdbrecipes://", transport=TRANSPORT, transport_options={
            "cluster_file": fdb_cluster_file, "directory": "/".join(path), **options})
        made.append(conn)
        return conn

    yield make
    for conn in made:
        conn.release()


def structure(db: Any, path: tuple, name: str) -> Queue:
    return Queue(fdb.directory.open(db, path).subspace(("q", name)))


def drain(conn: Any, queue: Any, n: int, ack: bool = True) -> List[Any]:
    """The bodies of ``n`` messages of ``queue``, consumed through kombu."""
    got: List[Any] = []

    def on_message(body: Any, message: Any) -> None:
        got.append(body)
        if ack:
            message.ack()

    with conn.Consumer(queue, callbacks=[on_message], no_ack=not ack):
        deadline = time.monotonic() + 30
        while len(got) < n:
            assert time.monotonic() < deadline, f"got {len(got)} of {n}"
            conn.drain_events(timeout=5)
    return got


def declared(channel: Any, name: str) -> bool:
    """Whether the queue exists, by a passive declare (AMQP's way of asking)."""
    try:
        channel.queue_declare(name, passive=True)
    except kombu.exceptions.ChannelError:
        return False
    return True


def test_declare_size_purge_delete(connect: Any, db: Any, path: tuple) -> None:
    conn = connect()
    q = KQueue("work", Exchange("work", "direct"), routing_key="work")
    with conn.Producer() as producer:
        for i in range(5):
            producer.publish({"i": i}, exchange=q.exchange, routing_key="work", declare=[q])
        producer.publish({"later": 1}, exchange=q.exchange, routing_key="work",
                         headers={"eta": "2999-01-01T00:00:00+00:00"})
    channel = conn.default_channel
    assert channel.queue_declare("work", passive=True).message_count == 6   # 5 + 1 delayed
    assert channel.queue_purge("work") == 5            # ready messages only
    assert structure(db, path, "work").stats(db).delayed == 1
    channel.queue_delete("work")
    with pytest.raises(kombu.exceptions.ChannelError, match="NOT_FOUND"):
        channel.queue_declare("work", passive=True)
    with conn.Producer() as producer:   # its binding went with it: nothing is routed
        producer.publish({"i": 9}, exchange="work", routing_key="work")
    assert not declared(channel, "work")


def test_priorities_and_large_messages(connect: Any) -> None:
    conn = connect()
    q = KQueue("p", Exchange("p", "direct"), routing_key="p", max_priority=9)
    big = "y" * 250_000
    with conn.Producer() as producer:
        for i, p in enumerate([1, 5, 9, 5, 1, 9]):
            producer.publish({"i": i, "p": p}, exchange=q.exchange, routing_key="p",
                             declare=[q], priority=p)
        producer.publish({"big": big}, exchange=q.exchange, routing_key="p", priority=0)
    bodies = drain(conn, q, 7)
    assert [b.get("i") for b in bodies[:6]] == [2, 5, 1, 3, 0, 4]   # high first, FIFO ties
    assert bodies[6]["big"] == big


def test_redeclaring_as_the_other_kind_is_refused(connect: Any) -> None:
    channel = connect().default_channel
    channel.queue_declare("plain")
    with pytest.raises(kombu.exceptions.ChannelError, match="PRECONDITION_FAILED"):
        channel.queue_declare("plain", arguments={"x-max-priority": 9})


def test_fanout_and_topic_reach_other_connections(connect: Any) -> None:
    """Bindings made by one connection route the publishes of another (remote
    control and events work across processes this way)."""
    a, b, publisher = connect(), connect(), connect()
    fan = Exchange("fan", "fanout")
    topic = Exchange("ev", "topic")
    qa = KQueue("a", fan, auto_delete=True)
    qb = KQueue("b", fan, auto_delete=True)
    qt = KQueue("t", topic, routing_key="task.#")
    for conn, q in [(a, qa), (b, qb), (a, qt)]:
        q(conn.default_channel).declare()
    with publisher.Producer() as producer:
        producer.publish({"hello": "all"}, exchange=fan)
        producer.publish({"t": 1}, exchange=topic, routing_key="task.succeeded")
        producer.publish({"t": 2}, exchange=topic, routing_key="worker.heartbeat")
    assert drain(a, qa, 1, ack=False) == [{"hello": "all"}]
    assert drain(b, qb, 1, ack=False) == [{"hello": "all"}]
    assert drain(a, qt, 1) == [{"t": 1}]
    assert a.default_channel.queue_declare("t", passive=True).message_count == 0


def test_a_publish_sees_bindings_another_process_changed_since_it_routed(
        connect: Any) -> None:
    """A publisher routes on the bindings it cached while the change counter, read in
    the publish's own transaction, says they are current: a queue another process
    (here: a connection with settings of its own, hence its own cache) binds or
    deletes after the publisher's first publish is seen by its next one."""
    publisher, other = connect(), connect(lease_seconds=31.0)
    fan = Exchange("fan2", "fanout")
    first, second = KQueue("first", fan), KQueue("second", fan)
    first(other.default_channel).declare()
    with publisher.Producer() as producer:
        producer.publish({"n": 1}, exchange=fan)
        second(other.default_channel).declare()
        producer.publish({"n": 2}, exchange=fan)
        other.default_channel.queue_delete("first")
        producer.publish({"n": 3}, exchange=fan)
    assert not declared(other.default_channel, "first")
    got = drain(other, second, 2)
    assert sorted(got, key=str) == [{"n": 2}, {"n": 3}]
    assert other.default_channel.queue_declare("second", passive=True).message_count == 0


def test_a_closing_channel_gives_back_what_it_held_and_reject_settles(
        connect: Any, db: Any, path: tuple) -> None:
    conn = connect()
    q = KQueue("held", Exchange("held", "direct"), routing_key="held")
    with conn.Producer() as producer:
        for i in range(3):
            producer.publish({"i": i}, exchange=q.exchange, routing_key="held", declare=[q])
    channel = conn.channel()
    first, second, third = (channel.basic_get("held") for _ in range(3))
    stats = structure(db, path, "held").stats(db)
    assert (stats.visible, stats.in_flight) == (0, 3)      # claimed: leased, not gone
    channel.basic_reject(second.delivery_tag, requeue=True)
    channel.basic_reject(third.delivery_tag, requeue=False)
    channel.close()                                         # first: given back
    stats = structure(db, path, "held").stats(db)
    assert (stats.visible, stats.in_flight, stats.dead) == (2, 0, 1)
    letter = structure(db, path, "held").dead(db)[0]
    assert letter.reason == "rejected by the consumer (basic_reject)"
    again = drain(conn, q, 2)
    assert sorted(b["i"] for b in again) == sorted([first.payload["i"], second.payload["i"]])


def test_a_passive_declare_only_asks(connect: Any) -> None:
    """As on RabbitMQ: a passive declare of an existing queue answers its message count
    whatever its kind and the arguments given, and declares nothing (an
    ``auto_delete`` given does not make the queue go with this process's consumer);
    a missing queue is NOT_FOUND, and stays missing."""
    conn = connect()
    channel = conn.default_channel
    urgent = KQueue("urgent", Exchange("urgent", "direct"), routing_key="urgent",
                    max_priority=9)
    with conn.Producer() as producer:
        for p in (1, 5):
            producer.publish({"p": p}, exchange=urgent.exchange, routing_key="urgent",
                             declare=[urgent], priority=p)
    assert channel.queue_declare("urgent", passive=True).message_count == 2
    assert urgent(channel).queue_declare(passive=True).message_count == 2
    assert channel.queue_declare("urgent", passive=True,
                                 arguments={"x-max-priority": 3}).message_count == 2
    channel.queue_declare("plain")
    assert channel.queue_declare("plain", passive=True,
                                 arguments={"x-max-priority": 9}).message_count == 0
    assert channel.queue_declare("plain", passive=True, auto_delete=True).queue == "plain"
    plain = KQueue("plain", Exchange("plain", "direct"), routing_key="plain")
    with conn.Consumer(plain, callbacks=[]):
        pass                                          # its only consumer here stops
    assert declared(channel, "plain")                 # not auto-deleted
    for _ in range(2):
        with pytest.raises(kombu.exceptions.ChannelError, match="NOT_FOUND"):
            channel.queue_declare("missing", passive=True)
    assert [b["p"] for b in drain(conn, urgent, 2)] == [5, 1]  # a priority queue still


def test_a_message_rejected_with_requeue_20_times_is_a_dead_letter(
        connect: Any, db: Any, path: tuple) -> None:
    """The default ``max_deliveries`` is 20 (not forever): a message that keeps coming
    back unacked ends in the dead letters."""
    conn = connect()
    q = KQueue("again", Exchange("again", "direct"), routing_key="again")
    with conn.Producer() as producer:
        producer.publish({"i": 1}, exchange=q.exchange, routing_key="again", declare=[q])
    channel = conn.channel()
    for delivery in range(1, 21):
        message = channel.basic_get("again")
        assert message is not None, delivery
        channel.basic_reject(message.delivery_tag, requeue=True)
    assert channel.basic_get("again") is None
    (letter,) = structure(db, path, "again").dead(db)
    assert letter.deliveries == 20


POISON = {
    b"\x80 not json": "DecodeError: UnicodeDecodeError: 'utf-8' codec can't decode byte 0x80",
    b"[1,2,3]": "DecodeError: not a kombu message: a JSON array, not an object",
    b'{"properties": []}': "DecodeError: not a kombu message: its properties are a JSON array",
    json.dumps({"body": "abc", "properties": {"body_encoding": "base64"}}).encode():
        "DecodeError: Error: ",                    # binascii.Error: bad padding
    json.dumps({"body": "x", "properties": {"body_encoding": "rot13"}}).encode():
        "DecodeError: AttributeError: ",           # kombu has no such codec
}


def test_messages_that_are_not_kombu_messages_die_at_once_and_the_rest_is_delivered(
        connect: Any, db: Any, path: tuple) -> None:
    """Undecodable messages claimed with good ones: each a dead letter at once (one
    delivery), its reason naming the problem; the good ones of the same claim are
    delivered, once each; basic_get takes the good message behind a bad one."""
    conn = connect()
    q = KQueue("mixed", Exchange("mixed", "direct"), routing_key="mixed")

    def publish(i: int) -> None:
        with conn.Producer() as producer:
            producer.publish({"i": i}, exchange=q.exchange, routing_key="mixed", declare=[q])

    publish(0)
    s = structure(db, path, "mixed")
    for raw in POISON:
        s.push(db, raw)
    publish(1)
    publish(2)
    assert sorted(b["i"] for b in drain(conn, q, 3)) == [0, 1, 2]   # one claim of 8
    eventually(lambda: s.stats(db).in_flight == 0, 10, "the acks (a thread commits them)")
    stats = s.stats(db)
    assert (stats.visible, stats.dead) == (0, len(POISON))
    letters = {letter.value: letter for letter in s.dead(db)}
    for raw, reason in POISON.items():
        assert letters[raw].reason.startswith(reason), (raw, letters[raw].reason)
        assert letters[raw].deliveries == 1
    s.push(db, b"[]")
    publish(3)
    got = conn.default_channel.basic_get("mixed")  # whichever it claims first
    assert got is not None and got.payload["i"] == 3
    got.ack()
    assert conn.default_channel.basic_get("mixed") is None
    assert s.stats(db).dead == len(POISON) + 1


def test_a_consumer_waits_on_a_watch_not_a_poll(connect: Any) -> None:
    """Messages published while a consumer waits are delivered within 0.3 s of their
    publish, three times in a row: a watch fires.  A consumer polling every second (kombu's
    virtual transports) would be that quick three times in a row about once in 37 runs."""
    consumer_conn, publisher = connect(), connect()
    q = KQueue("w", Exchange("w", "direct"), routing_key="w")
    q(consumer_conn.default_channel).declare()
    got: List[float] = []
    sent: List[float] = []

    def on_message(body: Any, message: Any) -> None:
        got.append(time.monotonic())
        message.ack()

    def publish() -> None:
        # Not a synchronization: the delivery is asserted either way.  The consumer's
        # wait is the transport's own (no hook reaches it): this gives it time to
        # block on its watch, so that what is timed is a watch's wake-up.
        time.sleep(0.4)
        with publisher.Producer() as producer:
            sent.append(time.monotonic())
            producer.publish({"x": 1}, exchange=q.exchange, routing_key="w")

    with consumer_conn.Consumer(q, callbacks=[on_message]):
        for _ in range(3):
            t = threading.Thread(target=publish)
            t.start()
            consumer_conn.drain_events(timeout=10)
            t.join(timeout=10)
    delays = [g - s for g, s in zip(got, sent)]
    assert len(delays) == 3 and max(delays) < 0.3, delays


def test_an_expired_queue_nobody_consumes_is_deleted_by_the_next_publish(
        connect: Any) -> None:
    conn = connect(expiry_grace=0.5)
    fan = Exchange("bc", "fanout")
    gone = KQueue("gone", fan, expires=0.5)
    gone(conn.default_channel).declare()

    def deleted() -> bool:
        with conn.Producer() as producer:
            producer.publish({"x": 1}, exchange=fan)
        return not declared(conn.default_channel, "gone")

    deadline = time.monotonic() + 30
    while not deleted():
        assert time.monotonic() < deadline, "the expired queue was never deleted"
        time.sleep(0.2)  # the cluster's clock passing the expiry


def test_results_expire_and_a_sweep_removes_them_in_batches(db: Any, path: tuple) -> None:
    store = ExpiringStore(db, fdb.directory.create_or_open(db, path), sweep_every=None)
    n = SWEEP_BATCH * 2 + 100
    for i in range(n):
        store.set(f"k{i}".encode(), b"v" * 10, expires=0.5)
    store.set(b"keep", b"x" * 250_000, expires=3600)          # chunked, not expired
    store.set(b"forever", b"f", expires=None)
    deadline = time.monotonic() + 30
    while store.get(f"k{n - 1}".encode()) is not None:   # the last one written
        assert time.monotonic() < deadline
        time.sleep(0.1)  # the cluster's clock passing the expiry
    assert store.sweep() == n
    assert store.get(b"keep") == b"x" * 250_000 and store.get(b"forever") == b"f"
    root = fdb.directory.open(db, path)
    r = root.range()
    left = [root.unpack(kv.key)[0] for kv in db.get_range(r.start, r.stop)]
    # what is left: keep's 3 chunks, expiry and index entry; forever's chunk
    assert sorted(left) == ["e", "v", "v", "v", "v", "x"]
    store.delete(b"keep")
    store.delete(b"forever")
    assert not list(db.get_range(r.start, r.stop))


def test_counters_count_exactly_under_concurrency(db: Any, path: tuple) -> None:
    store = ExpiringStore(db, fdb.directory.create_or_open(db, path), sweep_every=None)
    seen: List[int] = []
    lock = threading.Lock()

    def incr() -> None:
        for _ in range(50):
            value = store.incr(b"chord")
            with lock:
                seen.append(value)

    threads = [threading.Thread(target=incr) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert sorted(seen) == list(range(1, 401))   # every value once: none skipped


def never(_stored: bytes) -> bool:
    """A ``keep`` that keeps no stored value."""
    return False


def always(_stored: bytes) -> bool:
    """A ``keep`` that keeps every stored value."""
    return True


def test_a_chord_part_is_counted_once_with_its_result_under_unknown_results(
        db: Any, path: tuple, fdb_cluster_file: str) -> None:
    """50 parts stored and counted at once through commits that report
    commit_unknown_result (applied or not): each part counted once, in the
    transaction of its result, and exactly one count reaches 50."""
    faulty = unknown_results(fdb_cluster_file, RandomFaults(41, 0.3))
    store = ExpiringStore(faulty, fdb.directory.create_or_open(db, path), sweep_every=None)
    n = 50
    counted: Dict[int, Counted] = {}
    errors: List[BaseException] = []

    def part(i: int) -> None:
        try:
            counted[i] = store.set_and_count(f"r{i}".encode(), b"done", 3600, never,
                                             b"chord", f"t{i}".encode())
        except BaseException as e:  # reported by run_threads
            errors.append(e)

    run_threads([threading.Thread(target=part, args=(i,)) for i in range(n)], errors, 120)
    assert sorted(c.value for c in counted.values()) == list(range(1, n + 1))
    assert not any(c.done for c in counted.values())
    assert all(store.get(f"r{i}".encode()) == b"done" for i in range(n))
    again = {i: store.count_once(b"chord", f"t{i}".encode()) for i in range(n)}
    assert again == counted, "a part delivered again reads its receipt"
    kept = store.set_and_count(b"r0", b"other", 3600, always, b"chord", b"t0")
    assert kept == counted[0] and store.get(b"r0") == b"done"
    store.mark_done(b"chord")
    assert store.count_once(b"chord", b"t0") == Counted(counted[0].value, True)
    store.delete(b"chord")
    assert store.count_once(b"chord", b"t0") == Counted(1, False), "the receipts went too"
