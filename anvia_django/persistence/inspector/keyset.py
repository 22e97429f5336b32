"""Newest-first keyset paging over (a timestamp, id), for the inspector's
smaller lists (runs, forks, summaries).

A page fetches one row more than it shows: that row only says whether a
next page exists, so no list needs a COUNT and no page uses an OFFSET.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Generic, TypeVar

from django.db.models import Q

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RowKey:
    """Where a newest-first listing stopped: the last row's (moment, id)."""

    moment: datetime
    id: int


def older_than(key: RowKey, field: str) -> Q:
    """Rows after ``key`` in ``ORDER BY field DESC, id DESC``."""
    return Q(**{f"{field}__lt": key.moment}) | Q(**{field: key.moment, "id__lt": key.id})


@dataclass(frozen=True, slots=True)
class KeysetPage(Generic[T]):
    items: list[T]
    next_key: RowKey | None
    """Pass as ``before`` for the next page; ``None`` on the last page."""
