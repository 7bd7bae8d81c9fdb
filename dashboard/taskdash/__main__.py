"""`python -m taskdash` (or `taskdash`): serve the dashboard.

Flags and environment: --listen-addr / DASHBOARD_ADDR (default 127.0.0.1:8080), --read-only /
DASHBOARD_READ_ONLY, DASHBOARD_TOKENS / DASHBOARD_TOKENS_FILE (operators, who may act) and
DASHBOARD_READ_TOKENS (who may only look); the data plane: DATA_PLANE_ADDR and
DATA_PLANE_TLS* / DATA_PLANE_TOKEN* (taskworker.connect, docs/security.md).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import uvicorn
from taskworker.connect import ChannelSettings

from .app import DashboardConfig, create_app
from .auth import UnsafeConfiguration, parse_tokens


def config_from(argv: list[str] | None = None) -> tuple[DashboardConfig, str, int]:
    p = argparse.ArgumentParser(prog="taskdash", description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--listen-addr", default=os.environ.get("DASHBOARD_ADDR", "127.0.0.1:8080"), help="host:port")
    p.add_argument("--data-plane-addr", default=os.environ.get("DATA_PLANE_ADDR", "127.0.0.1:50051"))
    p.add_argument(
        "--read-only",
        action="store_true",
        default=os.environ.get("DASHBOARD_READ_ONLY", "").lower() in ("1", "true", "yes", "on"),
        help="show, never act (no cancel, retry, pause or resume for anyone)",
    )
    a = p.parse_args(argv)
    host, _, port = a.listen_addr.rpartition(":")
    if not port.isdigit():
        p.error("--listen-addr must be host:port")
    admin = parse_tokens(os.environ.get("DASHBOARD_TOKENS", ""))
    if file := os.environ.get("DASHBOARD_TOKENS_FILE"):
        admin += parse_tokens(Path(file).read_text())
    cfg = DashboardConfig(
        data_plane_addr=a.data_plane_addr,
        channel_settings=ChannelSettings.from_env(),
        listen_host=host.strip("[]") or "127.0.0.1",
        admin_tokens=admin,
        read_tokens=parse_tokens(os.environ.get("DASHBOARD_READ_TOKENS", "")),
        read_only=a.read_only,
    )
    return cfg, cfg.listen_host, int(port)


def main(argv: list[str] | None = None) -> int:
    cfg, host, port = config_from(argv)
    try:
        app = create_app(cfg)
    except UnsafeConfiguration as err:
        print(f"taskdash: error: {err}", file=sys.stderr)
        return 2
    uvicorn.run(app, host=host, port=port, log_level="info", proxy_headers=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
