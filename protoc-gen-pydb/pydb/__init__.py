"""protoc-gen-pydb: SQL-annotated gRPC services into typed async Python on psycopg 3.

`pydb.plugin` is the protoc plugin (build time; its dependencies come with the `compiler`
extra); `pydb.runtime` is the small library the generated handlers and server import (run time,
the base install); `pydb.v1` holds the annotation options; `python -m pydb.serve` serves several
generated server modules in one process.
"""

from __future__ import annotations

from pathlib import Path

__version__ = "0.1.0"


def include_dir() -> str:
    """The directory to pass to protoc with -I so that `import "pydb/v1/options.proto"` resolves."""
    return str(Path(__file__).resolve().parent.parent)
