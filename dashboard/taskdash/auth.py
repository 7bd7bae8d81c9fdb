"""Who may use the dashboard: bearer tokens (DASHBOARD_TOKENS for operators who may act,
DASHBOARD_READ_TOKENS for those who may only look), presented as an `Authorization: Bearer`
header or through the login form, which sets a signed session cookie (HttpOnly, SameSite=Strict).

With no tokens configured the dashboard is open, which it allows on a loopback address only:
asked to listen anywhere else without tokens it refuses to start. Forms that act carry a CSRF
token bound to the session.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import secrets
import time
from dataclasses import dataclass
from typing import Literal

Role = Literal["admin", "read"]
SESSION_COOKIE = "taskdash_session"
SESSION_SECONDS = 12 * 3600
MIN_TOKEN_LENGTH = 16


class UnsafeConfiguration(ValueError):
    """A configuration the dashboard must not start with."""


def parse_tokens(text: str) -> list[str]:
    """Tokens separated by commas or whitespace; `#` starts a comment line."""
    found: list[str] = []
    for line in text.splitlines():
        if not line.lstrip().startswith("#"):
            found += [t for t in line.replace(",", " ").split() if t]
    return found


def is_loopback(host: str) -> bool:
    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass
class Authenticator:
    admin_tokens: tuple[bytes, ...]
    read_tokens: tuple[bytes, ...]
    secret: bytes

    @classmethod
    def create(cls, admin: list[str], read: list[str], host: str) -> Authenticator:
        for token in (*admin, *read):
            if len(token) < MIN_TOKEN_LENGTH:
                raise UnsafeConfiguration(f"a dashboard token is shorter than {MIN_TOKEN_LENGTH} characters")
        if not admin and not read and not is_loopback(host):
            raise UnsafeConfiguration(
                f"refusing to serve the dashboard on {host} without authentication: set DASHBOARD_TOKENS "
                "(and/or DASHBOARD_READ_TOKENS), or listen on 127.0.0.1"
            )
        digest = lambda t: hashlib.sha256(t.encode()).digest()  # noqa: E731
        return cls(tuple(map(digest, admin)), tuple(map(digest, read)), secrets.token_bytes(32))

    @property
    def open(self) -> bool:
        """No tokens configured (loopback only): everyone is an operator."""
        return not self.admin_tokens and not self.read_tokens

    def role_of_token(self, token: str) -> Role | None:
        presented = hashlib.sha256(token.encode()).digest()
        admin = any([hmac.compare_digest(presented, t) for t in self.admin_tokens])  # no early exit
        read = any([hmac.compare_digest(presented, t) for t in self.read_tokens])
        return "admin" if admin else "read" if read else None

    # -- the session cookie: "<role>.<expiry>.<nonce>.<mac>" -------------------------------
    def session_for(self, role: Role) -> str:
        body = f"{role}.{int(time.time()) + SESSION_SECONDS}.{secrets.token_urlsafe(12)}"
        return f"{body}.{self._mac(body)}"

    def role_of_session(self, cookie: str) -> Role | None:
        body, _, mac = cookie.rpartition(".")
        if not body or not hmac.compare_digest(mac, self._mac(body)):
            return None
        role, expiry, _nonce = [*body.split("."), "", "", ""][:3]
        if not expiry.isdigit() or int(expiry) < time.time() or role not in ("admin", "read"):
            return None
        return "admin" if role == "admin" else "read"

    def csrf_for(self, cookie: str) -> str:
        return self._mac("csrf:" + cookie)

    def _mac(self, text: str) -> str:
        raw = hmac.new(self.secret, text.encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")
