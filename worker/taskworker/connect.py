"""The channel to the data plane: TLS, a client certificate (mTLS), a bearer token, and a
fast, clear failure when the worker's settings do not match the server's (docs/security.md).

Environment (all optional):

- DATA_PLANE_TLS: `true` to speak TLS with the system's root certificates; implied by
  DATA_PLANE_TLS_CA or DATA_PLANE_TLS_CERT.
- DATA_PLANE_TLS_CA: PEM file of the CA that signed the server's certificate.
- DATA_PLANE_TLS_CERT / DATA_PLANE_TLS_KEY: this worker's client certificate and key (mTLS).
- DATA_PLANE_TOKEN, or DATA_PLANE_TOKEN_FILE: the bearer token sent with every call.
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from . import retry

_TRUE = ("1", "true", "yes", "on")
# The health service every generated server has; an empty HealthCheckRequest is zero bytes, so
# the probe needs no grpc_health dependency.
_HEALTH_CHECK = "/grpc.health.v1.Health/Check"


# Fast reconnect: gRPC's default back-off grows to 120 s, so a worker could sit idle for minutes
# after the server returned. Capped at 1 s, a worker reconnects within a second of it; calls made
# with wait_for_ready (claims, reports) then proceed at once.
RECONNECT_OPTIONS = (
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
)


class ConnectionSetupError(RuntimeError):
    """The worker cannot talk to the server as configured; the message says what to change."""


# Several data-plane servers behind one channel: each call goes to the next ready one.
ROUND_ROBIN = (("grpc.lb_policy_name", "round_robin"),)


def channel_target(address: str) -> tuple[str, tuple[tuple[str, Any], ...]]:
    """The gRPC target and channel options for `address`.

    One `host:port` (or any gRPC target) is used as it is. Several comma-separated `ip:port`
    (`10.0.0.1:50051,10.0.0.2:50051`: several server processes or hosts) become one `ipv4:` (or
    `ipv6:`) target with client-side round_robin over them; so does a `dns:///name:port` target, over
    every address the name resolves to. Host names cannot be listed (gRPC resolves a list of IP
    literals only): give them one DNS name instead."""
    parts = [part.strip() for part in address.split(",") if part.strip()]
    if address.startswith("dns:"):
        return address, RECONNECT_OPTIONS + ROUND_ROBIN
    if len(parts) <= 1:
        return address, RECONNECT_OPTIONS
    families = set()
    for part in parts:
        host = part.rsplit(":", 1)[0].strip("[]") if ":" in part else ""
        try:
            families.add(ipaddress.ip_address(host).version)
        except ValueError:
            raise ConnectionSetupError(
                f"several data-plane addresses must each be ip:port, not {part!r}: for host names use one DNS "
                "name that resolves to every server (dns:///name:port)"
            ) from None
    if len(families) > 1:
        raise ConnectionSetupError(f"several data-plane addresses must all be IPv4 or all IPv6: {address!r}")
    return f"ipv{families.pop()}:{','.join(parts)}", RECONNECT_OPTIONS + ROUND_ROBIN


@dataclass(frozen=True)
class ChannelSettings:
    """How to reach the data plane. `tls` false with a CA or certificate given is a contradiction."""

    tls: bool = False
    ca: bytes | None = None
    cert: bytes | None = None
    key: bytes | None = None
    token: str | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ChannelSettings:
        env = os.environ if env is None else env

        def read(name: str) -> bytes | None:
            path = env.get(name)
            return Path(path).read_bytes() if path else None

        token = env.get("DATA_PLANE_TOKEN") or None
        if token is None and env.get("DATA_PLANE_TOKEN_FILE"):
            token = Path(env["DATA_PLANE_TOKEN_FILE"]).read_text().strip() or None
        ca, cert, key = read("DATA_PLANE_TLS_CA"), read("DATA_PLANE_TLS_CERT"), read("DATA_PLANE_TLS_KEY")
        tls = env.get("DATA_PLANE_TLS", "").strip().lower() in _TRUE or ca is not None or cert is not None
        return cls(tls=tls, ca=ca, cert=cert, key=key, token=token)


def open_channel(address: str, settings: ChannelSettings | None = None) -> grpc.aio.Channel:
    """An aio channel to `address` with `settings` (default: from the environment); several
    comma-separated addresses are load-balanced round-robin (`channel_target`)."""
    settings = ChannelSettings.from_env() if settings is None else settings
    if (settings.cert is None) != (settings.key is None):
        raise ConnectionSetupError("DATA_PLANE_TLS_CERT and DATA_PLANE_TLS_KEY go together")
    interceptors: Any = [BearerToken(settings.token)] if settings.token else None
    target, options = channel_target(address)
    if settings.tls:
        credentials = grpc.ssl_channel_credentials(settings.ca, settings.key, settings.cert)
        return grpc.aio.secure_channel(target, credentials, options=options, interceptors=interceptors)
    if settings.token and not all(_is_loopback(part) for part in address.split(",")):
        raise ConnectionSetupError(
            f"refusing to send the bearer token to {address} in clear text: set DATA_PLANE_TLS_CA "
            "(or DATA_PLANE_TLS=true) so the channel uses TLS"
        )
    return grpc.aio.insecure_channel(target, options=options, interceptors=interceptors)


class BearerToken(
    grpc.aio.UnaryUnaryClientInterceptor,  # type: ignore[type-arg]
    grpc.aio.UnaryStreamClientInterceptor,  # type: ignore[type-arg]
):
    """Adds `authorization: Bearer <token>` to every call (unary and server-streaming: every
    RPC the queue has)."""

    def __init__(self, token: str) -> None:
        self._header = ("authorization", f"Bearer {token}")

    def _with_token(self, details: grpc.aio.ClientCallDetails) -> grpc.aio.ClientCallDetails:
        metadata = grpc.aio.Metadata(*(tuple(details.metadata) if details.metadata else ()))
        metadata.add(*self._header)
        return grpc.aio.ClientCallDetails(
            details.method, details.timeout, metadata, details.credentials, details.wait_for_ready
        )

    async def intercept_unary_unary(self, continuation: Any, client_call_details: Any, request: Any) -> Any:
        return await continuation(self._with_token(client_call_details), request)

    async def intercept_unary_stream(self, continuation: Any, client_call_details: Any, request: Any) -> Any:
        return await continuation(self._with_token(client_call_details), request)


async def wait_for_server(channel: grpc.aio.Channel, address: str, settings: ChannelSettings, timeout: float) -> None:
    """Return once the server at `address` answers a call on `channel`.

    A server that is not up yet (connection refused) is waited for, up to `timeout` seconds.
    Settings that can never work fail at once with ConnectionSetupError: TLS against a
    plaintext server or the reverse, an untrusted server certificate, a missing or rejected
    client certificate, a missing or wrong token.
    """
    probe = channel.unary_unary(_HEALTH_CHECK, request_serializer=bytes, response_deserializer=bytes)
    deadline = time.monotonic() + timeout
    closed_in_a_row = 0
    backoff = retry.Backoff("connect", base=0.1, cap=2.0)
    while True:
        try:
            await probe(b"", timeout=max(0.1, min(5.0, deadline - time.monotonic())))
            return
        except grpc.aio.AioRpcError as err:
            code, details = err.code(), err.details() or ""
            if code in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.UNIMPLEMENTED):
                return  # a server without (this) health service: reachable all the same
            if code == grpc.StatusCode.UNAUTHENTICATED:
                what = "refused the bearer token" if settings.token else "requires a bearer token"
                raise ConnectionSetupError(
                    f"the server at {address} {what}: set DATA_PLANE_TOKEN or DATA_PLANE_TOKEN_FILE ({details})"
                ) from None
            problem = _setup_problem(details, settings)
            if problem is None and "Socket closed" in details:
                # The server hangs up during connection setup: what a TLS server does to a
                # plaintext client, or an mTLS server to a client without an accepted
                # certificate. Twice more to rule out a server restarting.
                closed_in_a_row += 1
                if closed_in_a_row >= 3:
                    problem = (
                        "requires TLS (set DATA_PLANE_TLS_CA, or DATA_PLANE_TLS=true)"
                        if not settings.tls
                        else "refused this worker's client certificate (set DATA_PLANE_TLS_CERT and "
                        "DATA_PLANE_TLS_KEY to a certificate signed by the server's client CA)"
                    )
            else:
                closed_in_a_row = 0
            if problem is None and not retry.transient(err):  # the same probe is refused alike
                problem = f"refused the probe ({code.name})"
            if problem is not None:
                raise ConnectionSetupError(
                    f"cannot talk to the server at {address}: it {problem} ({details})"
                ) from None
            if time.monotonic() >= deadline:
                raise ConnectionSetupError(
                    f"no server answered at {address} within {timeout:.0f}s (last error: {details})"
                ) from None
            retry.COUNTS[("connect", code.name, "transient")] += 1
            await asyncio.sleep(min(backoff.next_delay(), max(0.0, deadline - time.monotonic())))


def _setup_problem(details: str, settings: ChannelSettings) -> str | None:
    """What a connection error says about the settings, if it is one retrying cannot fix."""
    if "WRONG_VERSION_NUMBER" in details:
        return "does not speak TLS (unset DATA_PLANE_TLS / DATA_PLANE_TLS_CA)"
    if "CERTIFICATE_VERIFY_FAILED" in details:
        return "presented a certificate this worker does not trust (set DATA_PLANE_TLS_CA to the CA that signed it)"
    if "Tls handshake failed" in details or "Handshake failed" in details:
        return "rejected the TLS handshake"
    return None


def _is_loopback(address: str) -> bool:
    if address.startswith(("unix:", "unix-abstract:")):
        return True
    host = address.removeprefix("dns:").removeprefix("ipv4:").removeprefix("ipv6:").lstrip("/")
    host = host.rsplit(":", 1)[0] if ":" in host else host
    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
