"""One-to-many reads: an array of a table's rows (`array_agg(l ORDER BY l.id) AS lines`) as the
elements of a repeated message field. psycopg does not know a table's row type (its oid is the
database's), so the array arrives as PostgreSQL's text form, `{"(1,widget,2)","(2,\"a b\",)"}`;
each element's fields are loaded by the loaders of the column types the plugin checked, the same
values a result column of that type gives."""

from __future__ import annotations

import functools
from typing import Any

from psycopg import abc
from psycopg.adapt import Transformer
from psycopg.pq import Format

from .convert import loaders, text_array

_TIMESTAMPS = ("timestamp", "timestamptz")


@functools.cache
def _transformer(types: tuple[str, ...]) -> abc.Transformer:
    adapters = loaders(timestamps=tuple(t for t in _TIMESTAMPS if t in types))
    tx: abc.Transformer = Transformer(adapters)
    oids = []
    for name in types:
        info = adapters.types.get(name.removesuffix("[]"))
        assert info is not None, name  # the plugin passes built-in names only ("text" for the rest)
        oids.append(info.array_oid if name.endswith("[]") else info.oid)
    tx.set_loader_types(oids, Format.TEXT)
    return tx


def table_rows(value: str | None, types: tuple[str, ...]) -> list[tuple[Any, ...]]:
    """The rows of an array of a table's row type, each a tuple of its columns loaded as `types`
    (psycopg's built-in type names; "text" loads the text PostgreSQL sends). A NULL array is no
    rows (`array_agg` over no rows, or FILTER leaving none); a NULL element (the row an outer join
    finds none of) is dropped."""
    tx = _transformer(types)
    return [tx.load_sequence(_fields(element)) for element in text_array(value, drop_nulls=True)]


def _fields(record: str) -> tuple[bytes | None, ...]:
    """A record's text form, `(1,"a b",)`, as its fields' text: None for NULL (nothing between
    the commas), `""` the empty string; inside quotes a doubled quote is one, a backslash escapes."""
    out: list[bytes | None] = []
    i, end = 1, len(record) - 1  # inside the parentheses
    while True:
        if i >= end or record[i] == ",":
            out.append(None)
        else:
            chars: list[str] = []
            quoted = False
            while i < end and (quoted or record[i] != ","):
                ch = record[i]
                if ch == '"':
                    if quoted and i + 1 < end and record[i + 1] == '"':
                        chars.append('"')
                        i += 1
                    else:
                        quoted = not quoted
                elif ch == "\\":
                    i += 1
                    chars.append(record[i])
                else:
                    chars.append(ch)
                i += 1
            out.append("".join(chars).encode())
        if i >= end:
            return tuple(out)
        i += 1  # the comma
