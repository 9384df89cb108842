"""mypy --strict refuses it: an argument of the wrong type."""

from __future__ import annotations

from typing import Any

from fdbrecipes.tasks import App

app = App(("typing-sample",))


@app.task
def resize(name: str, width: int) -> str:
    return f"{name}@{width}"


def request(db: Any) -> None:
    resize.defer(db, name="cat.png", width="wide")  # the error: a str for an int
