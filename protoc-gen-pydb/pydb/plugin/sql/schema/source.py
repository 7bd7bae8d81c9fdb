"""Where the DDL comes from: a hand-written file, `pg_dump --schema-only` output, or a directory of
migrations applied in order, read only under the plugin's proto_path roots (hermetic).

Order and markers (docs/workflow.md says the same for users):

- A file is applied as is (psql meta-lines such as `\\restrict` / `\\connect` are skipped with a note).
- A directory is a migrations directory. Its `.sql` files (not subdirectories, except sqitch's
  `deploy/`) are applied in this order:
  - sqitch: a `sqitch.plan` names the changes in order; `deploy/<change>.sql` is applied for each.
  - Flyway: versioned `V<version>__<description>.sql` by version (`V1_1` = 1.1, compared number
    by number), then repeatable `R__<description>.sql` by description; `U...` undo files are
    not applied.
  - everything else (golang-migrate `<n>_x.up.sql`, goose, dbmate, plain numbered files) in
    natural order of the file name: digit runs compare as numbers, so `2_x.sql` comes before
    `10_x.sql`. golang-migrate's `*.down.sql` files are not applied.
- Within a file, migration tool markers select what runs on the way up: goose's
  `-- +goose Up` / `-- +goose Down` (`StatementBegin` / `StatementEnd` only group statements)
  and dbmate's `-- migrate:up` / `-- migrate:down`. What a Down section holds is not applied.
  Offsets are kept, so every diagnostic points at the line and column in the file itself.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ...diagnostics import Diagnostic, Problem
from ..catalog.model import Catalog
from ..syntax.pgparse import PgSyntaxError, parse
from .apply import apply_schema, skip_meta_lines
from .state import QueryTyper, State

DEFAULT_SCHEMA = "schema.sql"


@dataclass(frozen=True)
class SchemaFile:
    #: The path diagnostics name (relative to the working directory, as protoc users see it).
    path: str
    #: The file's text, as diagnostics quote it.
    text: str
    #: What is applied: `text` with what the migration tool would not run blanked (same offsets).
    sql: str


@dataclass(frozen=True)
class SchemaRoots:
    """The proto_path roots the schema is looked up in, and the default schema path (a plugin
    parameter, relative to the roots; None: `schema.sql` beside each proto)."""

    roots: tuple[str, ...]
    default: str | None = None

    def find(self, rel: str) -> Path | None:
        """The file or directory `rel` names under the first root holding it; never outside
        the roots (the plugin is hermetic)."""
        if os.path.isabs(rel) or rel == ".." or rel.startswith("../"):
            return None
        for root in self.roots:
            path = Path(root) / rel
            if path.exists():
                return path
        return None


def schema_path(proto_name: str, option: str | None, roots: SchemaRoots) -> str:
    """The schema's path under the roots: `(pydb.v1.schema)` relative to the proto's directory,
    else the `schema=` parameter, else `schema.sql` beside the proto."""
    if option:
        return os.path.normpath(os.path.join(os.path.dirname(proto_name), option)).replace(os.sep, "/")
    if roots.default is not None:
        return os.path.normpath(roots.default).replace(os.sep, "/")
    return os.path.normpath(os.path.join(os.path.dirname(proto_name), DEFAULT_SCHEMA)).replace(os.sep, "/")


def read_files(path: Path) -> list[SchemaFile]:
    """The file, or the migrations of the directory in the order they are applied."""
    if path.is_file():
        return [_schema_file(path)]
    return [_schema_file(p) for p in migration_order(path)]


def _schema_file(path: Path) -> SchemaFile:
    text = path.read_text(encoding="utf-8")
    return SchemaFile(os.path.normpath(str(path)), text, up_sections(text))


def migration_order(directory: Path) -> list[Path]:
    plan = directory / "sqitch.plan"
    if plan.is_file():
        return _sqitch_order(directory, plan)
    files = [p for p in directory.iterdir() if p.is_file() and p.suffix == ".sql"]
    versioned = [p for p in files if _flyway_version(p.name) is not None]
    if versioned:
        repeatable = sorted((p for p in files if p.name.startswith("R__")), key=lambda p: p.name)
        return sorted(versioned, key=lambda p: _flyway_version(p.name) or ()) + repeatable
    ups = [p for p in files if not p.name.endswith(".down.sql")]
    return sorted(ups, key=lambda p: natural_key(p.name))


def _sqitch_order(directory: Path, plan: Path) -> list[Path]:
    """sqitch.plan: `%pragma` lines, `@tag` lines and blank lines aside, each line starts with
    a change name; `deploy/<change>.sql` deploys it."""
    out: list[Path] = []
    for line in plan.read_text(encoding="utf-8").splitlines():
        stripped = line.strip()
        if not stripped or stripped[0] in "%@#":
            continue
        change = stripped.split()[0]
        script = directory / "deploy" / f"{change}.sql"
        if script.is_file():
            out.append(script)
    return out


def _flyway_version(name: str) -> tuple[int, ...] | None:
    """`V1_2__init.sql` -> (1, 2); None for a file that is not a Flyway versioned migration."""
    if not (name.startswith("V") and "__" in name and name.endswith(".sql")):
        return None
    version = name[1 : name.index("__")].replace("_", ".")
    parts = version.split(".")
    if not all(p.isdigit() for p in parts):
        return None
    return tuple(int(p) for p in parts)


def natural_key(name: str) -> tuple[tuple[int, int | str], ...]:
    """Digit runs compare as numbers (`2` before `10`), everything else as text."""
    out: list[tuple[int, int | str]] = []
    i = 0
    while i < len(name):
        j = i
        digits = name[i].isdigit()
        while j < len(name) and name[j].isdigit() == digits:
            j += 1
        out.append((0, int(name[i:j])) if digits else (1, name[i:j]))
        i = j
    return tuple(out)


_UP = ("-- +goose up", "-- migrate:up")
_DOWN = ("-- +goose down", "-- migrate:down")


def up_sections(text: str) -> str:
    """`text` with goose's and dbmate's Down sections blanked (newlines kept, so offsets and
    line numbers stay). A file without markers is all Up."""
    out: list[str] = []
    running = True
    for line in text.splitlines(keepends=True):
        marker = " ".join(line.lower().split())
        if marker.startswith(_UP):
            running = True
        elif marker.startswith(_DOWN):
            running = False
        out.append(line if running else "".join(c if c in "\r\n" else " " for c in line))
    return "".join(out)


def load_catalog(
    files: Sequence[SchemaFile], query_typer: QueryTyper, source: Path | None = None
) -> tuple[Catalog, list[Diagnostic]]:
    """Apply the files in order (views typed by `query_typer`); each problem becomes a diagnostic
    at its file, line and column. A migrations directory (`source`) without a migration is an
    error: the path is likely wrong."""
    catalog, problems = apply_schema([(f.path, f.sql) for f in files], query_typer)
    if not files and source is not None and source.is_dir():
        message = f"migrations directory {os.path.normpath(source)} holds no .sql migration (see docs/workflow.md)"
        return catalog, [Diagnostic(os.path.normpath(str(source)), 1, 1, message)]
    by_path = {f.path: f for f in files}
    return catalog, [_diagnostic(by_path[path], problem) for path, problem in problems]


def _diagnostic(file: SchemaFile, problem: Problem) -> Diagnostic:
    if problem.span is None:
        return Diagnostic(file.path, 1, 1, problem.message, problem.severity)
    offset = problem.span.start
    line = file.text.count("\n", 0, offset) + 1
    col = offset - (file.text.rfind("\n", 0, offset) + 1) + 1
    return Diagnostic(file.path, line, col, problem.message, problem.severity, file.text, problem.span)


def psql_statements(sql: str) -> list[tuple[int, str]]:
    """(offset, text) of each statement as psql sends it (meta-lines blanked, offsets kept); a
    text PostgreSQL's parser rejects is one piece, so PostgreSQL reports the error."""
    text = skip_meta_lines(State(), sql)
    try:
        parsed = parse(text)
    except PgSyntaxError:
        return [(0, text)]
    return [(stmt.start, text[stmt.start : stmt.end]) for stmt in parsed]
