"""Names as PostgreSQL reads and writes them: identifier folding, quoting, qualified names and
the search_path. The one module that knows the `public` rule."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from pglast.keywords import COL_NAME_KEYWORDS, RESERVED_KEYWORDS, TYPE_FUNC_NAME_KEYWORDS, UNRESERVED_KEYWORDS

#: Keywords that must be quoted to be used as a column or table name (PostgreSQL's
#: quote_identifier quotes every keyword but the unreserved ones).
_QUOTE_KEYWORDS = frozenset(RESERVED_KEYWORDS) | frozenset(COL_NAME_KEYWORDS) | frozenset(TYPE_FUNC_NAME_KEYWORDS)
assert not (_QUOTE_KEYWORDS & frozenset(UNRESERVED_KEYWORDS))

_LOWER = frozenset("abcdefghijklmnopqrstuvwxyz_")
_SAFE = _LOWER | frozenset("0123456789")
_FOLD = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")

#: `"$user", public` with no role known offline: `$user` names no schema here.
DEFAULT_SEARCH_PATH: tuple[str, ...] = ("public",)
PG_CATALOG = "pg_catalog"
#: The session's temporary schema: searched first for relations, and where TEMP objects go.
PG_TEMP = "pg_temp"


def fold(text: str, quoted: bool = False) -> str:
    """An identifier as PostgreSQL stores it: unquoted ones folded to lower case (ASCII letters
    only, as PostgreSQL does under a multi-byte encoding), quoted ones kept."""
    return text if quoted else text.translate(_FOLD)


def quote_ident(name: str) -> str:
    """`name` as SQL text, quoted only where PostgreSQL's quote_ident would quote it."""
    if name and name[0] in _LOWER and all(c in _SAFE for c in name) and name not in _QUOTE_KEYWORDS:
        return name
    return '"' + name.replace('"', '""') + '"'


@dataclass(frozen=True, order=True)
class QualifiedName:
    """A schema-qualified object name, both parts already folded."""

    schema: str
    name: str

    def sql(self) -> str:
        return f"{quote_ident(self.schema)}.{quote_ident(self.name)}"

    def display(self) -> str:
        """For messages: `schema.name`, or just `name` in public."""
        return self.name if self.schema == "public" else f"{self.schema}.{self.name}"

    def __str__(self) -> str:
        return f"{self.schema}.{self.name}"


def candidates(
    schema: str | None, name: str, search_path: Iterable[str], relation: bool = False
) -> Iterator[QualifiedName]:
    """Where a possibly unqualified name may live, in PostgreSQL's order of search (without the
    implicit pg_catalog, which holds no schema-declared object); a relation is looked for in
    pg_temp first."""
    if schema is not None:
        yield QualifiedName(schema, name)
        return
    if relation:
        yield QualifiedName(PG_TEMP, name)
    for candidate in search_path:
        yield QualifiedName(candidate, name)


def split_name(parts: Sequence[str]) -> tuple[str | None, str]:
    """(schema or None, name) from a parsed dotted name (`name`, `schema.name`, or
    `database.schema.name`); the parts are already folded by PostgreSQL's parser."""
    if len(parts) == 1:
        return None, parts[0]
    return parts[-2], parts[-1]


def parse_search_path(value: str) -> tuple[str, ...]:
    """The schemas of a search_path setting's text (`a, "B", "$user"`), folded as PostgreSQL's
    SplitIdentifierString folds them; `$user` names no schema offline and is dropped."""
    out: list[str] = []
    i, n = 0, len(value)
    while i < n:
        while i < n and (value[i].isspace() or value[i] == ","):
            i += 1
        if i >= n:
            break
        if value[i] == '"':
            j = i + 1
            part = []
            while j < n:
                if value[j] == '"':
                    if j + 1 < n and value[j + 1] == '"':
                        part.append('"')
                        j += 2
                        continue
                    break
                part.append(value[j])
                j += 1
            name = "".join(part)
            i = j + 1
        else:
            j = i
            while j < n and value[j] != "," and not value[j].isspace():
                j += 1
            name = fold(value[i:j])
            i = j
        if name and name != "$user":
            out.append(name)
    return tuple(out)


def closest(name: str, candidates: Iterable[str], cutoff: float = 0.6) -> str | None:
    """The candidate closest to a name not found, for "did you mean" hints (None: none close)."""
    close = difflib.get_close_matches(name, list(candidates), n=1, cutoff=cutoff)
    return close[0] if close else None


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """`; did you mean x?` to end a message about `name` not found, or "" when nothing other
    than `name` itself is close."""
    close = closest(name, (c for c in candidates if c != name))
    return f"; did you mean {close}?" if close else ""
