"""An ASGI app served by uvicorn in a thread, on 127.0.0.1 (the dashboard's tests that
need a real server: the browser's journeys, requests at once)."""

from __future__ import annotations

import threading
from typing import Any

from tests.helpers import eventually

#: Seconds starting or stopping the server may take at most.
DEADLINE = 30.0


class Served:
    """``app`` served by uvicorn in a thread, on a free port of 127.0.0.1 (``url``)."""

    def __init__(self, app: Any) -> None:
        import uvicorn

        config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        eventually(self.started, DEADLINE, "uvicorn")
        self.port: int = self.server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/"

    def started(self) -> bool:
        return bool(self.server.started)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(DEADLINE)
