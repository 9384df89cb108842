"""mypy --strict refuses it: the result taken as the wrong type."""

from __future__ import annotations

from typing import Any

from fdbrecipes.tasks import App

app = App(("typing-sample",))


@app.task
async def count(words: list[str]) -> int:
    return len(words)


def request(db: Any) -> str:
    handle = count.defer(db, words=["a", "b"])
    text: str = handle.result(db)  # the error: the result is an int
    return text
