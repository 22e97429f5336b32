"""Content search over stored message text: the admin and the API call these.

A message matches when its text (``content`` as a string, or the ``text`` of
the parts of a ``content`` list) holds every word of the query; JSON keys,
tool calls and structured tool results are not text. Each backend answers
from the full-text index migration 0007 built (see ``text_match``), so a
page is one query whatever the table's size, and paging is by keyset:
newest message first for hits across conversations, position order inside
one conversation, newest conversation first for conversations.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.db import connections
from django.db.models import BigIntegerField, ExpressionWrapper, F, Min, QuerySet

from anvia_django.core.memory.errors import InvalidMemoryInputError
from anvia_django.core.memory.search_text import SearchTerms, message_text, snippet, terms_of
from anvia_django.models import Conversation, MemoryMessage
from anvia_django.persistence.codec import SearchScope, codec_for
from anvia_django.persistence.databases import read_alias
from anvia_django.persistence.dialects.full_text import MatchesText, can_match
from anvia_django.persistence.inspector.conversations import (
    ConversationPage,
    MessagePage,
    conversation_page,
    validate_after,
)
from anvia_django.persistence.inspector.conversations import validate_limit as _validate_limit
from anvia_django.persistence.inspector.keyset import KeysetPage, RowKey, older_than
from anvia_django.persistence.inspector.metadata_values import (
    TenantRestriction,
    filter_by_metadata,
    restrict_to_tenants,
    validate_metadata_filter,
)
from anvia_django.persistence.inspector.rows import (
    MESSAGE_FIELDS,
    SUMMARY_FIELDS,
)
from anvia_django.persistence.inspector.unreadable import all_readable, opened_messages
from anvia_django.persistence.reconnect import retry_read_if_connection_lost

MAX_QUERY_LENGTH = 200
"""Characters of a search query; longer ones are refused, not cut."""


@dataclass(frozen=True, slots=True)
class SearchHit:
    conversation_id: int
    """The primary key, for admin links; never shown to API clients."""
    conversation_ref: str
    session_id: str
    user_id: str | None
    position: int
    role: str
    snippet: str
    """A short stretch of the text around the first word found."""
    message_id: int


@dataclass(frozen=True, slots=True)
class SearchPage:
    items: list[SearchHit]
    next_after: int | None
    """Pass as ``after`` for the next page; ``None`` on the last page."""


def validate_query(q: object) -> SearchTerms:
    """The query's terms; :class:`InvalidMemoryInputError` naming ``q`` for
    anything no backend could be asked (empty, over-long, U+0000, lone
    surrogates). Punctuation alone is valid and matches nothing."""
    if not isinstance(q, str):
        raise InvalidMemoryInputError(f"must be a string, not {type(q).__name__}", path="q")
    text = q.strip()
    if not text:
        raise InvalidMemoryInputError("must not be empty", path="q")
    if len(text) > MAX_QUERY_LENGTH:
        raise InvalidMemoryInputError(
            f"is {len(text)} characters long; the maximum is {MAX_QUERY_LENGTH}", path="q"
        )
    if "\x00" in text or not _encodable(text):
        raise InvalidMemoryInputError("must be text without U+0000 or lone surrogates", path="q")
    return terms_of(text)


@retry_read_if_connection_lost
def search_messages(
    q: str,
    *,
    limit: int,
    user_id: str | None = None,
    after: int | None = None,
    using: str | None = None,
) -> SearchPage:
    """Messages whose text matches ``q``, newest first, across conversations
    (of ``user_id`` only, when given); ``after`` is a previous page's
    ``next_after``. One query, or none when ``q`` has no word to look for."""
    terms = validate_query(q)
    _validate_limit(limit)
    validate_after(after)
    alias = read_alias(using)
    shown = terms.words
    terms = indexed_terms(alias, terms, SearchScope(user_id=user_id))
    if not can_match(terms, connections[alias]):
        return SearchPage(items=[], next_after=None)
    messages = _matching(alias, terms)
    if user_id is not None:
        messages = messages.filter(conversation__user_id=user_id)
    if after is not None:
        messages = messages.filter(id__lt=after)
    # "id + 0", not "id": ordered by the bare key, PostgreSQL reads the
    # primary key backwards and rechecks every row until 51 match, which for
    # a word frequent long ago and rare lately means the whole table (6 s
    # at 10^6 messages); by the expression it takes the matches from the
    # index and sorts them, a cost that follows the number of matches.
    newest_first = ExpressionWrapper(F("id") + 0, output_field=BigIntegerField()).desc()
    rows = list(
        messages.order_by(newest_first).values_list(
            "id",
            "conversation_id",
            "conversation__ref",
            "conversation__session_id",
            "conversation__user_id",
            "position",
            "role",
            "message",
        )[: limit + 1]
    )
    hits = [
        SearchHit(
            conversation_id=conversation_id,
            conversation_ref=ref,
            session_id=session_id,
            user_id=owner,
            position=position,
            role=role,
            snippet=snippet(message_text(message), shown),
            message_id=message_id,
        )
        for message_id, conversation_id, ref, session_id, owner, position, role, message in _opened(
            alias, rows[:limit], conversation=1, position=5, message=7
        )
    ]
    more = len(rows) > limit
    return SearchPage(items=hits, next_after=hits[-1].message_id if more else None)


@retry_read_if_connection_lost
def search_message_page(
    conversation_id: int,
    q: str,
    *,
    after: int | None = None,
    limit: int,
    using: str | None = None,
) -> MessagePage:
    """``list_message_page`` keeping only the messages whose text matches ``q``."""
    terms = validate_query(q)
    _validate_limit(limit)
    validate_after(after)
    alias = read_alias(using)
    terms = indexed_terms(alias, terms, SearchScope(conversation_id=conversation_id))
    if not can_match(terms, connections[alias]):
        return MessagePage(items=[], has_more=False)
    messages = _matching(alias, terms).filter(conversation_id=conversation_id)
    if after is not None:
        messages = messages.filter(position__gt=after)
    rows = list(messages.order_by("position").values_list(*MESSAGE_FIELDS)[: limit + 1])
    shown = opened_messages(codec_for(alias), alias, conversation_id, rows[:limit])
    return MessagePage(items=all_readable(shown), has_more=len(rows) > limit)


@retry_read_if_connection_lost
def search_conversation_page(
    q: str,
    limit: int,
    user_id: str | None = None,
    *,
    after: RowKey | None = None,
    metadata: Mapping[str, str] | None = None,
    tenants: TenantRestriction | None = None,
    using: str | None = None,
) -> ConversationPage:
    """``list_conversation_page`` keeping only conversations with a message
    whose text matches ``q``; the same order, keyset and filters."""
    terms = validate_query(q)
    _validate_limit(limit)
    alias = read_alias(using)
    conversations = Conversation.objects.using(alias)
    if user_id is not None:
        conversations = conversations.filter(user_id=user_id)
    conversations = filter_by_metadata(conversations, validate_metadata_filter(metadata))
    conversations = restrict_to_tenants(conversations, tenants)
    # The filters first: a keyed index looks for the tokens of the owners they leave.
    scope = SearchScope(user_id=user_id, conversations=conversations)
    terms = indexed_terms(alias, terms, scope)
    if not can_match(terms, connections[alias]):
        return KeysetPage([], None)
    conversations = conversations.filter(id__in=_matching(alias, terms).values("conversation_id"))
    if after is not None:
        conversations = conversations.filter(older_than("updated_at", after.moment, after.id))
    rows = list(
        conversations.order_by("-updated_at", "-id").values_list("id", *SUMMARY_FIELDS)[: limit + 1]
    )
    return conversation_page(rows, limit)


@retry_read_if_connection_lost
def matching_conversations(
    conversations: QuerySet[Conversation, Any], terms: SearchTerms
) -> QuerySet[Conversation, Any]:
    """``conversations`` narrowed to those with a message matching ``terms``
    (for querysets the caller builds on, such as the admin's changelist)."""
    alias = conversations.db
    terms = indexed_terms(alias, terms, SearchScope(conversations=conversations))
    if not can_match(terms, connections[alias]):
        return conversations.none()
    return conversations.filter(id__in=_matching(alias, terms).values("conversation_id"))


@retry_read_if_connection_lost
def first_matching_positions(
    conversation_ids: list[int], q: str, *, using: str | None = None
) -> dict[int, int]:
    """For each of ``conversation_ids`` with a match, its first matching
    position; one query for any number of conversations."""
    alias = read_alias(using)
    terms = validate_query(q)
    if not conversation_ids:
        return {}
    within = Conversation.objects.using(alias).filter(pk__in=conversation_ids)
    terms = indexed_terms(alias, terms, SearchScope(conversations=within))
    if not can_match(terms, connections[alias]):
        return {}
    rows = (
        _matching(alias, terms)
        .filter(conversation_id__in=conversation_ids)
        .order_by()
        .values("conversation_id")
        .annotate(first=Min("position"))
        .values_list("conversation_id", "first")
    )
    return dict(rows)


def indexed_terms(alias: str, terms: SearchTerms, scope: SearchScope) -> SearchTerms:
    """What the full-text index holds for ``terms``: their words, or what
    the codec keeps of them (the blind index's tokens, under the keys of
    the owners ``scope`` covers)."""
    return codec_for(alias).search_terms(terms, scope)


def _opened(
    alias: str, rows: list[Any], *, conversation: int, position: int, message: int
) -> list[Any]:
    """``rows`` (of any conversations) with their messages opened by the codec."""
    codec = codec_for(alias)
    if not codec.opens:
        return rows
    opened = []
    for row in rows:
        values = list(row)
        values[message] = codec.open_message(row[conversation], row[position], row[message])
        opened.append(tuple(values))
    return opened


def _matching(alias: str, terms: SearchTerms) -> QuerySet[MemoryMessage, MemoryMessage]:
    return MemoryMessage.objects.using(alias).filter(MatchesText(F("pk"), terms))


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
