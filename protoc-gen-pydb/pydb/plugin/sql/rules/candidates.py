"""PostgreSQL's candidate selection (parse_func.c's func_select_candidate, which
oper_select_candidate shares): among the overloads that accept the arguments implicitly, the
one its heuristics prefer (exact matches, preferred types, unknowns' type categories)."""

from __future__ import annotations

from collections.abc import Sequence

from ..catalog.types import PgType
from .coercion import (
    UNKNOWN,
    TypeEnv,
    base_type,
    can_coerce_all,
    info_of,
    is_unknown,
)


def select_candidate(inputs: Sequence[PgType], candidates: list[tuple[PgType, ...]], env: TypeEnv) -> int | None:
    """Index into `candidates` (all of which accept `inputs` implicitly) of the best one, or None
    when PostgreSQL's heuristics leave more than one."""
    nargs = len(inputs)
    base = [UNKNOWN if is_unknown(t) else base_type(t, env) for t in inputs]
    n_unknown = sum(1 for t in base if is_unknown(t))
    alive = list(range(len(candidates)))

    def keep_best(score: list[int]) -> None:
        best = max(score)
        alive[:] = [i for i, s in zip(alive, score, strict=True) if s == best]

    # 1. most exact matches on known inputs
    keep_best([sum(1 for k in range(nargs) if not is_unknown(base[k]) and candidates[i][k] == base[k]) for i in alive])
    if len(alive) == 1:
        return alive[0]
    # 2. most exact-or-preferred matches at the arguments needing coercion
    slot_category = [info_of(t, env).category for t in base]
    scores = []
    for i in alive:
        n = 0
        for k in range(nargs):
            if is_unknown(base[k]):
                continue
            cinfo = info_of(candidates[i][k], env)
            if candidates[i][k] == base[k] or (cinfo.category == slot_category[k] and cinfo.preferred):
                n += 1
        scores.append(n)
    keep_best(scores)
    if len(alive) == 1:
        return alive[0]
    if n_unknown == 0:
        return None
    # 4. unknown inputs: the category the candidates agree on (string wins), preferred types first
    resolved = True
    slot_preferred = [False] * nargs
    for k in range(nargs):
        if not is_unknown(base[k]):
            continue
        category: str | None = None
        conflict = False
        for i in alive:
            cinfo = info_of(candidates[i][k], env)
            if category is None:
                category, slot_preferred[k] = cinfo.category, cinfo.preferred
            elif cinfo.category == category:
                slot_preferred[k] |= cinfo.preferred
            elif cinfo.category == "S":
                category, slot_preferred[k] = "S", cinfo.preferred
            else:
                conflict = True
        if conflict and category != "S":
            resolved = False
            break
        slot_category[k] = category or "X"
    if resolved:
        kept = []
        for i in alive:
            ok = True
            for k in range(nargs):
                if not is_unknown(base[k]):
                    continue
                cinfo = info_of(candidates[i][k], env)
                if cinfo.category != slot_category[k] or (slot_preferred[k] and not cinfo.preferred):
                    ok = False
                    break
            if ok:
                kept.append(i)
        if kept:
            alive = kept
        if len(alive) == 1:
            return alive[0]
    # 5. all known inputs of one type: assume the unknown ones are that type too
    if n_unknown < nargs:
        known = {t for t in base if not is_unknown(t)}
        if len(known) == 1:
            (only,) = known
            assumed = [only] * nargs
            matching = [i for i in alive if can_coerce_all(assumed, candidates[i], "i", env)]
            if len(matching) == 1:
                return matching[0]
    return None
