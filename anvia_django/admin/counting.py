"""A changelist paginator that does not scan a huge table to count it.

``show_full_result_count = False`` saves the admin's second COUNT, not the
paginator's own: on PostgreSQL an unfiltered ``COUNT(*)`` over millions of
messages reads the whole table on every page view. Unfiltered lists there
use the planner's row estimate once it is large; filtered lists (a search,
a date) and small tables count exactly.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.utils.functional import cached_property

from anvia_django.persistence.dialects import estimated_row_count

ESTIMATE_ABOVE = 100_000
"""Below this many estimated rows an exact count is cheap enough."""


if TYPE_CHECKING:
    _Paginator = Paginator[Any]
else:  # generic only in django-stubs
    _Paginator = Paginator


class EstimatedCountPaginator(_Paginator):
    @cached_property
    def count(self) -> int:
        estimate = _estimated_rows(self.object_list)
        if estimate is not None and estimate > ESTIMATE_ABOVE:
            return estimate
        return int(super().count)


def _estimated_rows(object_list: Any) -> int | None:
    if not isinstance(object_list, QuerySet) or object_list.query.where:
        return None
    return estimated_row_count(object_list.db, object_list.model)
