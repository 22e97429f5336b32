"""Newest-first keyset paging over (a timestamp, id): every list of the
inspector pages so (conversations, search hits by conversation, runs, forks).

A page fetches one row more than it shows: that row only says whether a
next page exists, so no list needs a COUNT and no page uses an OFFSET.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar

from django.db.models import Q

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RowKey:
    """Where a newest-first listing stopped: the last row's (moment, id)."""

    moment: datetime
    id: int


def older_than(field: str, moment: Any, id: Any) -> Q:
    """Rows after ``(moment, id)`` in ``ORDER BY field DESC, id DESC``
    (values, or a compiled query's slots).

    A range on ``field`` minus the ties at ``moment``: the range is an index
    condition on ``(field, id)`` and on ``(user_id, field, id)``, so a deep
    page seeks to its key instead of filtering every newer row on the way
    (an OR of the two cases is only a filter there); the exclusion touches
    the rows at ``moment`` alone."""
    return Q(**{f"{field}__lte": moment}) & ~Q(**{field: moment, "id__gte": id})


@dataclass(frozen=True, slots=True)
class KeysetPage(Generic[T]):
    items: list[T]
    next_key: RowKey | None
    """Pass as ``before`` (``after`` for conversations) for the next page;
    ``None`` on the last page."""


def page_of(
    rows: list[Any], limit: int, key: Callable[[Any], RowKey], item: Callable[[Any], T]
) -> KeysetPage[T]:
    """A page of ``rows`` fetched ``limit + 1`` at most: the extra row only
    says that a next page exists, so no list needs a COUNT or an OFFSET."""
    shown = rows[:limit]
    next_key = key(shown[-1]) if len(rows) > limit else None
    return KeysetPage([item(row) for row in shown], next_key)
