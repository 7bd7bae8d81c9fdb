"""PostgreSQL enum <-> proto enum, label by label."""

from __future__ import annotations

from ..protos import Enum, snake_case
from ..sql import PgType
from . import ir


def type_ref(enum: Enum) -> ir.TypeRef:
    return ir.TypeRef(enum.full_name, enum.file, enum.python_path)


def enum_mapping(pg: PgType, enum: Enum) -> tuple[ir.EnumMapping, list[str]]:
    """Pair each pg label with the proto value named PREFIX_LABEL, PREFIX being the enum's
    name in UPPER_SNAKE (TaskStatus -> TASK_STATUS_). The zero value must be PREFIX_UNSPECIFIED.
    Returns the mapping and the problems (empty when every label pairs)."""
    prefix = snake_case(enum.python_path.rsplit(".", 1)[-1]).upper() + "_"
    labels = pg.labels or ()
    by_name = dict(enum.values)
    problems = []
    zero = [name for name, num in enum.values if num == 0]
    if not zero or zero[0] != prefix + "UNSPECIFIED":
        problems.append(f"{enum.full_name}'s zero value must be {prefix}UNSPECIFIED")
    pairs = []
    for label in labels:
        name = prefix + label.upper()
        if name not in by_name:
            problems.append(f"label '{label}' of {pg.name} has no value {name} in {enum.full_name}")
        else:
            pairs.append((label, name))
    expected = {prefix + label.upper() for label in labels} | {prefix + "UNSPECIFIED"}
    for name, _ in enum.values:
        if name not in expected:
            problems.append(f"{enum.full_name}.{name} has no label in {pg.name} ({', '.join(labels)})")
    return ir.EnumMapping(pg.name, type_ref(enum), tuple(pairs), zero[0] if zero else prefix + "UNSPECIFIED"), problems
