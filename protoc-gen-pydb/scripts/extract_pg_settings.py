#!/usr/bin/env python3
"""Extract PostgreSQL's configuration parameter names into
`pydb/plugin/sql/catalog/pgdata/pg15_settings.txt` (one lower-case name a line, sorted): what
`SET name = ...` accepts without "unrecognized configuration parameter". pg_settings leaves out
the parameters marked GUC_NO_SHOW_ALL; those SET still accepts are probed with
current_setting(name, true). Names with a dot are placeholders (`app.user_id`), accepted by
PostgreSQL without a definition, and are not listed.

Usage: extract_pg_settings.py [DSN] [-o OUT]   (default postgresql://postgres@127.0.0.1:5432/postgres)
"""

from __future__ import annotations

import argparse
from pathlib import Path

import psycopg

OUT = Path(__file__).resolve().parent.parent / "pydb" / "plugin" / "sql" / "catalog" / "pgdata" / "pg15_settings.txt"
HIDDEN = ("default_with_oids", "is_superuser", "role", "seed", "session_authorization")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dsn", nargs="?", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("-o", "--out", type=Path, default=OUT)
    args = parser.parse_args()
    with psycopg.connect(args.dsn) as conn:
        rows = conn.execute(
            """SELECT lower(name) FROM pg_settings WHERE strpos(name, '.') = 0
            UNION SELECT n FROM unnest(%s::text[]) n WHERE current_setting(n, true) IS NOT NULL ORDER BY 1""",
            (list(HIDDEN),),
        ).fetchall()
    args.out.write_text("".join(f"{name}\n" for (name,) in rows), encoding="utf-8")


if __name__ == "__main__":
    main()
