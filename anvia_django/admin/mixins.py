"""The read-only policy shared by every admin of this app."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.admin.views.main import SEARCH_VAR, ChangeList
from django.db.models import Model
from django.http import HttpRequest
from django.utils.html import format_html
from django.utils.safestring import SafeString

from anvia_django.models import (
    AgentRun,
    Conversation,
    FailedRun,
    LangGraphCheckpoint,
    LangGraphStoreItem,
    MemoryMessage,
    MemorySummary,
)

from .transcript import json_text

_OWN_URL_PREFIXES = tuple(
    f"{model._meta.app_label}_{model._meta.model_name}_"
    for model in (
        Conversation,
        FailedRun,
        MemoryMessage,
        AgentRun,
        MemorySummary,
        LangGraphCheckpoint,
        LangGraphStoreItem,
    )
)


if TYPE_CHECKING:
    _ModelAdmin = admin.ModelAdmin[Any]
else:  # ModelAdmin is generic only in django-stubs
    _ModelAdmin = admin.ModelAdmin


class ReadOnlyAdminMixin(_ModelAdmin):
    """View permission only: memory is written by agents, never by hand."""

    def has_add_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        # Refused on this app's own pages. Elsewhere (deleting a project model
        # whose rows cascade into ours) the ordinary permission applies, so a
        # cascade is not blocked by "cannot delete conversation".
        match = request.resolver_match
        if match is None or (match.url_name or "").startswith(_OWN_URL_PREFIXES):
            return False
        return super().has_delete_permission(request, obj)

    def get_changelist_instance(self, request: HttpRequest) -> ChangeList:
        # PostgreSQL cannot bind text holding U+0000, and the list's query
        # runs only as the page renders, past the admin's own handling of
        # bad lookups: refused here, it is the admin's "invalid lookup"
        # notice instead of a 500. The search box's own form refuses it with
        # a message on the page.
        for name, values in request.GET.lists():
            if "\x00" in name or (name != SEARCH_VAR and any("\x00" in v for v in values)):
                raise IncorrectLookupParameters(f"{name}: must not contain NUL characters")
        return super().get_changelist_instance(request)


def pretty_json(value: object) -> SafeString:
    """A JSON value indented in a ``<pre>``, escaped."""
    return format_html('<pre class="anvia-json">{}</pre>', json_text(value))
