"""The `protoc-gen-pydb` command. The compiler's own dependencies come with the `compiler`
extra (`pip install 'protoc-gen-pydb[compiler]'`); a runtime-only install, which is all a
deployed server needs, gets told what to install rather than a traceback."""

from __future__ import annotations

import importlib.util
import sys

#: What the plugin imports that the runtime does not (pyproject.toml, extra `compiler`).
COMPILER_MODULES = ("sqlglot", "pglast", "jinja2")

MISSING_COMPILER = """\
protoc-gen-pydb: the compiler is not installed (missing: {missing}).
This installation has the runtime only: what generated code imports to serve. To generate code, install
the compiler extra:
    pip install 'protoc-gen-pydb[compiler]'      (from a checkout of protoc-gen-pydb: pip install '.[compiler]')"""


def missing_compiler_modules() -> list[str]:
    return [name for name in COMPILER_MODULES if importlib.util.find_spec(name) is None]


def main() -> int:
    missing = missing_compiler_modules()
    if missing:
        print(MISSING_COMPILER.format(missing=", ".join(missing)), file=sys.stderr)
        return 1
    from pydb.plugin.main import main as plugin_main

    return plugin_main()
