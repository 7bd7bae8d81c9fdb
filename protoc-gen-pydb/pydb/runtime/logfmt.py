"""logfmt: the one line format of pydb's logs (`ts=... level=... logger=... key=value ...`)."""

from __future__ import annotations

import logging
import sys
import time


def quote(text: str) -> str:
    """A logfmt value: one line, double-quoted."""
    return '"' + " ".join(text.split()).replace("\\", "\\\\").replace('"', '\\"') + '"'


class LogfmtFormatter(logging.Formatter):
    """`ts=... level=... logger=... key=value ...`: pydb's own records are already key=value;
    anything else (psycopg, grpc) becomes msg="...". A traceback follows its line."""

    def __init__(self) -> None:
        super().__init__()

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        t = time.gmtime(record.created)
        return time.strftime("%Y-%m-%dT%H:%M:%S", t) + f".{int(record.msecs):03d}Z"

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        if not (record.name == "pydb" or record.name.startswith("pydb.")):
            message = "msg=" + quote(message)
        line = f"ts={self.formatTime(record)} level={record.levelname.lower()} logger={record.name} {message}"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def configure_logging(level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(LogfmtFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(getattr(logging, level.upper()))
    # psycopg_pool logs every failed reconnect attempt; the health line says it once.
    logging.getLogger("psycopg.pool").setLevel(logging.ERROR)
    logging.getLogger("grpc").setLevel(logging.WARNING)
