"""The UI answers only its own pages: a Host check on every request, an Origin check and a CSRF token on every
state-changing one.

- **Host** (DNS rebinding): a page of another site whose name was re-pointed at 127.0.0.1 reaches the UI with that
  site's name in `Host`. Only the address the connection arrived on (an IP literal) at the UI's port, or
  `localhost` when that address is loopback, is answered; anything else gets 403 before any route runs.
- **Origin**: a browser names the page that posted a form; a POST whose `Origin` (or, without one, `Referer`) is
  not this server is refused with 403.
- **CSRF token**: every form carries a hidden `csrf` field holding the server's random token (non-browser clients
  may send it as the `X-CSRF-Token` header); a POST without it, or with another, is refused with 403. Another site
  cannot read the UI's pages (the browser's same-origin policy, kept by the Host check), so it cannot know it.

Refusals happen before the app reads the request, so a refused form changes nothing.
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
from collections.abc import Callable
from urllib.parse import parse_qs, urlsplit

from fastapi.responses import HTMLResponse

from wander.ui.pages import page

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
TOKEN_FIELD = "csrf"
TOKEN_HEADER = b"x-csrf-token"
FORM_TYPE = "application/x-www-form-urlencoded"


def new_token() -> str:
    """A fresh random CSRF token (one per server)."""
    return secrets.token_urlsafe(32)


def token_field(token: str) -> str:
    """The hidden input every state-changing form carries."""
    return f'<input type="hidden" name="{TOKEN_FIELD}" value="{token}">'


def is_loopback(host: str | None) -> bool:
    """Whether `host` (a name or an IP literal, with or without [brackets]) is this machine's loopback."""
    if not host:
        return False
    host = host.strip("[]").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def host_allowed(host_header: str, server: tuple[str, int] | None) -> bool:
    """Whether a `Host` header names this server: its address (or `localhost` on loopback) at its port."""
    if server is None:
        return False
    address, port = server[0], server[1]
    try:
        parts = urlsplit(f"http://{host_header}")
        name, asked_port = parts.hostname, parts.port or 80
    except ValueError:  # a port that is not a number, brackets that do not close
        return False
    if not name or asked_port != port or parts.username is not None or parts.path or parts.query:
        return False
    if name == "localhost":
        return is_loopback(address)
    try:
        return ipaddress.ip_address(name) == ipaddress.ip_address(address.strip("[]"))
    except ValueError:  # a DNS name other than localhost: the rebinding case
        return False


def same_origin(origin: str, host_header: str) -> bool:
    """Whether an `Origin` (or `Referer`) URL is this server as the browser reached it (scheme http, same Host)."""
    try:
        parts = urlsplit(origin)
        return parts.scheme == "http" and parts.netloc.lower() == host_header.lower()
    except ValueError:
        return False


class SameOrigin:
    """ASGI middleware: the Host, Origin and CSRF-token checks of the module docstring (403 when one fails)."""

    def __init__(self, app: Callable, token: str):
        self.app, self.token = app, token

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        """Refuse a request that is not from this server's own pages; pass the rest (its body replayed) on."""
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers: dict[bytes, bytes] = {}
        for key, value in scope.get("headers") or []:
            headers.setdefault(key.lower(), value)
        host = headers.get(b"host", b"").decode("latin-1")
        if not host_allowed(host, scope.get("server")):
            return await _refuse(
                scope,
                receive,
                send,
                f"Host {host!r} is not this server: open the UI at the address it printed "
                "(http://127.0.0.1:PORT/ or http://localhost:PORT/)",
            )
        if scope["method"] in SAFE_METHODS:
            return await self.app(scope, receive, send)
        origin = (headers.get(b"origin") or headers.get(b"referer") or b"").decode("latin-1")
        if origin and not same_origin(origin, host):
            return await _refuse(
                scope,
                receive,
                send,
                f"a form from {origin!r} was refused: the UI takes forms from its own pages",
            )
        body, more = await _read_body(receive)
        if not hmac.compare_digest(_token_of(headers, body).encode(), self.token.encode()):
            return await _refuse(
                scope,
                receive,
                send,
                "the form's CSRF token is missing or stale (the server restarted?): reload the page and send it again",
            )
        await self.app(scope, _replay(body, more), send)


def _token_of(headers: dict[bytes, bytes], body: bytes) -> str:
    """The token a request carries: its header, else the `csrf` field of a URL-encoded form; '' when none."""
    if TOKEN_HEADER in headers:
        return headers[TOKEN_HEADER].decode("latin-1")
    content_type = headers.get(b"content-type", b"").decode("latin-1").split(";")[0].strip().lower()
    if content_type != FORM_TYPE:
        return ""
    try:
        fields = parse_qs(body.decode("utf-8", "replace"), max_num_fields=100)
    except ValueError:  # more fields than any form of the UI has
        return ""
    values = fields.get(TOKEN_FIELD) or [""]
    return values[0]


async def _read_body(receive: Callable) -> tuple[bytes, list[dict]]:
    """The whole body (BodyLimit in front has bounded it), and any non-body message met on the way."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks), [message]
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks), []


def _replay(body: bytes, after: list[dict]) -> Callable:
    queue = [{"type": "http.request", "body": body, "more_body": False}, *after]

    async def receive() -> dict:
        return queue.pop(0) if queue else {"type": "http.disconnect"}

    return receive


async def _refuse(scope: dict, receive: Callable, send: Callable, reason: str) -> None:
    response = HTMLResponse(page("Refused", "", error=reason), status_code=403)
    await response(scope, receive, send)
