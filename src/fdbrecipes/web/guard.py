"""The dashboard's security defaults, as ASGI middleware (no framework needed).

:class:`Guard` wraps the app:

* every response gets a strict Content-Security-Policy whose nonce is new per request
  (``scope["state"]["csp_nonce"]``: the one inline ``<style>`` carries it; no script
  runs), ``X-Content-Type-Options: nosniff``, ``Cache-Control: no-store``,
  ``Referrer-Policy: same-origin`` and ``X-Frame-Options: DENY``;
* a request whose ``Host`` is not the dashboard's is refused with 421 before anything
  else (:func:`foreign_host`): a page of another site whose name was made to point at
  this machine (DNS rebinding) reaches nothing;
* with a ``token``, every request must carry it as the password of HTTP Basic
  authentication, else 401: browsers ask for it without any script.  The user name
  given with it names the person in the audit log (``scope["state"]["user"]``).  An
  address giving wrong tokens is slowed down (:mod:`.logins`: 429);
* a request with any method but GET and HEAD (every state change is a POST) made by a
  browser from another origin, and a GET another site's page makes its browser send
  (an image, a frame, a fetch: anything but following a link), are refused with 403
  before the app sees them (:func:`cross_site`).

Every refusal is logged (:func:`.audit.refused`).  Costs nothing per request but a
nonce (16 random bytes) and a header scan.
"""

from __future__ import annotations

import base64
import hmac
import secrets
from typing import (
    Any,
    Awaitable,
    Callable,
    Iterable,
    List,
    MutableMapping,
    NamedTuple,
    Optional,
    Sequence,
    Tuple,
)

from .audit import refused
from .logins import Logins

__all__ = ["LOCAL_HOSTS", "MIN_TOKEN", "SAFE_METHODS", "Credentials", "Guard", "check_token",
           "credentials", "cross_site", "foreign_host", "security_headers", "split_host"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: Methods that never change state: not checked for cross-site origin.
SAFE_METHODS = ("GET", "HEAD")
#: The names of this machine a Host header may give (with the server's port).
LOCAL_HOSTS = ("localhost", "127.0.0.1", "[::1]")
#: Characters a token has at least.
MIN_TOKEN = 16
#: The ports a Host header without one means.
DEFAULT_PORTS = {"http": 80, "https": 443}


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


def check_token(token: Optional[str]) -> Optional[str]:
    """``token``, checked: None (no token asked for) or a str of at least
    :data:`MIN_TOKEN` characters.

    Raises:
        TypeError: neither None nor a str.
        ValueError: shorter (an empty one included).
    """
    if token is None:
        return None
    if not isinstance(token, str):
        raise TypeError(f"token must be a str or None, not {type(token).__name__}")
    if len(token) < MIN_TOKEN:
        raise ValueError(f"token: at least {MIN_TOKEN} characters, got {len(token)} "
                         "(e.g. python -c 'import secrets; print(secrets.token_urlsafe())')")
    return token


def _header(headers: Iterable[Tuple[bytes, bytes]], name: bytes) -> Optional[str]:
    for key, value in headers:
        if key.lower() == name:
            return value.decode("latin-1")
    return None


def split_host(host: str) -> Tuple[str, Optional[int]]:
    """A Host header's (or an allowed host's) name, lower case (an IPv6 address in
    brackets), and port (None when it gives none, or gives one that is no number)."""
    host = host.strip().lower()
    if host.startswith("["):
        name, _, rest = host.partition("]")
        name, port = name + "]", rest[1:] if rest.startswith(":") else ""
    elif host.count(":") == 1:
        name, _, port = host.partition(":")
    else:
        name, port = host, ""
    return name, int(port) if port.isdigit() and len(port) <= 5 else None


def _bracketed(address: str) -> str:
    """An address as a Host header names it (an IPv6 one in brackets)."""
    return f"[{address}]" if ":" in address else address.lower()


def foreign_host(headers: Iterable[Tuple[bytes, bytes]], scheme: str,
                 server: Optional[Sequence[Any]], allowed: Sequence[str] = ()) -> Optional[str]:
    """Why the request's ``Host`` is not the dashboard's, or None when it is.

    It is when it names the address the server answered on (``server``, the ASGI
    scope's: host and port), ``localhost``, ``127.0.0.1`` or ``[::1]``, with the
    server's port (or none, when that port is the scheme's default); or when it is
    one of ``allowed`` (a name, which then goes with any port, or ``name:port``; ``*``
    allows any Host, for an application that checks it itself).
    """
    host = _header(headers, b"host")
    if host is None:
        return "no Host header"
    if "*" in allowed:
        return None
    name, port = split_host(host)
    for entry in allowed:
        want, want_port = split_host(entry)
        if name == want and (want_port is None or want_port == port):
            return None
    names = set(LOCAL_HOSTS)
    if server:
        names.add(_bracketed(str(server[0])))
        bound: Optional[int] = int(server[1]) if server[1] is not None else None
        if port is None:
            port = DEFAULT_PORTS.get(scheme)
    else:  # no address (a Unix socket): the local names, with any port
        bound = port
    if name in names and port == bound:
        return None
    return f"Host {host!r} is not this dashboard's (see --allowed-host)"


def cross_site(method: str, headers: Iterable[Tuple[bytes, bytes]], scheme: str,
               trusted: Iterable[str] = ()) -> Optional[str]:
    """Why a request must be refused as cross-site, or None when it may go on.

    A GET or HEAD goes on unless a browser says another site's page made it send it
    for something else than following a link (``Sec-Fetch-Site: cross-site`` with a
    ``Sec-Fetch-Mode`` other than ``navigate``: an image, a frame, a fetch).  Any
    other method, as Go's ``http.CrossOriginProtection`` does: a ``Sec-Fetch-Site``
    header must say ``same-origin``; without it, an ``Origin`` header must be the
    request's own origin (``scheme://Host``) or one of ``trusted``
    (``https://admin.example.com``, behind a proxy that rewrites Host); a request
    with neither header comes from no browser (curl, a script) and goes on.
    """
    headers = list(headers)
    site = _header(headers, b"sec-fetch-site")
    if method.upper() in SAFE_METHODS:
        mode = _header(headers, b"sec-fetch-mode")
        if site == "cross-site" and mode is not None and mode != "navigate":
            return f"cross-site request (Sec-Fetch-Mode: {mode})"
        return None
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


class Credentials(NamedTuple):
    """What a Basic Authorization header gives: a user name and a password."""

    user: str
    password: str


def credentials(headers: Iterable[Tuple[bytes, bytes]]) -> Optional[Credentials]:
    """The user name and password of a Basic Authorization header; None without one,
    or for one that is not base64 of UTF-8 text (non-ASCII bytes included)."""
    value = _header(headers, b"authorization")
    if value is None or not value.lower().startswith("basic "):
        return None
    try:
        decoded = base64.b64decode(value[6:].strip(), validate=True).decode("utf-8")
    except ValueError:  # binascii.Error, UnicodeDecodeError and non-ASCII text alike
        return None
    user, _, password = decoded.partition(":")
    return Credentials(user, password)


class Guard:
    """ASGI middleware around the dashboard (see the module docstring).

    Args:
        app: the ASGI app it guards.
        trusted_origins: origins besides the request's own whose POSTs are accepted.
        token: the password every request must give (HTTP Basic), or None; at least
            :data:`MIN_TOKEN` characters.
        allowed_hosts: Host names besides the local ones and the server's address
            (see :func:`foreign_host`).
        logins: the buckets slowing down wrong tokens (default: a new
            :class:`.logins.Logins`).

    Raises:
        TypeError or ValueError: a token that is not a str of :data:`MIN_TOKEN`
            characters or more.
    """

    def __init__(self, app: ASGIApp, trusted_origins: Iterable[str] = (),
                 token: Optional[str] = None, allowed_hosts: Iterable[str] = (),
                 logins: Optional[Logins] = None) -> None:
        self.app = app
        self.trusted = tuple(trusted_origins)
        self.token = check_token(token)
        self.hosts = tuple(allowed_hosts)
        self.logins = Logins() if logins is None else logins

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        nonce = secrets.token_urlsafe(16)
        state = scope.setdefault("state", {})
        state["csp_nonce"] = nonce
        extra = security_headers(nonce)

        async def send_guarded(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {k for k, _ in extra}
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower()
                           not in names]
                message = {**message, "headers": headers + extra}
            await send(message)

        headers = scope.get("headers", [])
        scheme = scope.get("scheme", "http")
        why = foreign_host(headers, scheme, scope.get("server"), self.hosts)
        if why is not None:
            refused(scope, 421, why)
            await _refuse(send_guarded, 421, f"refused: {why}")
            return
        user = None
        if self.token is not None:
            user = await self._login(scope, headers, send_guarded)
            if user is None:
                return
            state["user"] = user
        why = cross_site(scope["method"], headers, scheme, self.trusted)
        if why is not None:
            refused(scope, 403, why, user)
            await _refuse(send_guarded, 403, f"refused: {why}")
            return
        await self.app(scope, receive, send_guarded)

    async def _login(self, scope: Scope, headers: Any, send: Send) -> Optional[str]:
        """The user name of a request giving the token; None when it was refused
        (401 without the right token, 429 for an address that gave too many wrong
        ones)."""
        assert self.token is not None
        client = scope.get("client")
        address = str(client[0]) if client else "-"
        wait = self.logins.wait(address)
        if wait is not None:
            if self.logins.first_refusal(address):
                refused(scope, 429, "too many wrong tokens from this address")
            await _refuse(send, 429, "too many wrong tokens: try again later",
                          [(b"retry-after", str(max(1, round(wait))).encode())])
            return None
        given = credentials(headers)
        if given is None or not hmac.compare_digest(given.password.encode(),
                                                    self.token.encode()):
            if given is not None:  # no Authorization at all: a browser's first request
                self.logins.failed(address)
                refused(scope, 401, "wrong token", given.user)
            await _refuse(send, 401, "the dashboard's token is needed",
                          [(b"www-authenticate", b'Basic realm="fdbrecipes"')])
            return None
        return given.user


async def _refuse(send: Send, status: int, text: str,
                  headers: Iterable[Tuple[bytes, bytes]] = ()) -> None:
    """Answer ``status`` with ``text`` as plain text."""
    body = text.encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                            (b"content-length", str(len(body)).encode()), *headers]})
    await send({"type": "http.response.body", "body": body})
