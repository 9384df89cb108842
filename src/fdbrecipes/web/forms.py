"""What the dashboard reads from a request: a posted form and the fields of forms and
URLs, each checked and bounded before anything is read from the cluster (a bad one is
a :class:`BadRequest`: 400, or 413/415 for the form itself)."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence
from urllib.parse import parse_qs

from .. import _kinds, concurrency, rate
from .._limits.specs import check_name as check_limit_name
from .actions import LimitChange, Policy
from .listings import ROW_LIMIT
from .show import cursor_from_hex, group_from_hex, id_from_hex

__all__ = ["FORM_CAP", "BadRequest", "cursor", "group", "job_id", "limit", "limit_change",
           "limit_name", "policy", "read_form", "store_index", "structure_named", "tokens",
           "workflow_id"]

#: Bytes of a posted form read at most.
FORM_CAP = 262_144


class BadRequest(Exception):
    """A page or action was asked with wrong parameters (400), or of something that is
    not there (404)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def structure_named(structures: Mapping[str, Any], name: Optional[str]) -> Any:
    """The structure named ``name`` (``s``).

    Raises:
        BadRequest: none has that name (404).
    """
    if name is None or name not in structures:
        raise BadRequest("no structure has that name", 404)
    return structures[name]


def group(structure: Any, given: Optional[str], text: Optional[str] = None) -> Any:
    """The group ``g`` names (hex), or ``group`` (its text, a str), or None; a
    FairQueue's only."""
    if not given and not text:
        return None
    if not _kinds.of(structure).groups:
        raise BadRequest("g: only a fair-queue has groups")
    if not given:
        return text
    try:
        return group_from_hex(given)
    except ValueError as e:
        raise BadRequest(str(e)) from None


def limit(text: Optional[str], default: int = 50, most: int = ROW_LIMIT) -> int:
    """A ``limit`` field: ``default`` when empty, else a number from 1 to ``most``."""
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        raise BadRequest("limit: a number") from None
    if not 1 <= value <= most:
        raise BadRequest(f"limit: 1 to {most:,}")
    return value


def cursor(text: Optional[str], name: str = "after") -> Optional[bytes]:
    """A cursor (a row's token, as hex), or None when empty."""
    return cursor_from_hex(text, name) if text else None


def tokens(text: str) -> List[bytes]:
    """The rows a form chose (their tokens as hex, joined by ","), 1 to
    :data:`~.listings.ROW_LIMIT` of them."""
    chosen = [t for t in text.split(",") if t]
    if not chosen:
        raise BadRequest("choose at least one item")
    if len(chosen) > ROW_LIMIT:
        raise BadRequest(f"token: at most {ROW_LIMIT} at once")
    return [cursor_from_hex(t, "token") for t in chosen]


def _number(form: Dict[str, str], name: str, kind: Callable[[str], Any]) -> Any:
    """Field ``name`` of ``form`` as ``kind`` (int or float), or None when empty."""
    text = form.get(name, "").strip()
    if not text:
        return None
    try:
        return kind(text)
    except ValueError:
        raise BadRequest(f"{name}: a number") from None


def policy(form: Dict[str, str]) -> Policy:
    """A group's policy from the form: share, limit (empty: the queue's defaults), and
    a rate (count per seconds; both empty: none)."""
    count, seconds = _number(form, "rate_count", int), _number(form, "rate_seconds", float)
    if (count is None) != (seconds is None):
        raise BadRequest("rate: give both the count and the seconds, or neither")
    rate = None if count is None else (count, seconds)
    return Policy(_number(form, "share", int), _number(form, "limit", int), rate)


def store_index(text: Optional[str], stores: Sequence[Any], what: str) -> int:
    """The index of the store ``store`` names among ``stores``.

    Raises:
        BadRequest: no such store (404).
    """
    text = text or ""
    if not (text.isascii() and text.isdigit() and int(text) < len(stores)):
        raise BadRequest(f"store: no such {what} store", 404)
    return int(text)


def limit_name(text: Optional[str]) -> str:
    """A limit's name (``name``): 1 to 100 letters, digits or ``._:-``."""
    try:
        return check_limit_name(text or "")
    except (TypeError, ValueError) as e:
        raise BadRequest(str(e)) from None


def limit_change(form: Dict[str, str], delete: bool) -> LimitChange:
    """A limit to set (``name``, ``kind``: concurrency or rate, ``n``, and a rate's
    window ``per`` in seconds), or to delete (``name`` only), checked as the library
    checks it: a bad one is refused before anything is written."""
    name = limit_name(form.get("name"))
    if delete:
        return LimitChange(name, None)
    kind = form.get("kind", "")
    n, per = _number(form, "n", int), _number(form, "per", float)
    if n is None:
        raise BadRequest("n: give the limit's number")
    try:
        if kind == "concurrency":
            if per is not None:
                raise BadRequest("per: a concurrency limit has no window")
            return LimitChange(name, concurrency(n))
        if kind == "rate":
            if per is None:
                raise BadRequest("per: a rate needs its window, in seconds")
            return LimitChange(name, rate(n, per))
    except (TypeError, ValueError) as e:
        raise BadRequest(str(e)) from None
    raise BadRequest("kind: concurrency or rate")


def workflow_id(text: Optional[str]) -> bytes:
    """A workflow's id given as hex (``id``): 1 to 100 bytes."""
    try:
        w = bytes.fromhex(text or "")
    except ValueError:
        raise BadRequest("id: not hex") from None
    if not 1 <= len(w) <= 100:
        raise BadRequest("id: a workflow's id, 1 to 100 bytes")
    return w


def job_id(hexed: Optional[str], text: Optional[str]) -> bytes:
    """A job id given as hex (``id``) or as text (``text``, its UTF-8 bytes)."""
    if hexed:
        return id_from_hex(hexed)
    if text:
        id_ = text.encode()
        if len(id_) > 1000:
            raise BadRequest("text: at most 1,000 bytes")
        return id_
    raise BadRequest("id: give the job's id")


async def read_form(request: Any) -> Dict[str, str]:
    """The posted form (urlencoded, at most :data:`FORM_CAP` bytes): a field's first
    value, but the ``token`` fields' joined by ","."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/x-www-form-urlencoded":
        raise BadRequest("post a form (application/x-www-form-urlencoded)", 415)
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > FORM_CAP:
            raise BadRequest("form too large", 413)
    try:
        fields = parse_qs(body.decode("utf-8"), keep_blank_values=True, strict_parsing=False)
    except UnicodeDecodeError:
        raise BadRequest("form: not UTF-8") from None
    return {k: ",".join(v) if k == "token" else v[0] for k, v in fields.items()}
