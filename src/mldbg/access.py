"""Who may talk to mldbg's HTTP servers (the dashboard, the metrics endpoint).

Two checks, the same for both servers:

- **The `Host` header** must name this server, so that a web page on another site cannot
  reach it through DNS rebinding (the attacker's name re-pointed at 127.0.0.1: the browser
  then sends that name as `Host`). Accepted: `localhost`, `127.0.0.1`, `[::1]` and the names
  given in `allowed_hosts`; for a server bound to a non-loopback address also that address,
  this machine's host names and any IP literal (a rebinding attack needs a DNS name); with a
  port, only the server's own port. Anything else is answered 421 (Misdirected Request).
- **A token** for any server bound to a non-loopback address (`0.0.0.0`, a LAN address):
  there anyone who can reach the port could read the runs. The token is given (or generated
  at start and printed in the URL the command shows) and required on every request: as
  `?token=...` (the dashboard then sets a cookie, so links and the page's own requests need
  no more), `Authorization: Bearer ...`, basic auth with the token as password (what
  Prometheus scrape configs offer), or the `mldbg_token` cookie. Missing or wrong: 401.
"""

from __future__ import annotations

import base64
import hmac
import ipaddress
import secrets
import socket
from collections.abc import Iterable
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from typing import Any, Protocol
from urllib.parse import parse_qs

from mldbg.errors import InvalidConfig

COOKIE = "mldbg_token"


class Headers(Protocol):
    """A request's headers with every repeated one (Starlette's, http.server's, a dict)."""

    def items(self) -> Iterable[tuple[str, Any]]: ...


LOOPBACK_NAMES = frozenset({"localhost", "localhost.", "127.0.0.1", "::1"})
WILDCARDS = frozenset({"", "0.0.0.0", "::"})


def is_loopback(host: str) -> bool:
    """True for an address only this machine can reach (127.0.0.0/8, ::1, localhost)."""
    host = host.strip("[]").lower()
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def new_token() -> str:
    return secrets.token_urlsafe(24)


@dataclass
class Access:
    """The checks for one server bound to `host` (`port`: None accepts any port in `Host`).
    `token`: required when set; a non-loopback `host` without one gets a generated token."""

    host: str = "127.0.0.1"
    port: int | None = None
    token: str | None = None
    allowed_hosts: Iterable[str] = ()
    names: set[str] = field(init=False, default_factory=set)

    def __post_init__(self) -> None:
        if self.token is not None and len(self.token) < 8:
            raise InvalidConfig("an access token must have at least 8 characters: use a longer --token")
        if self.token is None and not is_loopback(self.host):
            self.token = new_token()
        names = set(LOOPBACK_NAMES) | {h.strip("[]").lower() for h in self.allowed_hosts}
        if self.host.lower() not in WILDCARDS:
            names.add(self.host.strip("[]").lower())
        if not is_loopback(self.host):  # reached over the network: by this machine's names too
            for name in (socket.gethostname(), socket.getfqdn()):
                names.add(name.lower())
        self.names = names

    # the checks -------------------------------------------------------------------------
    def host_problem(self, header: str | None) -> str | None:
        """Why a request with this `Host` header is refused, or None."""
        if not header:
            return "a request without a Host header"
        name, port = _split_host(header.strip().lower())
        if port is not None and self.port is not None and port != self.port:
            return f"Host {header!r} names port {port}, this server listens on {self.port}"
        if name in self.names or (_is_ip(name) and (is_loopback(name) or not is_loopback(self.host))):
            return None
        return (
            f"Host {header!r} does not name this server (a DNS rebinding attempt?); open it as "
            f"http://127.0.0.1:{self.port or 'PORT'}/ or allow the name"
        )

    def token_ok(self, query: str, headers: Headers) -> tuple[bool, bool]:
        """(accepted, from the query string): does the request carry the token?"""
        if self.token is None:
            return True, False
        given = parse_qs(query).get("token", [])
        if any(_same(t, self.token) for t in given):
            return True, True
        auth = _header(headers, "authorization") or ""
        scheme, _, value = auth.partition(" ")
        if scheme.lower() == "bearer" and _same(value.strip(), self.token):
            return True, False
        if scheme.lower() == "basic":
            try:
                _, _, password = base64.b64decode(value.strip()).decode().partition(":")
            except (ValueError, UnicodeDecodeError):
                password = ""
            if _same(password, self.token):
                return True, False
        cookie = SimpleCookie()
        try:
            cookie.load(_header(headers, "cookie") or "")
        except Exception:  # a malformed cookie header carries no token
            return False, False
        if COOKIE in cookie and _same(cookie[COOKIE].value, self.token):
            return True, False
        return False, False

    def check(self, query: str, headers: Headers) -> tuple[int, str] | None:
        """(status, reason) to refuse the request with, or None to serve it."""
        hosts = [value for key, value in headers.items() if key.lower() == "host"]
        problem = (
            self.host_problem(hosts[0] if hosts else None)
            if len(hosts) < 2
            else f"a request with {len(hosts)} Host headers (which one names the server?)"
        )
        if problem is not None:
            return 421, problem
        if not self.token_ok(query, headers)[0]:
            return 401, (
                "this server needs its access token: open the URL it printed (with ?token=...), or "
                "send 'Authorization: Bearer <token>'"
            )
        return None

    def cookie_header(self) -> str:
        """Set-Cookie value that lets a browser come back without the token in the URL."""
        return f"{COOKIE}={self.token}; Path=/; HttpOnly; SameSite=Strict"

    def url(self, base: str) -> str:
        """`base` with the token, as a user would open it."""
        return base if self.token is None else f"{base}?token={self.token}"


def _split_host(value: str) -> tuple[str, int | None]:
    """(name, port) of a Host header; a malformed one (`[::1]evil`, `localhost:abc`, a port
    out of range) gives the name "", which names no server, whatever port the server has."""
    if value.startswith("["):  # [::1]:8000
        name, closed, rest = value[1:].partition("]")
        if not closed or (rest and not rest.startswith(":")):
            return "", None
        port = rest[1:]
    elif value.count(":") == 1:
        name, _, port = value.partition(":")
    else:
        name, port = value, ""
    if not port:
        return name, None
    if not (port.isascii() and port.isdigit()) or not 0 < int(port) < 65536:
        return "", None
    return name, int(port)


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _same(given: str, token: str) -> bool:
    return hmac.compare_digest(given.encode(), token.encode())


def _header(headers: Headers, name: str) -> str | None:
    for key, value in headers.items():
        if key.lower() == name:
            return value
    return None
