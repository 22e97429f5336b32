"""A string inside a conversation's metadata, as a query expression.

``Conversation.metadata`` is JSON text (``ExactJSONField``), so Django's
``metadata__tenant_id`` key lookups do not apply to it. :class:`MetadataString`
reads the value at a dotted path (``"tenant_id"``, ``"org.id"``) with each
backend's JSON functions, and only when that value is a JSON string; any
other value (a number, an object, a missing key, no metadata) reads as NULL,
so ``tenant_id: 5`` never matches ``"5"``. Compared byte for byte on every
backend, as the scope key is.

Cost: no index holds these values (one would need a migration per
configured key), so a filter on one reads the rows its other conditions
select, newest first, until the page is full: a listing filtered by a
tenant walks the ``updated_at`` index (or the user's, with ``userId``) and
checks each row's metadata. A page of a tenant that holds a fraction f of
the conversations reads about ``limit / f`` rows; the planner may prefer a
scan and a sort (PostgreSQL at 10,000 rows: all of them, 13 ms).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.db.models import QuerySet

from anvia_django.conf import app_settings
from anvia_django.core.memory.validation import validate_identifier
from anvia_django.models import Conversation
from anvia_django.persistence.dialects.json_values import MetadataString


def filter_by_metadata(
    conversations: QuerySet[Conversation, Any], values: Mapping[str, Any]
) -> QuerySet[Conversation, Any]:
    """``conversations`` whose metadata holds, at each dotted path of
    ``values``, that string (a value or a :class:`Slot`)."""
    if not values:
        return conversations
    aliases = {f"_metadata_{index}": MetadataString(path) for index, path in enumerate(values)}
    conversations = conversations.alias(**aliases)
    return conversations.filter(**{name: values[aliased.path] for name, aliased in aliases.items()})


def validate_metadata_filter(metadata: Mapping[str, str] | None) -> Mapping[str, str]:
    """``metadata`` (``{}`` for ``None``) with each value checked as an id
    is: a non-empty string no backend refuses to compare."""
    if not metadata:
        return {}
    for path, value in metadata.items():
        validate_identifier(value, f"metadata {path!r}", app_settings.input_limits, optional=False)
    return metadata


@dataclass(frozen=True, slots=True)
class TenantRestriction:
    """Only the conversations whose metadata holds one of ``values`` at
    ``path`` (the scope's tenant key): what a reader may see when the
    ``STAFF_TENANTS`` hook restricts them. No values: nothing."""

    path: str
    values: frozenset[str]


def restrict_to_tenants(
    rows: QuerySet[Any, Any], tenants: TenantRestriction | None, *, through: str = ""
) -> QuerySet[Any, Any]:
    """``rows`` (conversations, or with ``through="conversation__"`` the rows
    of a conversation's table) narrowed to ``tenants``; unchanged for ``None``."""
    if tenants is None:
        return rows
    if not tenants.values:
        return rows.none()
    tenant = MetadataString(tenants.path, f"{through}metadata")
    narrowed: QuerySet[Any, Any] = rows.alias(_visible_tenant=tenant).filter(
        _visible_tenant__in=sorted(tenants.values)
    )
    return narrowed
