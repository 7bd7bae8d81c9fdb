"""The dashboard served for a test: uvicorn in this event loop on a free port, talking to a
generated server over gRPC."""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import urllib.parse
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

import uvicorn
from taskdash import DashboardConfig, create_app

from support.observe_support import free_port
from support.worker_support import wait_until

ADMIN_TOKEN = "admin-token-0123456789abcdef"
READ_TOKEN = "read-token-0123456789abcdef"


@contextlib.asynccontextmanager
async def dashboard(data_plane: str, host: str = "127.0.0.1", **overrides: Any) -> AsyncIterator[str]:
    """Yields the dashboard's base URL once it serves (reached through 127.0.0.1 whatever `host`)."""
    cfg = DashboardConfig(data_plane_addr=data_plane, listen_host=host, **overrides)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(cfg), host=host, port=port, log_level="warning", lifespan="on"))
    serving = asyncio.create_task(server.serve())
    try:
        await wait_until(lambda: server.started or serving.done(), timeout=15, what="the dashboard serving")
        if serving.done():
            serving.result()
            raise AssertionError("the dashboard stopped before it served")
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await asyncio.wait_for(serving, 15)


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    text: str


def _request(method: str, url: str, headers: Mapping[str, str], form: Mapping[str, str] | None) -> Answer:
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.netloc, timeout=15)
    try:
        body = urllib.parse.urlencode(form) if form is not None else None
        sent = {**headers, **({"content-type": "application/x-www-form-urlencoded"} if body is not None else {})}
        conn.request(method, parts.path + (f"?{parts.query}" if parts.query else ""), body=body, headers=sent)
        resp = conn.getresponse()
        return Answer(resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read().decode())
    finally:
        conn.close()


async def request(
    method: str, url: str, headers: Mapping[str, str] | None = None, form: Mapping[str, str] | None = None
) -> Answer:
    """One HTTP request, redirects not followed."""
    return await asyncio.to_thread(_request, method, url, headers or {}, form)
