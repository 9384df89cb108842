"""Tasks: functions made into jobs, the way Python teams write them.

::

    app = App(fdb.Subspace(("myapp",)))

    @app.task(retries=3)
    def send_email(to: str, subject: str) -> bool:
        ...

    handle = send_email.defer(db, to="a@example.com", subject="hi")   # checked, pushed
    Worker(db, app).run()             # or: fdbrecipes worker myapp:app
    handle.result(db)                 # True

An :class:`App` keeps its tasks and the structures they push to (``app.py``); a
:class:`Task` checks its arguments against the function's signature and annotations
before anything is written and returns a typed :class:`TaskHandle` (``task.py``,
``arguments.py``); codecs make the bytes, encrypted ones too (``codecs.py``); the trace
context goes with each item (``tracing.py``); ``app.testing(...)`` runs tasks without
FoundationDB (``testing.py``).  See docs/tasks.md.  Importing this package needs
neither ``libfdb_c`` nor any optional package.
"""

from .app import App
from .codecs import JSON, Codec, CodecError, Encrypted, MsgPack, encrypted_key_id
from .task import Configured, Options, Task, TaskCall, TaskHandle, current_job
from .testing import Ran

__all__ = ["JSON", "App", "Codec", "CodecError", "Configured", "Encrypted", "MsgPack",
           "Options", "Ran", "Task", "TaskCall", "TaskHandle", "current_job",
           "encrypted_key_id"]
