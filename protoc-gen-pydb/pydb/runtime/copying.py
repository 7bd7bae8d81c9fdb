"""Rows written in through COPY (a client-streaming RPC), a batch at a time.

The generated handler of a COPY whose requests carry a batch of rows each converts a request's
rows into tuples (one list comprehension, the conversions written out per column) and hands them
to `copy_rows`. Where the plugin could choose it (pygen/copying.py: every column a type whose
binary form psycopg writes as PostgreSQL reads it), the COPY runs in PostgreSQL's binary format
with the column types set at compile time (`copy.set_types`): cheaper for psycopg to write and
for PostgreSQL to read than the text format, and a value PostgreSQL refuses fails the same way.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from psycopg import AsyncCopy


async def copy_rows(copy: AsyncCopy, rows: Iterable[Sequence[Any]]) -> None:
    """Write `rows` to `copy`: what `await copy.write_row(row)` does for each, without an await
    per row. psycopg formats each row into its buffer, handed to the connection whenever it
    fills (then, every megabyte, waiting for PostgreSQL to take it in)."""
    format_row, write = copy.formatter.write_row, copy.writer.write
    for row in rows:
        if data := format_row(row):
            await write(data)
