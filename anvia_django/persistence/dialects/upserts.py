"""What an upsert through ``bulk_create(update_conflicts=True)`` names.

PostgreSQL and SQLite take the unique fields of the conflict
(``ON CONFLICT (...) DO UPDATE``); MySQL and MariaDB refuse them, their
``ON DUPLICATE KEY UPDATE`` applies to any unique key.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db import connections


def conflict_target(using: str, fields: Sequence[str]) -> list[str] | None:
    """The ``unique_fields`` of an upsert on ``using`` whose key is ``fields``."""
    if connections[using].features.supports_update_conflicts_with_target:
        return list(fields)
    return None
