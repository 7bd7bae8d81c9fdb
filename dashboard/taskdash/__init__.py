"""taskdash: the task queue's web dashboard (docs/operations.md, "The dashboard").

Server-rendered pages (Starlette + Jinja2, plain HTML forms, a few lines of its own script for
live events) over the data plane's gRPC API: the dashboard holds no database credentials.
"""

from __future__ import annotations

from .app import DashboardConfig, create_app

__all__ = ["DashboardConfig", "create_app"]
