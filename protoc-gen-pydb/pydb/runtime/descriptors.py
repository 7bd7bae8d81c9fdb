"""What server reflection may show: the services' descriptors without pydb's options.

Every annotated RPC carries its SQL in the `(pydb.v1.sql)` method option (and the file names
its schema in `(pydb.v1.schema)`); reflection serves whole file descriptors, so by default it
would hand every caller the statements behind the API. `public_pool` copies the files that
define the served services (and their imports) into a pool of their own with every `pydb.*`
option removed, and with unknown options dropped too (an option this process cannot read is
one it cannot vouch for). `--reflection-options` serves the originals instead.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from google.protobuf import descriptor, descriptor_pb2, descriptor_pool
from google.protobuf.message import Message

PYDB_PACKAGE = "pydb."


def public_pool(
    service_names: Sequence[str], source: descriptor_pool.DescriptorPool | None = None
) -> descriptor_pool.DescriptorPool:
    """A pool holding the files of `service_names` (found in `source`, default the process-wide
    pool) and everything they import, with no pydb options."""
    source = source or descriptor_pool.Default()
    pool = descriptor_pool.DescriptorPool()
    added: set[str] = set()
    for name in service_names:
        try:
            service = source.FindServiceByName(name)
        except KeyError:
            continue  # e.g. grpc.health.v1.Health when its module registers elsewhere
        for file in _with_imports(service.file, added):
            proto = descriptor_pb2.FileDescriptorProto()
            file.CopyToProto(proto)
            strip_pydb_options(proto)
            pool.Add(proto)
    return pool


def _with_imports(file: descriptor.FileDescriptor, added: set[str]) -> Iterator[descriptor.FileDescriptor]:
    """`file` after its imports (a pool needs them first), each file once."""
    if file.name in added:
        return
    added.add(file.name)
    for dependency in file.dependencies:
        yield from _with_imports(dependency, added)
    yield file


def strip_pydb_options(element: Message) -> None:
    """Remove every `pydb.*` extension (and unknown option) from each options message in
    `element` (a FileDescriptorProto or any part of one), walking it whole."""
    for field, value in element.ListFields():
        if field.message_type is None:
            continue
        if field.name == "options":
            _strip(value)
            if not value.ListFields():
                element.ClearField("options")
            continue
        for child in value if field.is_repeated else (value,):
            strip_pydb_options(child)


def _strip(options: Message) -> None:
    for field, _ in options.ListFields():
        if field.is_extension and field.full_name.startswith(PYDB_PACKAGE):
            options.ClearExtension(field)  # type: ignore[arg-type]
    options.DiscardUnknownFields()
