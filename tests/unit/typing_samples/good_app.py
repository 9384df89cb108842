"""A sample app that mypy --strict accepts (tests/unit/test_tasks_typing.py)."""

from __future__ import annotations

from typing import Any

from fdbrecipes.tasks import App, TaskHandle

app = App(("typing-sample",))


@app.task
def send_email(to: str, subject: str, retries: int = 0) -> bool:
    return bool(to and subject and retries >= 0)


@app.task(queue="reports", retries=2)
async def monthly(month: int) -> list[str]:
    return [str(month)]


def request(db: Any) -> bool:
    handle: TaskHandle[bool] = send_email.defer(db, to="a@b", subject="hi")
    send_email.configure(delay=60).defer(db, "a@b", "later", retries=1)
    ok: bool = handle.result(db, timeout=10)
    return ok


async def request_async(db: Any) -> list[str]:
    handle = await monthly.defer_async(db, month=11)
    lines: list[str] = await handle.result_async(db)
    return lines
