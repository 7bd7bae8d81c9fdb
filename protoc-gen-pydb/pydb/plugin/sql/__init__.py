"""The PostgreSQL front end: schema text → `Catalog`, one statement + the Catalog → `Analysis`.

Layers, each importing only those below it (tests/sql/test_sql_layers.py holds them to it):

    frontend.py  the entry points wired: build_catalog / load_catalog with views typed by the analyzer
    analyzer/  one statement → Analysis: parts sharing one StatementState (FROM items, expressions,
               casts, operators, calls, grouping, queries, writes), composed in analyzer.py
    schema/    DDL text → Catalog (tables, objects, partitions, renames; schema files and dumps)
    bridge/    the seam between pglast's tree and sqlglot's: same-length stand-ins, offsets
    syntax/    PostgreSQL's grammar: text → pglast tree, verdicts, output column names
    rules/     PostgreSQL's coercion and resolution rules, functions over types
    catalog/   what exists: types, identifiers, signatures, the built-ins data, the model

This module re-exports what the rest of the plugin (bind/, pygen/, main) uses; nothing else.
"""

from .analyzer.analyzer import analyze
from .analyzer.result import Analysis, Expansion, ResultColumn
from .catalog.builtins import load_builtins
from .catalog.identifiers import QualifiedName, closest, did_you_mean, quote_ident
from .catalog.model import Catalog
from .catalog.types import NULL, PgType
from .frontend import load_catalog
from .schema.source import SchemaFile, SchemaRoots, psql_statements, read_files, schema_path
from .syntax.pgparse import PgSyntaxError, parse, scan

__all__ = [
    "NULL",
    "Analysis",
    "Catalog",
    "Expansion",
    "PgSyntaxError",
    "PgType",
    "QualifiedName",
    "ResultColumn",
    "SchemaFile",
    "SchemaRoots",
    "analyze",
    "closest",
    "did_you_mean",
    "load_builtins",
    "load_catalog",
    "parse",
    "psql_statements",
    "quote_ident",
    "read_files",
    "scan",
    "schema_path",
]
