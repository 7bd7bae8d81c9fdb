"""IR -> files: lowered to the render model (lower.py), laid out by the jinja2 templates shipped
in `pydb.templates`. Every value a template puts in a string, docstring or comment goes through
an escaping filter (text.py)."""

from __future__ import annotations

import functools
from importlib import resources

import jinja2

from ..bind import ir
from .lower import lower
from .text import py_block, py_comment, py_doc, py_fit, py_para, py_str


def _load_template(name: str) -> str:
    # Templates ship as the `pydb.templates` package (the repo's top-level templates/).
    return resources.files("pydb.templates").joinpath(name).read_text(encoding="utf-8")


@functools.cache
def environment() -> jinja2.Environment:
    """The templates' environment, made once per process: it keeps each template compiled (the
    handlers template takes ~60 ms), so a process that renders again (the language server, watch
    mode, the tests) compiles them once."""
    env = jinja2.Environment(
        loader=jinja2.FunctionLoader(_load_template),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters["py_block"] = py_block
    env.filters["py_str"] = py_str
    env.filters["py_comment"] = py_comment
    env.filters["py_doc"] = py_doc
    env.filters["py_fit"] = py_fit
    env.filters["py_para"] = py_para
    env.globals["Cardinality"] = ir.Cardinality
    return env


def render(files: list[ir.File]) -> list[tuple[str, str]]:
    """(path, content) for every generated file, in a stable order."""
    env = environment()
    handlers = env.get_template("handlers.py.j2")
    server = env.get_template("server.py.j2")
    out = []
    for f in sorted((lower(f) for f in files), key=lambda f: f.proto):
        out.append((f.handlers_path, handlers.render(file=f)))
        if f.services:
            out.append((f.server_path, server.render(file=f)))
    return out
