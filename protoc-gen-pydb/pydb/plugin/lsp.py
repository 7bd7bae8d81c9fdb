"""`protoc-gen-pydb lsp -I ROOT ...`: a language server (stdio) for .proto files carrying
`(pydb.v1.sql)`, on pygls (the optional `[lsp]` extra).

Hover on a `@param` or a result column shows its PostgreSQL type (and a column's nullability);
go-to-definition on a column opens its line in the schema file's CREATE TABLE (lsp_query.py).
Diagnostics as you type: every open .proto is checked from its unsaved text (the same
`Checker` as `check --watch`, so an edit inside one statement is re-checked alone) and the
problems are published at the offending token's range inside the string literal. A schema
file's problems are published on the schema file; an open proto is checked again when a schema
file is saved.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import unquote, urlparse

from .check import Checker, virtual_name
from .diagnostics import Diagnostic
from .lsp_query import Place, definition, hover, place

MISSING = "protoc-gen-pydb lsp needs pygls: pip install 'protoc-gen-pydb[compiler,lsp]'"


def _path(uri: str) -> Path:
    return Path(unquote(urlparse(uri).path))


def to_lsp(d: Diagnostic) -> object:
    from lsprotocol import types as lsp

    start = lsp.Position(line=max(d.line - 1, 0), character=max(d.col - 1, 0))
    if d.end_line is not None and d.end_col is not None:
        end = lsp.Position(line=d.end_line - 1, character=d.end_col - 1)
    else:
        end = lsp.Position(line=start.line, character=start.character + 1)
    severity = lsp.DiagnosticSeverity.Error if d.severity == "error" else lsp.DiagnosticSeverity.Warning
    return lsp.Diagnostic(range=lsp.Range(start=start, end=end), message=d.message, severity=severity, source="pydb")


def build_server(checker: Checker) -> object:
    from lsprotocol import types as lsp
    from pygls.lsp.server import LanguageServer

    from pydb import __version__

    server = LanguageServer("protoc-gen-pydb", __version__)
    published: set[str] = set()  # schema files with diagnostics, to clear them

    def check(ls: LanguageServer) -> None:
        protos = {
            uri: doc.source
            for uri, doc in ls.workspace.text_documents.items()
            if uri.endswith(".proto") and "(pydb.v1.sql)" in doc.source
        }
        names = {uri: virtual_name(str(_path(uri)), checker.includes) for uri in protos}
        overlays = {names[uri]: text for uri, text in protos.items()}
        diagnostics = checker.check(list(overlays), overlays) if overlays else []
        by_uri: dict[str, list[object]] = {uri: [] for uri in protos}
        for d in diagnostics:
            uri = next((u for u, n in names.items() if n == d.path), None)
            if uri is None:
                uri = Path(d.path).resolve().as_uri()
            by_uri.setdefault(uri, []).append(to_lsp(d))
        for uri in published - set(by_uri):
            by_uri[uri] = []
        published.clear()
        published.update(u for u, ds in by_uri.items() if ds and u not in protos)
        for uri, items in by_uri.items():
            ls.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=uri, diagnostics=items))  # type: ignore[arg-type]

    @server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: LanguageServer, params: lsp.DidOpenTextDocumentParams) -> None:
        check(ls)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: LanguageServer, params: lsp.DidChangeTextDocumentParams) -> None:
        if params.text_document.uri.endswith(".proto"):
            check(ls)

    def place_at(ls: LanguageServer, uri: str, pos: lsp.Position) -> Place | None:
        doc = ls.workspace.get_text_document(uri)
        return place(checker, virtual_name(str(_path(uri)), checker.includes), doc.source, pos.line, pos.character)

    @server.feature(lsp.TEXT_DOCUMENT_HOVER)
    def on_hover(ls: LanguageServer, params: lsp.HoverParams) -> lsp.Hover | None:
        where = place_at(ls, params.text_document.uri, params.position)
        text = hover(where) if where is not None else None
        return lsp.Hover(contents=lsp.MarkupContent(kind=lsp.MarkupKind.PlainText, value=text)) if text else None

    @server.feature(lsp.TEXT_DOCUMENT_DEFINITION)
    def on_definition(ls: LanguageServer, params: lsp.DefinitionParams) -> lsp.Location | None:
        where = place_at(ls, params.text_document.uri, params.position)
        found = definition(where) if where is not None else None
        if found is None:
            return None
        path, line, character = found
        start = lsp.Position(line=line, character=character)
        return lsp.Location(uri=path.resolve().as_uri(), range=lsp.Range(start=start, end=start))

    @server.feature(lsp.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: LanguageServer, params: lsp.DidSaveTextDocumentParams) -> None:
        check(ls)

    return server


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="protoc-gen-pydb lsp", description="A language server over stdio.")
    parser.add_argument("-I", "--proto_path", action="append", default=[], dest="includes")
    parser.add_argument("--schema")
    args = parser.parse_args(argv)
    try:
        import pygls  # noqa: F401
    except ImportError:
        print(MISSING, file=sys.stderr)
        return 1
    server = build_server(Checker(tuple(args.includes) or (".",), args.schema))
    server.start_io()  # type: ignore[attr-defined]
    return 0
