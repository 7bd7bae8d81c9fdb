"""The front end's entry points, wired: a catalog from schema text, its views typed by the
statement analyzer handed to schema/ (schema/ never imports the analyzer, which reads the
catalogs schema/ builds; see `schema.state.QueryTyper`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..diagnostics import Diagnostic, Problem
from .analyzer.analyzer import analyze
from .analyzer.result import ResultColumn
from .catalog.model import Catalog
from .schema import source
from .schema.apply import apply_schema
from .schema.source import SchemaFile


def query_columns(sql: str, catalog: Catalog) -> tuple[Sequence[ResultColumn] | None, list[str]]:
    """A view's query typed by the statement analyzer: its columns and its errors' messages."""
    analysis, problems = analyze(sql, catalog)
    errors = [p.message for p in problems if p.severity == "error"]
    return (analysis.columns if analysis is not None else None), errors


def build_catalog(sql: str) -> tuple[Catalog, list[Problem]]:
    """Apply the DDL of one schema text in order. Problems carry spans into `sql`; the catalog
    holds everything that applied, even when there are errors."""
    catalog, problems = apply_schema([("", sql)], query_columns)
    return catalog, [p for _, p in problems]


def load_catalog(files: Sequence[SchemaFile], source_path: Path | None = None) -> tuple[Catalog, list[Diagnostic]]:
    """The catalog of schema files (`schema.source.read_files`), each problem a diagnostic at
    its file, line and column."""
    return source.load_catalog(files, query_columns, source_path)
