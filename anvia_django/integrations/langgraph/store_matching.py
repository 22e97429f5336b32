"""What a store search and a namespace listing match, decided in Python
(values may be sealed, so the database cannot compare them)."""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable
from typing import Any

from langgraph.store.base import MatchCondition

SEPARATOR = "."
"""Between a namespace's labels in its column: LangGraph refuses labels with a dot."""

_COMPARISONS: dict[str, Callable[[Any, Any], bool]] = {
    "$eq": operator.eq,
    "$ne": operator.ne,
    "$gt": operator.gt,
    "$gte": operator.ge,
    "$lt": operator.lt,
    "$lte": operator.le,
}


def namespace_text(namespace: Iterable[str]) -> str:
    return SEPARATOR.join(namespace)


def namespace_of(text: str) -> tuple[str, ...]:
    return tuple(text.split(SEPARATOR))


def matches_filter(value: dict[str, Any], filter: dict[str, Any] | None) -> bool:
    """Whether ``value`` holds every field of ``filter``: a value to equal,
    or a mapping of operators (``$eq``, ``$ne``, ``$gt``, ``$gte``, ``$lt``,
    ``$lte``) that all hold. A missing field matches ``$ne`` only."""
    for field, wanted in (filter or {}).items():
        if isinstance(wanted, dict) and wanted and all(name in _COMPARISONS for name in wanted):
            if not all(_holds(value, field, name, bound) for name, bound in wanted.items()):
                return False
        elif field not in value or value[field] != wanted:
            return False
    return True


def _holds(value: dict[str, Any], field: str, name: str, bound: Any) -> bool:
    if field not in value:
        return name == "$ne"
    try:
        return _COMPARISONS[name](value[field], bound)
    except TypeError:  # values of different kinds do not compare
        return False


def matches_conditions(
    namespace: tuple[str, ...], conditions: Iterable[MatchCondition] | None
) -> bool:
    """Whether ``namespace`` meets every condition: a path (``"*"`` for
    any one label) it starts with (``prefix``) or ends with (``suffix``)."""
    for condition in conditions or ():
        path = tuple(condition.path)
        if len(path) > len(namespace):
            return False
        part = (
            namespace[: len(path)] if condition.match_type == "prefix" else namespace[-len(path) :]
        )
        if path and not all(want in ("*", label) for want, label in zip(path, part, strict=True)):
            return False
    return True
