"""A changelist filter per metadata key of the ``SCOPE`` setting (tenants).

``ANVIA_DJANGO["SCOPE"] = {"metadata_keys": ["tenant_id", "org.id"]}`` gives
the conversation list a "tenant_id" and an "org.id" filter
(``?scope_tenant_id=acme``). The choices are the distinct values among the
:data:`SAMPLED_CONVERSATIONS` most recently updated conversations, at most
:data:`CHOICES_SHOWN` of them: one query per key whatever the table's size.
Any other value can be given in the URL; the selected one is always listed.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from django.contrib import admin
from django.contrib.admin.options import IncorrectLookupParameters
from django.db.models import QuerySet
from django.http import HttpRequest

from anvia_django.conf import app_settings
from anvia_django.core.memory.errors import InvalidMemoryInputError
from anvia_django.models import Conversation
from anvia_django.persistence import (
    MetadataString,
    TenantRestriction,
    filter_by_metadata,
    restrict_to_tenants,
    validate_metadata_filter,
)
from anvia_django.tenants import visible_tenants

SAMPLED_CONVERSATIONS = 1000
"""How many of the newest conversations the choices are read from."""
CHOICES_SHOWN = 50
"""At most this many choices per key, in alphabetical order."""


class MetadataValueFilter(admin.SimpleListFilter):
    """Conversations whose metadata holds a string at :attr:`path`."""

    path: str = ""

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        using = model_admin.get_queryset(request).db
        values = set(recent_values(self.path, using=using, tenants=visible_tenants(request)))
        chosen = self.value()
        shown = sorted(values)[:CHOICES_SHOWN]
        if chosen and chosen not in shown:
            shown.append(chosen)
        return [(value, value) for value in shown]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        chosen = self.value()
        if chosen is None:
            return queryset
        try:
            values = validate_metadata_filter({self.path: chosen})
        except InvalidMemoryInputError as error:
            # The admin shows its "invalid lookup" notice instead of the list.
            raise IncorrectLookupParameters(str(error)) from None
        return filter_by_metadata(queryset, values)


def recent_values(path: str, *, using: str, tenants: TenantRestriction | None = None) -> list[str]:
    """The strings at ``path`` in the newest conversations' metadata (one
    query, at most :data:`SAMPLED_CONVERSATIONS` rows), of ``tenants`` only."""
    newest = (
        restrict_to_tenants(Conversation.objects.using(using), tenants)
        .order_by("-updated_at", "-id")
        .annotate(_scope_value=MetadataString(path))
        .values_list("_scope_value", flat=True)[:SAMPLED_CONVERSATIONS]
    )
    return [value for value in newest if value is not None]


@cache
def metadata_filter(path: str) -> type[MetadataValueFilter]:
    """The list filter of one metadata key (a dotted path)."""
    name = f"MetadataValueFilter[{path}]"
    attributes = {"path": path, "title": path, "parameter_name": f"scope_{path}"}
    return type(name, (MetadataValueFilter,), attributes)


def scope_list_filters() -> list[type[MetadataValueFilter]]:
    """One filter per metadata key of the ``SCOPE`` setting, read per request."""
    return [metadata_filter(path) for path in app_settings.scope.metadata_keys]
