"""The dashboard's security defaults, as ASGI middleware (no framework needed).

:class:`Guard` wraps the app:

* every response gets a strict Content-Security-Policy whose nonce is new per request
  (``scope["state"]["csp_nonce"]``: the one inline ``<style>`` carries it; no script
  runs), ``X-Content-Type-Options: nosniff``, ``Cache-Control: no-store``,
  ``Referrer-Policy: same-origin`` and ``X-Frame-Options: DENY``;
* a request with any method but GET and HEAD (every state change is a POST) made by a
  browser from another origin is refused with 403 before the app sees it
  (:func:`cross_site`);
* with a ``token``, every request must carry it as the password of HTTP Basic
  authentication (any user name), else 401: browsers ask for it without any script.

Costs nothing per request but a nonce (16 random bytes) and a header scan.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import secrets
from typing import (
    Any,
    Awaitable,
    Callable,
    Iterable,
    List,
    MutableMapping,
    Optional,
    Tuple,
)

__all__ = ["SAFE_METHODS", "Guard", "cross_site", "security_headers"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: Methods that never change state: not checked for cross-site origin.
SAFE_METHODS = ("GET", "HEAD")


def security_headers(nonce: str) -> List[Tuple[bytes, bytes]]:
    """The headers every response carries (see the module docstring)."""
    csp = (f"default-src 'none'; style-src 'nonce-{nonce}'; script-src 'nonce-{nonce}'; "
           "img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; "
           "base-uri 'none'")
    return [(b"content-security-policy", csp.encode()),
            (b"x-content-type-options", b"nosniff"),
            (b"cache-control", b"no-store"),
            (b"referrer-policy", b"same-origin"),
            (b"x-frame-options", b"DENY")]


def _header(headers: Iterable[Tuple[bytes, bytes]], name: bytes) -> Optional[str]:
    for key, value in headers:
        if key.lower() == name:
            return value.decode("latin-1")
    return None


def cross_site(method: str, headers: Iterable[Tuple[bytes, bytes]], scheme: str,
               trusted: Iterable[str] = ()) -> Optional[str]:
    """Why a request must be refused as cross-site, or None when it may go on.

    GET and HEAD always go on.  Otherwise, as Go's ``http.CrossOriginProtection``
    does: a ``Sec-Fetch-Site`` header must say ``same-origin``; without it, an
    ``Origin`` header must be the request's own origin (``scheme://Host``) or one of
    ``trusted`` (``https://admin.example.com``, behind a proxy that rewrites Host);
    a request with neither header comes from no browser (curl, a script) and goes on.
    """
    if method.upper() in SAFE_METHODS:
        return None
    headers = list(headers)
    site = _header(headers, b"sec-fetch-site")
    if site is not None:
        return None if site == "same-origin" else f"cross-site request (Sec-Fetch-Site: {site})"
    origin = _header(headers, b"origin")
    if origin is None:
        return None
    host = _header(headers, b"host")
    if host is not None and origin == f"{scheme}://{host}":
        return None
    if origin in trusted:
        return None
    return f"cross-origin request (Origin: {origin})"


def _password(headers: Iterable[Tuple[bytes, bytes]]) -> Optional[str]:
    """The password of a Basic Authorization header, or None."""
    value = _header(headers, b"authorization")
    if value is None or not value.lower().startswith("basic "):
        return None
    try:
        decoded = base64.b64decode(value[6:].strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    return decoded.partition(":")[2]


class Guard:
    """ASGI middleware around the dashboard (see the module docstring).

    Args:
        app: the ASGI app it guards.
        trusted_origins: origins besides the request's own whose POSTs are accepted.
        token: the password every request must give (HTTP Basic), or None.
    """

    def __init__(self, app: ASGIApp, trusted_origins: Iterable[str] = (),
                 token: Optional[str] = None) -> None:
        self.app = app
        self.trusted = tuple(trusted_origins)
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        nonce = secrets.token_urlsafe(16)
        scope.setdefault("state", {})["csp_nonce"] = nonce
        extra = security_headers(nonce)

        async def send_guarded(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {k for k, _ in extra}
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower()
                           not in names]
                message = {**message, "headers": headers + extra}
            await send(message)

        headers = scope.get("headers", [])
        if self.token is not None:
            given = _password(headers)
            if given is None or not hmac.compare_digest(given.encode(), self.token.encode()):
                await _refuse(send_guarded, 401, "the dashboard's token is needed",
                              [(b"www-authenticate", b'Basic realm="fdbrecipes"')])
                return
        why = cross_site(scope["method"], headers, scope.get("scheme", "http"), self.trusted)
        if why is not None:
            await _refuse(send_guarded, 403, f"refused: {why}")
            return
        await self.app(scope, receive, send_guarded)


async def _refuse(send: Send, status: int, text: str,
                  headers: Iterable[Tuple[bytes, bytes]] = ()) -> None:
    """Answer ``status`` with ``text`` as plain text."""
    body = text.encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                            (b"content-length", str(len(body)).encode()), *headers]})
    await send({"type": "http.response.body", "body": body})
