"""The changelist search box also searches message text.

The ids a changelist already searched (session, user, run) keep matching as
before; a message whose text holds every word of the search adds its row
(its conversation, on the conversation list). On the conversation list each
row found that way links to the transcript page and anchor of its first
matching message, so a search ends at the message, not the conversation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin, messages
from django.contrib.admin.views.main import ChangeList
from django.db.models import F, Model, QuerySet
from django.http import HttpRequest

from anvia_django.core.memory.errors import InvalidMemoryInputError
from anvia_django.core.memory.search_text import SearchTerms
from anvia_django.persistence import (
    first_matching_positions,
    matching_conversations,
    validate_query,
)
from anvia_django.persistence.dialects.full_text import MatchesText

from .links import transcript_url

if TYPE_CHECKING:
    _ModelAdmin = admin.ModelAdmin[Any]
else:  # ModelAdmin is generic only in django-stubs
    _ModelAdmin = admin.ModelAdmin


def _terms(search_term: str) -> SearchTerms | None:
    try:
        return validate_query(search_term)
    except InvalidMemoryInputError:
        return None  # empty or over-long: the id search alone answers


class ConversationTextSearchMixin(_ModelAdmin):
    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Any, Any], search_term: str
    ) -> tuple[QuerySet[Any, Any], bool]:
        found, may_have_duplicates = super().get_search_results(request, queryset, search_term)
        terms = _terms(search_term)
        if terms is None:
            return found, may_have_duplicates
        try:
            return found | matching_conversations(queryset, terms), may_have_duplicates
        except InvalidMemoryInputError as error:
            # Wider than the blind index serves (docs/production.md): the id
            # search alone answers, and the staff user is told why.
            messages.warning(request, f"Content search: {error}.")
            return found, may_have_duplicates

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[ChangeList]:
        return _HitLinkingChangeList


class MessageTextSearchMixin(_ModelAdmin):
    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Any, Any], search_term: str
    ) -> tuple[QuerySet[Any, Any], bool]:
        found, may_have_duplicates = super().get_search_results(request, queryset, search_term)
        terms = _terms(search_term)
        if terms is None:
            return found, may_have_duplicates
        return found | queryset.filter(MatchesText(F("pk"), terms)), may_have_duplicates


class _HitLinkingChangeList(ChangeList):
    """Links a conversation found by its text to its first matching message."""

    _first_hits: dict[int, int] | None = None

    def url_for_result(self, result: Model) -> str:
        position = self._first_hit_positions().get(result.pk)
        if position is None:
            return super().url_for_result(result)
        return transcript_url(self.model_admin.admin_site, result.pk, position)

    def _first_hit_positions(self) -> dict[int, int]:
        # Once per page, for every row on it: one query, not one per row.
        if self._first_hits is None:
            terms = _terms(self.query) if self.query else None
            ids = [row.pk for row in self.result_list]
            try:
                self._first_hits = (
                    first_matching_positions(ids, terms.text, using=self.queryset.db)
                    if terms is not None
                    else {}
                )
            except InvalidMemoryInputError:
                self._first_hits = {}  # the rows link to their conversations
        return self._first_hits
