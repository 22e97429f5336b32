"""The items of LangGraph's store (``DjangoStore``), read-only: the most
recently written first, searchable by exact namespace, each page showing
the value decoded (opened first when encryption at rest sealed it).

The list never reads a value, so its queries do not grow with its rows.
Staff whom the tenant restriction (``tenants.py``) limits to some tenants
see the items of namespaces that carry one of them (``scoped_namespace``),
as for threads.
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.safestring import SafeString

from anvia_django.integrations.langgraph.maintenance import visible_items
from anvia_django.integrations.langgraph.models import LangGraphStoreItem
from anvia_django.integrations.langgraph.places import opened_item
from anvia_django.persistence.codec import codec_for
from anvia_django.persistence.databases import read_alias
from anvia_django.persistence.inspector.unreadable import unopenable_errors
from anvia_django.tenants import visible_tenants

from .mixins import ReadOnlyAdminMixin, pretty_json
from .previews import unreadable_mark


class LangGraphStoreItemAdmin(ReadOnlyAdminMixin):
    list_display = ("key", "namespace", "updated_at", "expires_at")
    search_fields = ("namespace__exact",)  # "=namespace" would ignore case (iexact)
    search_help_text = "Exact namespace, its labels joined with dots (users.42.memories)."
    ordering = ("-updated_at", "-pk")
    show_full_result_count = False
    fields = (
        "namespace",
        "key",
        "created_at",
        "updated_at",
        "ttl_minutes",
        "expires_at",
        "value_shown",
    )
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        rows = super().get_queryset(request)
        match = request.resolver_match
        if match is not None and (match.url_name or "").endswith("_changelist"):
            rows = rows.defer("value")  # the list shows no value
        return visible_items(rows, visible_tenants(request))

    @admin.display(description="value")
    def value_shown(self, obj: LangGraphStoreItem) -> SafeString:
        codec = codec_for(read_alias(obj._state.db))
        try:
            value = json.loads(opened_item(codec, obj.namespace, obj.key, obj.value))
        except unopenable_errors() as error:
            return unreadable_mark(obj.pk, type(error).__name__, "store item")
        return pretty_json(value)
