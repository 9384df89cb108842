"""mypy --strict refuses it: a keyword send_email does not take."""

from __future__ import annotations

from typing import Any

from fdbrecipes.tasks import App

app = App(("typing-sample",))


@app.task
def send_email(to: str, subject: str) -> bool:
    return bool(to and subject)


def request(db: Any) -> None:
    send_email.defer(db, to="a@b", subjet="hi")  # the error: subjet
