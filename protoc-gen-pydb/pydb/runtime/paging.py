"""Page tokens for the generated keyset pagination (AIP-158): opaque, authenticated, bound to the
request they were made for.

A token is base64url(tag ‖ payload): the payload is the last row's ORDER BY keys as PostgreSQL
text, which keyset they belong to, and a digest of the request's other fields (the filters and
the sort: a token used with other filters is refused, as AIP-158 asks); the tag is an HMAC-SHA256
of the RPC's name and the payload under the server's key. So a token the server did not make, or
one edited, is INVALID_ARGUMENT before any SQL runs; the values in it are bound parameters anyway.

The key is `PYDB_PAGE_TOKEN_KEY` from the environment (any text; set the same on every replica of
a service so a token made by one is taken by the others), else random per process: tokens then
last as long as the process.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from google.protobuf.message import Message

from .errors import InvalidArgument

_TAG = 16  # bytes of the HMAC kept: 128 bits


def _key() -> bytes:
    configured = os.environ.get("PYDB_PAGE_TOKEN_KEY")
    return hashlib.sha256(configured.encode()).digest() if configured else os.urandom(32)


_KEY = _key()


def set_key(key: str) -> None:
    """Use `key` (any text) for every token made or checked from now on."""
    global _KEY
    _KEY = hashlib.sha256(key.encode()).digest()


@dataclass(frozen=True)
class Keyset:
    """One ORDER BY of a paged RPC: the predicate that starts a page after a token's row (psycopg
    text with `%(_page_<n>)s` placeholders) and where the keys are in a row."""

    number: int
    predicate: str
    positions: tuple[int, ...]


def page_size(value: int, default: int, maximum: int, field: str = "page_size") -> int:
    """AIP-158: 0 is the default size, a size past the maximum is the maximum, a negative one is
    INVALID_ARGUMENT."""
    if value < 0:
        raise InvalidArgument(f"{field} must not be negative, got {value}")
    return min(value or default, maximum)


def _digest(request: Message, token_field: str, size_field: str) -> str:
    rest = type(request)()
    rest.CopyFrom(request)
    rest.ClearField(token_field)
    rest.ClearField(size_field)
    return hashlib.sha256(rest.SerializeToString(deterministic=True)).hexdigest()[:32]


def _tag(rpc: str, payload: bytes) -> bytes:
    return hmac.new(_KEY, rpc.encode() + b"\0" + payload, hashlib.sha256).digest()[:_TAG]


def _text(value: Any) -> str:
    """A key's value as text PostgreSQL reads back into its type."""
    if hasattr(value, "isoformat"):
        return str(value.isoformat())
    return str(value)


def next_page_token(
    rpc: str, keyset: Keyset, request: Message, row: Sequence[Any], token_field: str, size_field: str
) -> str:
    """The token of the page after `row` (the page's last row)."""
    payload = json.dumps(
        [keyset.number, _digest(request, token_field, size_field), [_text(row[i]) for i in keyset.positions]],
        separators=(",", ":"),
    ).encode()
    return base64.urlsafe_b64encode(_tag(rpc, payload) + payload).decode().rstrip("=")


def page_after(rpc: str, keyset: Keyset, request: Message, token_field: str, size_field: str) -> dict[str, str]:
    """The parameters of the page predicate for the request's token ({} for the first page)."""
    token = getattr(request, token_field)
    if not token:
        return {}
    bad = InvalidArgument(f"{token_field} is not a token this service made for this request")
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    except (binascii.Error, ValueError):
        raise bad from None
    tag, payload = raw[:_TAG], raw[_TAG:]
    if len(tag) < _TAG or not hmac.compare_digest(tag, _tag(rpc, payload)):
        raise bad
    number, digest, values = json.loads(payload)
    if number != keyset.number or digest != _digest(request, token_field, size_field):
        raise InvalidArgument(f"{token_field} was made for other filters or another sort: start again without it")
    return {f"_page_{i}": v for i, v in enumerate(values)}
