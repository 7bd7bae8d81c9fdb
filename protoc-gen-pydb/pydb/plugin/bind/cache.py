"""What `protoc-gen-pydb check --watch` and the language server keep between two checks.

A check is the plugin's own compile; the cache only saves recomputing what did not change:
- a schema's catalog, keyed by the schema files' paths and contents;
- a statement's analysis, keyed by the catalog it was analysed against, the SQL text and the
  request fields with presence (everything `analyze` reads).
Binding (params, columns, cardinality) is re-run every time: it is cheap and it reads the
messages, which may have changed without the statement changing. Results are the ones the
uncached compile gives (tests/devloop/test_check.py compares the two).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from ..diagnostics import Diagnostic, Problem
from ..sql import Analysis, Catalog, analyze, load_catalog, read_files

CatalogEntry = tuple[Catalog | None, list[Diagnostic]]


class CompileCache:
    def __init__(self, max_analyses: int = 20_000) -> None:
        self._catalogs: dict[str, CatalogEntry] = {}
        self._analyses: dict[tuple[int, str, frozenset[str]], tuple[Analysis | None, tuple[Problem, ...]]] = {}
        self.max_analyses = max_analyses
        self.hits = 0
        self.misses = 0

    def catalog(self, found: Path) -> CatalogEntry:
        files = read_files(found)
        digest = hashlib.sha256(str(found).encode())
        for f in files:
            digest.update(b"\0" + f.path.encode() + b"\0" + f.sql.encode())
        key = digest.hexdigest()
        if key not in self._catalogs:
            if len(self._catalogs) >= 16:
                self._catalogs.clear()
                self._analyses.clear()
            self._catalogs[key] = load_catalog(files, found)
        catalog, diagnostics = self._catalogs[key]
        return catalog, list(diagnostics)

    def analyze(
        self, sql: str, catalog: Catalog, nullable_params: frozenset[str]
    ) -> tuple[Analysis | None, list[Problem]]:
        # The catalog is immutable once built and kept alive by self._catalogs: its id is a key.
        key = (id(catalog), sql, nullable_params)
        cached = self._analyses.get(key)
        if cached is None:
            self.misses += 1
            if len(self._analyses) >= self.max_analyses:
                self._analyses.clear()
            analysis, problems = analyze(sql, catalog, nullable_params)
            cached = self._analyses[key] = (analysis, tuple(problems))
        else:
            self.hits += 1
        return cached[0], list(cached[1])
