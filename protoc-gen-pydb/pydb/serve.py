"""`python -m pydb.serve MODULE [MODULE ...] [flags]`: serve the services of several generated
`*_pydb_server` modules in one process (one port, one pool, health per service). See
`pydb.runtime.compose` and docs/server.md."""

from __future__ import annotations

from pydb.runtime.compose import main

if __name__ == "__main__":
    raise SystemExit(main())
