"""Searching an app's ADK sessions of one user: the store's content search,
a word at a time.

ADK's memory services match an event that has any word of the query and
rank by how many it has. The store's search matches every word it is
given, so each word of the query (the first :data:`MAX_WORDS`) is searched
alone, with the full-text index and, with encryption on, the blind index,
and events are ranked by the number of words they matched, the newest
first among equals."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import connections
from django.db.models import BigIntegerField, ExpressionWrapper, F

from anvia_django.core.memory.search_text import terms_of
from anvia_django.models import MemoryMessage
from anvia_django.persistence.adk.keys import app_scope_of
from anvia_django.persistence.codec import SearchScope
from anvia_django.persistence.databases import read_alias
from anvia_django.persistence.dialects.full_text import MatchesText, can_match
from anvia_django.persistence.inspector.search import indexed_terms, validate_query
from anvia_django.persistence.reconnect import retry_read_if_connection_lost

MAX_WORDS = 8
"""Words of a query searched, each one query."""


@dataclass(frozen=True, slots=True)
class FoundEvent:
    session_id: str
    position: int
    message: dict[str, Any]
    words: int
    """How many of the query's words it has."""


@retry_read_if_connection_lost
def search_events(
    app_name: str,
    user_id: str,
    metadata: dict[str, Any] | None,
    q: str,
    *,
    limit: int,
    using: str | None = None,
) -> list[FoundEvent]:
    """The user's events in the app's sessions that have words of ``q``: at
    most ``limit``, the most words first, then the newest."""
    alias = read_alias(using)
    app_scope = app_scope_of(app_name, metadata)
    newest_first = ExpressionWrapper(F("id") + 0, output_field=BigIntegerField()).desc()
    found: dict[int, tuple[int, MemoryMessage]] = {}
    for word in validate_query(q).words[:MAX_WORDS]:
        terms = indexed_terms(alias, terms_of(word), SearchScope(user_id=user_id))
        if not can_match(terms, connections[alias]):
            continue
        rows = (
            MemoryMessage.objects.using(alias)
            .filter(
                MatchesText(F("pk"), terms),
                conversation__user_id=user_id,
                conversation__adk_session__app_scope=app_scope,
            )
            .select_related("conversation")
            .only("id", "conversation_id", "position", "message", "conversation__session_id")
            .order_by(newest_first)[:limit]
        )
        for row in rows:
            count, _ = found.get(row.pk, (0, row))
            found[row.pk] = (count + 1, row)
    ranked = sorted(found.items(), key=lambda item: (-item[1][0], -item[0]))[:limit]
    return [
        FoundEvent(row.conversation.session_id, row.position, row.message, count)
        for _, (count, row) in ranked
    ]
