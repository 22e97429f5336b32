"""The database's own idea of a table's size, where it has one.

Vendor-specific on purpose: only PostgreSQL keeps a row estimate that costs
nothing to read (``pg_class.reltuples``, refreshed by ANALYZE/autovacuum).
"""

from __future__ import annotations

from django.db import connections
from django.db.models import Model


def estimated_row_count(model: type[Model], using: str) -> int | None:
    """The planner's row estimate of ``model``'s table on ``using``; ``None``
    where the database keeps none or has not analysed the table yet."""
    connection = connections[using]
    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT reltuples::bigint FROM pg_class WHERE oid = to_regclass(%s)",
            [connection.ops.quote_name(model._meta.db_table)],
        )
        row = cursor.fetchone()
    # -1 (never analysed) or no row: no estimate.
    return int(row[0]) if row and row[0] >= 0 else None
