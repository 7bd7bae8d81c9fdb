"""sqlc-style cases as benchmarks/sql_differential.py reads them: the configs found under a root,
each package's schema and query files, the schema text without rollback sections, the named
statements of a query file, and sqlc's parameters translated to pydb's `@name` and PostgreSQL's `$n`
(through PostgreSQL's own scanner)."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pglast.parser import ParseError, scan

CONFIGS = ("sqlc.json", "sqlc.yaml", "sqlc.yml")
#: sqlc's commands pydb has no counterpart for: the statement is set aside, with this reason.
UNEXPRESSIBLE_COMMANDS = {
    ":copyfrom": "COPY FROM (:copyfrom) is not a statement a proto RPC carries",
    ":batchexec": "batched statements (:batch*)",
    ":batchmany": "batched statements (:batch*)",
    ":batchone": "batched statements (:batch*)",
}
SQLC_FUNCTIONS = ("arg", "narg", "slice", "embed")
COMMANDS = {":one", ":many", ":exec", ":execrows", ":execresult", ":execlastid", *UNEXPRESSIBLE_COMMANDS}

# -- cases ----------------------------------------------------------------------------------------


@dataclass
class Case:
    """One postgresql package of a sqlc config: its schema and query files."""

    id: str  # the config's directory relative to the cases root, + #n for the n-th package
    directory: Path
    schema: list[Path]
    queries: list[Path]
    expects_failure: str | None  # why sqlc expects it to fail, when it does
    duplicates: list[str] = field(default_factory=list)  # ids of cases with the same SQL


def load_config(path: Path) -> dict[str, Any]:
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        data = json.loads(text)
    else:
        import yaml  # type: ignore[import-untyped]  # only for sqlc.yaml (benchmarks/requirements-differential.txt)

        data = yaml.safe_load(text)
    return data if isinstance(data, dict) else {}


def _paths(directory: Path, value: object) -> list[Path]:
    """The config's paths; a glob (`queries/*.sql`) is its matches in name order."""
    items = value if isinstance(value, list) else [value] if isinstance(value, str) else []
    out: list[Path] = []
    for item in map(str, items):
        out += sorted(directory.glob(item)) if set(item) & set("*?[") else [directory / item]
    return out


def expected_failure(directory: Path) -> str | None:
    """How sqlc marks a case that must fail: stderr.txt (or a stderr/ directory per context) next
    to the config, or exec.json's meta.invalid_schema."""
    if (directory / "stderr.txt").is_file() or (directory / "stderr").is_dir():
        return "stderr.txt"
    exec_json = directory / "exec.json"
    if exec_json.is_file():
        try:
            meta = json.loads(exec_json.read_text(encoding="utf-8")).get("meta") or {}
        except ValueError:
            return None
        if meta.get("invalid_schema"):
            return "exec.json invalid_schema"
    return None


def discover(root: Path) -> tuple[list[Case], Counter[str]]:
    """Every postgresql package under `root`, deduplicated by the content of its SQL files."""
    skipped: Counter[str] = Counter()
    by_content: dict[str, Case] = {}
    for config in sorted(p for name in CONFIGS for p in root.rglob(name)):
        directory = config.parent
        try:
            data = load_config(config)
        except Exception:  # an unreadable config is sqlc's problem, not ours
            skipped["unreadable config"] += 1
            continue
        packages = data.get("packages") if data.get("version") == "1" or "packages" in data else data.get("sql")
        for n, package in enumerate(packages if isinstance(packages, list) else []):
            if not isinstance(package, dict):
                continue
            if str(package.get("engine", "postgresql")) != "postgresql":
                skipped[f"engine {package.get('engine')}"] += 1
                continue
            case = Case(
                f"{directory.relative_to(root)}#{n}",
                directory,
                _paths(directory, package.get("schema")),
                _paths(directory, package.get("queries")),
                expected_failure(directory),
            )
            digest = hashlib.sha256(
                json.dumps([[read_all(p) for p in case.schema], [read_all(p) for p in case.queries]]).encode()
            ).hexdigest()
            if digest in by_content:
                by_content[digest].duplicates.append(case.id)
                if case.expects_failure and not by_content[digest].expects_failure:
                    by_content[digest].expects_failure = case.expects_failure
            else:
                by_content[digest] = case
    return list(by_content.values()), skipped


def sql_files(path: Path) -> list[Path]:
    """A file, or a directory's .sql files in name order, as sqlc reads them; golang-migrate's
    `*.down.sql` rollbacks are left out."""
    if path.is_dir():
        return sorted(p for p in path.iterdir() if p.suffix == ".sql" and not p.name.endswith(".down.sql"))
    return [path] if path.is_file() else []


def read_all(path: Path) -> list[str]:
    return [p.read_text(encoding="utf-8", errors="replace") for p in sql_files(path)]


#: Comment lines after which a migration file holds its rollback (goose, sql-migrate, dbmate, tern).
ROLLBACK_MARKERS = ("-- +goose down", "-- +migrate down", "-- migrate:down", "---- create above / drop below ----")


def schema_text(text: str) -> str:
    """A schema file as psql would feed it to the server: up to a migration's rollback marker, and
    without psql's own meta-commands (`\\connect`, pg_dump's `\\restrict`), lines that start with a
    backslash."""
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if line.strip().lower() in ROLLBACK_MARKERS:
            lines = lines[:i]
            break
    return "\n".join("" if line.startswith("\\") else line for line in lines)


# -- statements -----------------------------------------------------------------------------------


@dataclass
class Named:
    """A statement of a query file: its `-- name:` marker (None for a DDL statement) and text."""

    name: str | None
    command: str | None
    file: str
    line: int
    sql: str


def _marker(comment: str) -> tuple[str, str] | None:
    """(name, command) from `-- name: GetX :one` or `/* name: GetX :one */`."""
    body = comment.strip().removeprefix("--").removeprefix("/*").removesuffix("*/").strip()
    if not body.startswith("name:"):
        return None
    words = body.removeprefix("name:").split()
    return (words[0], words[1] if len(words) > 1 else "") if words else None


def statements(text: str, file: str) -> list[Named]:
    """The file's statements, split where PostgreSQL's scanner sees `;` outside strings, comments
    and dollar quotes; a statement preceded by a `-- name:` marker is a named query."""
    try:
        tokens = scan(text)
    except ParseError:
        tokens = []
    out: list[Named] = []
    marker: tuple[str, str] | None = None
    start: int | None = None
    for token in [*tokens, None]:
        if token is not None and token.name in ("SQL_COMMENT", "C_COMMENT"):
            found = _marker(text[token.start : token.end + 1])
            if found is not None:
                if start is not None:  # a marker inside an unterminated statement ends it
                    out.append(_named(marker, file, text, start, token.start))
                marker, start = found, None
            continue
        if token is None or token.name == "ASCII_59":
            if start is not None:
                out.append(_named(marker, file, text, start, token.start if token else len(text)))
            marker, start = (None, None) if token is not None else (marker, start)
            continue
        if start is None:
            start = token.start
    if not tokens and text.strip():
        out.append(Named(None, None, file, 1, text))  # the scanner failed: one chunk, PostgreSQL decides
    return out


def _named(marker: tuple[str, str] | None, file: str, text: str, start: int, end: int) -> Named:
    line = text.count("\n", 0, start) + 1
    return Named(marker[0] if marker else None, marker[1] if marker else None, file, line, text[start:end].strip())


@dataclass
class Translated:
    pydb_sql: str  # with @name parameters
    pg_sql: str  # with $n parameters, n in order of first use
    params: list[str]  # names in $n order
    nullable: set[str]  # sqlc.narg parameters
    unexpressible: str | None


def translate(sql: str) -> Translated:
    """sqlc's parameters -> pydb's `@name` (and PostgreSQL's `$n`), through PostgreSQL's scanner."""
    try:
        tokens = scan(sql)
    except ParseError:
        return Translated(sql, sql, [], set(), None)  # PostgreSQL reports it
    edits: list[tuple[int, int, str]] = []  # (start, end exclusive, parameter name)
    nullable: set[str] = set()
    unexpressible = None
    i = 0
    while i < len(tokens):
        token = tokens[i]
        word = sql[token.start : token.end + 1]
        ahead = [sql[t.start : t.end + 1] for t in tokens[i + 1 : i + 4]]
        close = (
            _closing(tokens, i + 3)
            if word.lower() == "sqlc"
            and ahead[:1] == ["."]
            and ahead[2:3] == ["("]
            and ahead[1].lower() in SQLC_FUNCTIONS
            else None
        )
        if close is not None:
            function = ahead[1].lower()
            if function in ("embed", "slice"):
                unexpressible = f"sqlc.{function}()"
            name = sql[tokens[i + 4].start : tokens[close - 1].end + 1].strip("'\"") if close > i + 4 else ""
            edits.append((token.start, tokens[close].end + 1, name))
            if function == "narg":
                nullable.add(name)
            i = close + 1
            continue
        if token.name == "Op" and word == "@" and i + 1 < len(tokens) and tokens[i + 1].start == token.end + 1:
            following = tokens[i + 1]
            edits.append((token.start, following.end + 1, sql[following.start : following.end + 1]))
            i += 2
            continue
        if token.name == "PARAM":
            edits.append((token.start, token.end + 1, f"p{word[1:]}"))
        i += 1
    pydb, pg, order, pos = [], [], [], 0
    for start, end, name in edits:
        if name not in order:
            order.append(name)
        pydb.append(sql[pos:start] + f"@{name}")
        pg.append(sql[pos:start] + f"${order.index(name) + 1}")
        pos = end
    pydb.append(sql[pos:])
    pg.append(sql[pos:])
    return Translated("".join(pydb), "".join(pg), order, nullable, unexpressible)


def _closing(tokens: list[Any], opening: int) -> int | None:
    """The index of the `)` that closes the `(` at `opening`."""
    depth = 0
    for k in range(opening, len(tokens)):
        depth += {"ASCII_40": 1, "ASCII_41": -1}.get(tokens[k].name, 0)
        if depth == 0:
            return k
    return None
