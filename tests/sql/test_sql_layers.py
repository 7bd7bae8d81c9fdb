"""The plugin's import structure: sql/'s layers each import only the layers below them, bind/,
pygen/ and main.py reach sql/ only through its package (its re-exports), and no module of
protoc-gen-pydb/ takes part in an import cycle. Every import counts: module level, inside
functions and under `if TYPE_CHECKING:` (a deferred import is still a dependency)."""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from support.pg import ROOT

PLUGIN_ROOT = ROOT / "protoc-gen-pydb"
SQL = "pydb.plugin.sql"

#: sql/'s layers, lowest first: each may import its own layer and those before it.
LAYERS = ("catalog", "rules", "syntax", "bridge", "schema", "analyzer", "frontend")

#: What a module of sql/ may import from the rest of the plugin.
SQL_MAY_IMPORT = frozenset({"pydb.plugin.diagnostics"})

#: The plugin's stages, lowest first (docs/architecture.md): a stage imports only earlier ones.
STAGES = ("pydb.plugin.diagnostics", "pydb.plugin.protos", SQL, "pydb.plugin.bind", "pydb.plugin.pygen")


@dataclass(frozen=True)
class Import:
    importer: str
    imported: str
    line: int


def module_names(root: Path) -> dict[str, Path]:
    """Every module under `root` (a directory holding top-level packages and scripts) by its
    dotted name; a package by its own name (its __init__.py)."""
    out: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def imports(modules: dict[str, Path]) -> Iterator[Import]:
    """Every import of one module of `modules` by another, wherever it is written."""
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                if node.level:
                    parts = package.split(".") if package else []
                    base_parts = parts[: len(parts) - (node.level - 1)]
                    base = ".".join([*base_parts, *([node.module] if node.module else [])])
                else:
                    base = node.module or ""
                # `from pkg import mod` depends on pkg.mod; `from mod import name` on mod.
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            for target in targets:
                while target and target not in modules:  # `import a.b.c` of a package a.b: a.b
                    target = target.rpartition(".")[0]
                if target and target != name:
                    yield Import(name, target, node.lineno)


def layer_of(module: str) -> int | None:
    if not module.startswith(SQL + "."):
        return None
    return LAYERS.index(module.split(".")[3])


def stage_of(module: str) -> int | None:
    return next((i for i, stage in enumerate(STAGES) if module == stage or module.startswith(stage + ".")), None)


def violations(found: Iterable[Import]) -> list[str]:
    """The imports against the order of sql/'s layers and of the plugin's stages."""
    out = []
    for imp in found:
        where = f"{imp.importer}:{imp.line} imports {imp.imported}"
        importer_layer, imported_layer = layer_of(imp.importer), layer_of(imp.imported)
        if importer_layer is not None:
            if imported_layer is None and imp.imported.startswith("pydb.") and imp.imported not in SQL_MAY_IMPORT:
                out.append(f"{where}: sql/ imports only sql/ and {', '.join(sorted(SQL_MAY_IMPORT))}")
            elif imported_layer is not None and imported_layer > importer_layer:
                out.append(f"{where}: layer {LAYERS[importer_layer]} is below {LAYERS[imported_layer]}")
            elif imp.imported == SQL:
                out.append(f"{where}: a layer of sql/ imports sql/'s re-exports")
            continue
        if imported_layer is not None and not imp.importer.startswith(SQL):
            out.append(f"{where}: outside sql/, import what sql/__init__.py re-exports")
        importer_stage, imported_stage = stage_of(imp.importer), stage_of(imp.imported)
        if importer_stage is not None and imported_stage is not None and imported_stage > importer_stage:
            out.append(f"{where}: stage {STAGES[importer_stage]} is before {STAGES[imported_stage]}")
    return out


def cycles(found: Iterable[Import]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    graph: dict[str, set[str]] = {}
    for imp in found:
        graph.setdefault(imp.importer, set()).add(imp.imported)
        graph.setdefault(imp.imported, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_sql_layers_import_only_below_and_stages_only_earlier() -> None:
    modules = module_names(PLUGIN_ROOT)
    assert {layer_of(m) for m in modules if m.startswith(SQL + ".")} == set(range(len(LAYERS)))
    assert violations(imports(modules)) == []


def test_no_import_cycle_in_the_plugin() -> None:
    modules = module_names(PLUGIN_ROOT)
    assert len(list(imports(modules))) > 200  # the walk reads the plugin's imports at all
    assert cycles(imports(modules)) == []


def test_the_checks_catch_a_deferred_upward_import_and_a_type_checking_cycle(tmp_path: Path) -> None:
    """The checks themselves, on a small tree shaped like the plugin's: an import inside a
    function from a lower layer to a higher one, and a cycle closed under TYPE_CHECKING."""
    sql = tmp_path / "pydb" / "plugin" / "sql"
    for layer in ("catalog", "analyzer"):
        (sql / layer).mkdir(parents=True)
        (sql / layer / "__init__.py").write_text("")
    (sql / "__init__.py").write_text("")
    (tmp_path / "pydb" / "__init__.py").write_text("")
    (tmp_path / "pydb" / "plugin" / "__init__.py").write_text("")
    (sql / "catalog" / "model.py").write_text("def f():\n    from ..analyzer.run import go\n    return go\n")
    (sql / "analyzer" / "run.py").write_text("from ..catalog import model\nfrom .core import X\ngo = 1\n")
    (sql / "analyzer" / "core.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .run import go\nX = 1\n"
    )
    modules = module_names(tmp_path)
    found = list(imports(modules))
    assert violations(found) == [
        "pydb.plugin.sql.catalog.model:2 imports pydb.plugin.sql.analyzer.run: layer catalog is below analyzer"
    ]
    assert cycles(found) == [
        ["pydb.plugin.sql.analyzer.core", "pydb.plugin.sql.analyzer.run", "pydb.plugin.sql.catalog.model"]
    ]


def test_no_module_over_600_lines() -> None:
    """COMMON.md's limit, for every module of the plugin and the runtime."""
    long = {
        str(p.relative_to(PLUGIN_ROOT)): n
        for p in PLUGIN_ROOT.rglob("*.py")
        if (n := len(p.read_text().splitlines())) > 600
    }
    assert long == {}


def test_expression_typing_does_not_depend_on_registration_order() -> None:
    """`infer_node` types a node by the handler of the most specific registered class in its
    MRO: for that to be the only possible reading, the registered classes every sqlglot node
    class meets must form one chain (each a subclass of the next), never two unrelated ones."""
    import inspect
    import itertools

    from pydb.plugin.sql.analyzer import expressions
    from sqlglot import exp

    registered = expressions._HANDLERS
    assert len(registered) > 40
    kinds = [c for _, c in inspect.getmembers(exp, inspect.isclass) if issubclass(c, exp.Expr)]
    tangled = []
    for kind in kinds:
        met = [k for k in kind.__mro__ if k in registered]
        tangled += [(kind, a, b) for a, b in itertools.pairwise(met) if not issubclass(a, b)]
    assert tangled == []
    assert expressions._handler(exp.Coalesce) is registered[exp.Func]  # a Func without its own
    assert expressions._handler(exp.Cast) is registered[exp.Cast]  # more specific than Func
