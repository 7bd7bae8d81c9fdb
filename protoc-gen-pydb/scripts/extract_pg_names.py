#!/usr/bin/env python3
"""Extract two lists of names from PostgreSQL 15 into `pydb/plugin/sql/catalog/pgdata/`:

`pg15_infoschema_domains.txt`: `relation column domain` a line, sorted: the columns of
information_schema's views typed as one of its domains (sql_identifier, cardinal_number, ...),
which a view selecting them keeps (pg15.json holds them as their base types).

`pg15_settings.txt`: its configuration parameter names (one lower-case name a line, sorted): what
`SET name = ...` accepts without "unrecognized configuration parameter". pg_settings leaves out
the parameters marked GUC_NO_SHOW_ALL; those SET still accepts are probed with
current_setting(name, true). Names with a dot are placeholders (`app.user_id`), accepted by
PostgreSQL without a definition, and are not listed.

Usage: extract_pg_names.py [DSN] [-o OUT]   (default postgresql://postgres@127.0.0.1:5432/postgres)
"""

from __future__ import annotations

import argparse
from pathlib import Path

import psycopg

OUT = Path(__file__).resolve().parent.parent / "pydb" / "plugin" / "sql" / "catalog" / "pgdata"
HIDDEN = ("default_with_oids", "is_superuser", "role", "seed", "session_authorization")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dsn", nargs="?", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("-o", "--out", type=Path, default=OUT, help="the directory written to")
    args = parser.parse_args()
    with psycopg.connect(args.dsn) as conn:
        rows = conn.execute(
            """SELECT lower(name) FROM pg_settings WHERE strpos(name, '.') = 0
            UNION SELECT n FROM unnest(%s::text[]) n WHERE current_setting(n, true) IS NOT NULL ORDER BY 1""",
            (list(HIDDEN),),
        ).fetchall()
        domains = conn.execute(
            """SELECT table_name, column_name, domain_name FROM information_schema.columns
            WHERE table_schema = 'information_schema' AND domain_schema = 'information_schema' ORDER BY 1, 2"""
        ).fetchall()
    (args.out / "pg15_settings.txt").write_text("".join(f"{name}\n" for (name,) in rows), encoding="utf-8")
    text = "".join(f"{rel} {col} {domain}\n" for rel, col, domain in domains)
    (args.out / "pg15_infoschema_domains.txt").write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
