"""The job handler of compose.yaml's worker (``fdbrecipes worker example:handle``).

Replace it with your own: the image runs any ``MODULE:FUNCTION`` found on its path.
"""

from __future__ import annotations

from typing import Any


def handle(job: Any) -> None:
    """Say which job it handled (``docker compose logs worker``); returning acks it."""
    print(f"handled {job.value!r}", flush=True)
