"""The ``tasks`` group: tasks beside the raw calls they are made of, on the same
structure (a Queue made with ``history``, as an app makes its queues).

* ``task.defer(db)`` of a task of one int argument beside ``Queue.push(db)`` of a
  value of the same queue kind (:data:`.settings.TASK_PUSH`, :data:`.settings.RAW_PUSH`);
* ``Worker(db, app)`` draining no-op tasks beside ``Worker(db, queue, handler)``
  draining raw items (``Worker(concurrency=8), history``), 4 processes of 8;
* what the codec costs per job, in this process: the arguments checked and made
  plain, encoded, decoded and made typed again, with JSON, MessagePack and AES-GCM
  over JSON (no cluster: timed rows whose CPU per job is the figure).

Clients (:data:`TASK_FACTORIES`) and fills (:data:`TASK_FILLS`) join the suite's
own (:mod:`.clients`, :mod:`.suite`).
"""

from __future__ import annotations

from typing import Any, Dict, Optional

from .. import Queue, RetryStats
from ..tasks import JSON, App, Codec, Encrypted, MsgPack, Task
from ..tasks.task import Options
from .fill import Filler
from .operations import Client, Factory, Pusher, WorkerDrain
from .recipe import QUEUE_FILL_BATCH, chunks
from .settings import HISTORY_SECONDS

__all__ = ["TASK_FACTORIES", "TASK_FILLS", "bench_app"]

#: The task's queue, in the measurement's subspace.
QUEUE = "default"


def noop(n: int) -> None:
    """The benchmark's task: nothing (the worker's and the layer's cost is measured)."""


def bench_app(subspace: Any, codec: Optional[Codec] = None) -> App:
    """An app of one no-op task, its queue as the raw rows' (``history``, no
    ``max_deliveries``)."""
    app = App(subspace, codec=codec, history=HISTORY_SECONDS, max_deliveries=None)
    app.task(name="noop")(noop)
    return app


def noop_task(app: App) -> Task[Any, Any]:
    """The app's task."""
    return app.tasks["noop"]


class TaskPusher(Client):
    """``task.defer(db, n)``: one task's push, its own retry loop."""

    def __init__(self, db: Any, app: App) -> None:
        super().__init__(app.structure(QUEUE).retry_stats)
        self.db, self.task = db, noop_task(app)

    def step(self) -> int:
        self.task.defer(self.db, 1)
        return 1


class CodecCost(Client):
    """One job's codec work, in this process: the task's arguments checked and made
    plain, encoded, decoded, made typed again."""

    def __init__(self, codec: Codec) -> None:
        super().__init__(RetryStats())
        self.task = noop_task(bench_app(("codec",), codec))
        self.codec = codec

    def step(self) -> int:
        plain = self.task.arguments.dump((12345,), {})
        self.task.arguments.load(self.codec.decode(self.codec.encode(plain)))
        return 1


def task_pushes(db: Any, subspace: Any, _index: int, _batch: int) -> Client:
    """``task.defer(db, n)``."""
    return TaskPusher(db, bench_app(subspace))


def raw_pushes(db: Any, subspace: Any, _index: int, _batch: int) -> Client:
    """``Queue.push(db, value)`` on the app's queue."""
    return Pusher(db, bench_app(subspace).structure(QUEUE), 1)  # type: ignore[arg-type]


def task_workers(db: Any, subspace: Any, _index: int, concurrency: int) -> Client:
    """A Worker of the app, draining its queue."""
    app = bench_app(subspace)
    return WorkerDrain(db, app.structure(QUEUE), concurrency,  # type: ignore[arg-type]
                       served=app, handler=None)


def codec_json(_db: Any, _subspace: Any, _index: int, _batch: int) -> Client:
    return CodecCost(JSON())


def codec_msgpack(_db: Any, _subspace: Any, _index: int, _batch: int) -> Client:
    return CodecCost(MsgPack())


def codec_encrypted(_db: Any, _subspace: Any, _index: int, _batch: int) -> Client:
    return CodecCost(Encrypted(JSON(), {"bench": bytes(range(32))}, "bench"))


def fill_tasks(db: Any, subspace: Any, items: int, _seed: int) -> None:
    """The app's queue holding ``items`` calls of the no-op task (pushed in batches,
    as ``defer`` would store them one by one)."""
    app = bench_app(subspace)
    task = noop_task(app)
    queue: Queue[Any] = app.structure(QUEUE)  # type: ignore[assignment]
    for chunk in chunks(0, items, QUEUE_FILL_BATCH):
        queue.push_many(db, [task.prepare(Options(), (n,), {}).value for n in chunk])


#: The clients of the tasks group, by op.
TASK_FACTORIES: Dict[str, Factory] = {
    "task-push": task_pushes,
    "task-raw-push": raw_pushes,
    "task-worker": task_workers,
    "codec-json": codec_json,
    "codec-msgpack": codec_msgpack,
    "codec-encrypted": codec_encrypted,
}
#: The fills of its draining rows.
TASK_FILLS: Dict[str, Filler] = {"task-worker": fill_tasks}
