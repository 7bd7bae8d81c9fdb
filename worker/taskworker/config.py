"""Environment contract shared by the wake producer and the workers."""

from __future__ import annotations

import os
from collections.abc import Mapping

DEFAULT_REDIS_ADDR = "redis://127.0.0.1:6379/0"
DEFAULT_ENVIRONMENT = "local"


def redis_url(env: Mapping[str, str] | None = None) -> str:
    """REDIS_ADDR, else its alias REDIS_URL, as a redis:// URL (the DB index is the URL path).

    A bare `host:port` is accepted and means DB 0.
    """
    env = os.environ if env is None else env
    raw = (env.get("REDIS_ADDR") or env.get("REDIS_URL") or DEFAULT_REDIS_ADDR).strip()
    if "://" not in raw:
        raw = f"redis://{raw}"
    return raw


def environment(env: Mapping[str, str] | None = None) -> str:
    env = os.environ if env is None else env
    return (env.get("ENVIRONMENT") or DEFAULT_ENVIRONMENT).strip()


def wake_channel(environment_name: str | None = None) -> str:
    """`{env}:common:task:wake`, namespaced by the deploy environment."""
    return f"{environment_name if environment_name is not None else environment()}:common:task:wake"


def cancel_channel(environment_name: str | None = None) -> str:
    """`{env}:common:task:cancel`: the ids of tasks cancelled while running."""
    return f"{environment_name if environment_name is not None else environment()}:common:task:cancel"
