"""Helpers of the observability tests: a free local port, and a scrape of a real /metrics."""

from __future__ import annotations

import asyncio
import socket
import urllib.request

from prometheus_client.parser import text_string_to_metric_families


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as resp:
        body: bytes = resp.read()
        return body.decode()


async def scrape(port: int) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample of http://127.0.0.1:port/metrics, by (name, labels)."""
    text = await asyncio.to_thread(_get, f"http://127.0.0.1:{port}/metrics")
    out: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return out


def value(samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str) -> float:
    """The sample `name` with exactly `labels` (0 when it has not appeared yet)."""
    return samples.get((name, frozenset(labels.items())), 0.0)
