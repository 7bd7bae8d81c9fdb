"""Who may call the generated server: mutual TLS and bearer tokens. docs/security.md.

- **mTLS** (`--tls-client-ca`): the TLS handshake requires a client certificate signed by the
  given CA. A client without one never gets a connection, so it never reaches a method (it sees
  UNAVAILABLE: no call exists yet to carry a status). `--tls-client-names` narrows that to
  certificates naming one of the given names (`ClientNameInterceptor`, UNAUTHENTICATED otherwise).
- **Bearer tokens** (`AUTH_TOKENS` / `--auth-tokens-file`): every call carries
  `authorization: Bearer <token>`; `AuthInterceptor` compares it, in constant time, with each
  configured token and answers UNAUTHENTICATED when none matches — before the request is even
  decoded. The health service may stay open (`--health-open`, default true) for load balancers.
- **Exposure**: with neither configured the server listens only on a loopback address, unless
  `--allow-unauthenticated` says otherwise (`check_exposure`).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import grpc

from .interceptors import WrapOnce, checked_before_reading, refusing

log = logging.getLogger("pydb.auth")

HEALTH_METHODS = frozenset({"/grpc.health.v1.Health/Check", "/grpc.health.v1.Health/Watch"})
AUTHORIZATION = "authorization"
_BEARER = "bearer "
#: Shorter tokens are refused at start: a bearer token is a password nobody has to type.
MIN_TOKEN_LENGTH = 16


class UnsafeConfiguration(Exception):
    """A configuration the server refuses to start with; the message says what to set."""


def parse_list(text: str) -> list[str]:
    """The items of a list setting (tokens, client names) or of a tokens file: separated by commas
    or whitespace; a line starting with `#` is a comment."""
    found: list[str] = []
    for line in text.splitlines():
        if line.lstrip().startswith("#"):
            continue
        found.extend(t for t in line.replace(",", " ").split() if t)
    return found


def load_tokens(inline: str | None, file: str | None) -> tuple[bytes, ...]:
    """Every accepted token (AUTH_TOKENS and the lines of the tokens file), as SHA-256 digests."""
    tokens = parse_list(inline or "")
    if file:
        try:
            tokens += parse_list(Path(file).read_text())
        except OSError as err:
            raise UnsafeConfiguration(f"cannot read the bearer tokens file: {err}") from err
    short = [t for t in tokens if len(t) < MIN_TOKEN_LENGTH]
    if short:
        raise UnsafeConfiguration(
            f"{len(short)} bearer token(s) shorter than {MIN_TOKEN_LENGTH} characters; "
            "generate tokens with e.g. `openssl rand -hex 32`"
        )
    return tuple(_digest(t.encode()) for t in dict.fromkeys(tokens))


def _digest(token: bytes) -> bytes:
    # Comparing fixed-length digests keeps the comparison's time independent of the token's length too.
    return hashlib.sha256(token).digest()


def token_matches(presented: str, accepted: Sequence[bytes]) -> bool:
    """Constant time in the presented value: every accepted token is compared, no early exit."""
    candidate = _digest(presented.encode())
    matched = False
    for token in accepted:
        matched |= hmac.compare_digest(candidate, token)
    return matched


def bearer_token(metadata: Iterable[tuple[str, str | bytes]] | None) -> str | None:
    for key, value in metadata or ():
        if key.lower() == AUTHORIZATION and isinstance(value, str) and value[: len(_BEARER)].lower() == _BEARER:
            return value[len(_BEARER) :].strip()
    return None


def is_loopback(listen_addr: str) -> bool:
    """Whether `host:port` (or `[v6]:port`, or a `unix:` socket) can only be reached from this machine."""
    if listen_addr.startswith(("unix:", "unix-abstract:")):
        return True
    host = listen_addr.rsplit(":", 1)[0] if ":" in listen_addr else listen_addr
    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name other than localhost, or empty (every interface)


def check_exposure(listen_addr: str, authenticated: bool, allow_unauthenticated: bool) -> None:
    """Refuse to serve every caller on a reachable address unless explicitly allowed."""
    if authenticated or allow_unauthenticated or is_loopback(listen_addr):
        return
    raise UnsafeConfiguration(
        f"refusing to listen on {listen_addr} without authentication: anyone who reaches it could claim, "
        "complete or fail any task and read its input and output. Set AUTH_TOKENS / --auth-tokens-file "
        "and/or --tls-client-ca (docs/security.md), or pass --allow-unauthenticated if a network policy "
        "already restricts who can connect"
    )


def server_credentials(cert: str, key: str, client_ca: str | None) -> grpc.ServerCredentials:
    """TLS with the given certificate; with `client_ca`, clients must present a certificate it signed."""
    chain, private_key = Path(cert).read_bytes(), Path(key).read_bytes()
    if client_ca is None:
        return grpc.ssl_server_credentials([(private_key, chain)])
    return grpc.ssl_server_credentials(
        [(private_key, chain)], root_certificates=Path(client_ca).read_bytes(), require_client_auth=True
    )


class AuthInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[type-arg]
    """Bearer-token check for every method but `open_methods`; UNAUTHENTICATED otherwise."""

    def __init__(self, tokens: Sequence[bytes], open_methods: Iterable[str] = ()) -> None:
        if not tokens:
            raise ValueError("AuthInterceptor needs at least one token")
        self._tokens = tuple(tokens)
        self._open = frozenset(open_methods)

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any]]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any]:
        method = handler_call_details.method
        if method in self._open:
            return await continuation(handler_call_details)
        presented = bearer_token(handler_call_details.invocation_metadata)
        if presented is not None and token_matches(presented, self._tokens):
            return await continuation(handler_call_details)
        reason = "no bearer token" if presented is None else "wrong bearer token"

        async def refuse(context: grpc.aio.ServicerContext[Any, Any]) -> None:
            log.warning(
                "event=unauthenticated method=%s reason=%s peer=%s", method, reason.replace(" ", "_"), context.peer()
            )
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, f"{reason}: send `authorization: Bearer <token>`")

        # The same handler for a real method and an unknown one (names cannot be probed
        # unauthenticated), and it answers before reading: the request is neither parsed nor
        # even received whole (interceptors.refusing).
        return refusing(refuse)


def certificate_names(context: grpc.aio.ServicerContext[Any, Any]) -> set[str]:
    """The verified client certificate's subject common name and DNS/URI alternative names."""
    peer = context.auth_context()
    return {
        value.decode() if isinstance(value, bytes) else str(value)
        for key in ("x509_common_name", "x509_subject_alternative_name")
        for value in peer.get(key, ())
    }


class ClientNameInterceptor(WrapOnce):
    """Under mTLS, admit only client certificates naming one of `names` (their CN or a
    subjectAltName): a certificate the client CA signed for another service is answered
    UNAUTHENTICATED. The check runs as the call starts, on the verified certificate."""

    def __init__(self, names: Iterable[str], open_methods: Iterable[str] = ()) -> None:
        super().__init__()
        self._names = frozenset(names)
        self._open = frozenset(open_methods)

    def applies(self, handler: grpc.RpcMethodHandler[Any, Any], method: str) -> bool:
        return method not in self._open

    def wrap(self, handler: grpc.RpcMethodHandler[Any, Any], method: str) -> grpc.RpcMethodHandler[Any, Any]:
        # Checked before the request is read: a refused certificate's body is never buffered whole.
        return checked_before_reading(handler, self._admission(method))

    def _admission(self, method: str) -> Callable[[grpc.aio.ServicerContext[Any, Any]], Awaitable[None]]:
        async def admit(context: grpc.aio.ServicerContext[Any, Any]) -> None:
            presented = certificate_names(context)
            if not presented & self._names:
                shown = ",".join(sorted(presented)) or "-"
                log.warning("event=unauthenticated method=%s reason=certificate_name names=%s", method, shown)
                await context.abort(grpc.StatusCode.UNAUTHENTICATED, "client certificate not accepted by this server")

        return admit

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any]]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any]:
        handler = await super().intercept_service(continuation, handler_call_details)
        method = handler_call_details.method
        if handler is not None or method in self._open:
            return handler
        # An unknown method: a refused certificate gets the answer a real method gives it
        # (UNAUTHENTICATED), so it cannot tell the two apart; an accepted one, UNIMPLEMENTED.
        admit = self._admission(method)

        async def unknown(context: grpc.aio.ServicerContext[Any, Any]) -> None:
            await admit(context)
            await context.abort(grpc.StatusCode.UNIMPLEMENTED, "Method not found!")

        return refusing(unknown)
