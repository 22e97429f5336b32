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
from django.db import connections
from django.db.models import QuerySet
from django.utils.functional import cached_property

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
    connection = connections[object_list.db]
    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT reltuples::bigint FROM pg_class WHERE oid = to_regclass(%s)",
            [connection.ops.quote_name(object_list.model._meta.db_table)],
        )
        row = cursor.fetchone()
    # -1 (never analysed) or no row: no estimate.
    return int(row[0]) if row and row[0] >= 0 else None
