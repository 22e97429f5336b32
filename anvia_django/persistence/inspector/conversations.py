"""Read-only queries behind the inspector, the API and the admin.

Nothing here writes. Conversations are listed newest first by keyset on
(updated_at, id), served by the ``anvia_conv_*updated_idx`` indexes, so page
1000 costs what page 1 costs; messages are paged by position, served by the
(conversation, position) constraint. Message counts are the stored ones.
The listing, lookup and page queries are querysets compiled once per shape
(``compiled.py``): they run on every call.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from django.db.models import QuerySet

from anvia_django.conf import app_settings
from anvia_django.core.memory.errors import InvalidMemoryInputError
from anvia_django.core.memory.types import (
    FailedRunRecord,
    MemoryConversation,
    MemoryConversationMessage,
    MemoryConversationSummary,
)
from anvia_django.core.memory.validation import validate_identifier
from anvia_django.models import Conversation, FailedRun, MemoryMessage
from anvia_django.persistence.codec import codec_for
from anvia_django.persistence.compiled import CompiledQuery, Slot, compile_once
from anvia_django.persistence.databases import read_alias
from anvia_django.persistence.inspector.keyset import KeysetPage, RowKey, older_than, page_of
from anvia_django.persistence.inspector.metadata_values import (
    TenantRestriction,
    filter_by_metadata,
    restrict_to_tenants,
    validate_metadata_filter,
)
from anvia_django.persistence.inspector.rows import (
    FAILED_RUN_FIELDS,
    MESSAGE_FIELDS,
    SUMMARY_FIELDS,
    failed_run_from_row,
    message_from_row,
    summary_from_row,
)
from anvia_django.persistence.reconnect import retry_read_if_connection_lost

_REF_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,32}")
_LAST_POSITION = 2**63 - 1
"""The largest position a ``PositiveBigIntegerField`` holds."""


ConversationPage = KeysetPage[MemoryConversationSummary]


@dataclass(frozen=True, slots=True)
class FoundConversation:
    id: int
    """The primary key, for paging its messages; never shown to clients."""
    summary: MemoryConversationSummary


@dataclass(frozen=True, slots=True)
class MessagePage:
    items: list[MemoryConversationMessage]
    has_more: bool
    """Whether messages after the last of ``items`` exist."""

    @property
    def next_after(self) -> int | None:
        return self.items[-1].position if self.has_more and self.items else None


def validate_limit(limit: object, *, maximum: int | None = None) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvalidMemoryInputError("must be a positive integer", path="limit")
    if maximum is not None and limit > maximum:
        raise InvalidMemoryInputError(f"must be at most {maximum}", path="limit")
    return limit


def validate_after(after: object) -> int | None:
    if after is None:
        return None
    if isinstance(after, bool) or not isinstance(after, int) or after < 0:
        raise InvalidMemoryInputError("must be a non-negative integer position", path="after")
    if after > _LAST_POSITION:
        # No database could compare it with a 64-bit column (SQLite raises).
        raise InvalidMemoryInputError("must be a position below 2**63", path="after")
    return after


def is_wellformed_ref(ref: object) -> bool:
    return isinstance(ref, str) and _REF_PATTERN.fullmatch(ref) is not None


def list_conversation_summaries(
    limit: int, user_id: str | None = None, *, using: str | None = None
) -> list[MemoryConversationSummary]:
    """The ``limit`` most recently updated conversations, newest first."""
    return list_conversation_page(limit, user_id, using=using).items


@retry_read_if_connection_lost
def list_conversation_page(
    limit: int,
    user_id: str | None = None,
    *,
    after: RowKey | None = None,
    metadata: Mapping[str, str] | None = None,
    tenants: TenantRestriction | None = None,
    using: str | None = None,
) -> ConversationPage:
    """Up to ``limit`` conversations newest first (ties: newest row first),
    starting after ``after``; one query whatever the page.

    ``metadata``: dotted paths and the string each must hold in the
    conversation's metadata (``{"tenant_id": "acme"}``); see
    :mod:`.metadata_values` for what such a filter costs. ``tenants``: only
    those of the tenants a reader may see (the ``STAFF_TENANTS`` hook).

    A conversation updated while a client pages moves to the front, so a
    scan sees every conversation that was not updated during it exactly once.
    """
    validate_limit(limit)
    # Also keeps text no backend can compare (U+0000 on PostgreSQL) out of the query.
    validate_identifier(user_id, "user_id", app_settings.input_limits, optional=True)
    metadata = validate_metadata_filter(metadata)
    alias = read_alias(using)
    if tenants is not None:
        rows = _restricted_rows(alias, limit, user_id, after, metadata, tenants)
    else:
        rows = _conversation_rows(alias, limit, user_id, after, metadata)
    return conversation_page(rows, limit)


def conversation_page(rows: list[Any], limit: int) -> ConversationPage:
    """A page of ``limit + 1`` rows of ``("id", *SUMMARY_FIELDS)`` at most."""
    return page_of(
        rows,
        limit,
        lambda row: RowKey(row[_UPDATED_AT], row[0]),
        lambda row: summary_from_row(tuple(row[1:])),
    )


_SUMMARY_ROW = ("id", *SUMMARY_FIELDS)
_UPDATED_AT = _SUMMARY_ROW.index("updated_at")
_CONVERSATION = Conversation._meta


def _conversation_rows(
    alias: str,
    limit: int,
    user_id: str | None,
    after: RowKey | None,
    metadata: Mapping[str, str],
) -> list[list[Any]]:
    """``limit + 1`` rows of ``("id", *SUMMARY_FIELDS)``, newest first."""
    paths = tuple(sorted(metadata))
    query = _listing_query(alias, user_id is not None, after is not None, limit + 1, paths)
    values: dict[str, Any] = {"user_id": user_id}
    values.update((_metadata_slot(path), value) for path, value in metadata.items())
    if after is not None:
        values.update(updated_at=after.moment, id=after.id)
    return query.rows(alias, values)


def _restricted_rows(
    alias: str,
    limit: int,
    user_id: str | None,
    after: RowKey | None,
    metadata: Mapping[str, str],
    tenants: TenantRestriction,
) -> list[Any]:
    """:func:`_conversation_rows` within ``tenants``: the same query with an
    ``IN`` of the tenants, built per call (their number varies by reader)."""
    conversations = Conversation.objects.using(alias)
    if user_id is not None:
        conversations = conversations.filter(user_id=user_id)
    conversations = restrict_to_tenants(filter_by_metadata(conversations, metadata), tenants)
    if after is not None:
        conversations = conversations.filter(older_than("updated_at", after.moment, after.id))
    newest_first = conversations.order_by("-updated_at", "-id")
    return list(newest_first.values_list(*_SUMMARY_ROW)[: limit + 1])


@lru_cache(maxsize=64)
def _listing_query(
    alias: str, by_user: bool, keyset: bool, rows: int, metadata_paths: tuple[str, ...] = ()
) -> CompiledQuery:
    conversations = _conversations(by_user)
    if metadata_paths:
        conversations = filter_by_metadata(
            conversations,
            {path: Slot(_metadata_slot(path), _METADATA_VALUE) for path in metadata_paths},
        )
    if keyset:
        updated_at = Slot("updated_at", _CONVERSATION.get_field("updated_at"))
        row_id = Slot("id", _CONVERSATION.get_field("id"))
        conversations = conversations.filter(older_than("updated_at", updated_at, row_id))
    newest_first = conversations.order_by("-updated_at", "-id")
    return compile_once(newest_first.values_list(*_SUMMARY_ROW)[:rows], alias)


@retry_read_if_connection_lost
def find_conversation(
    ref: str,
    user_id: str | None = None,
    *,
    tenants: TenantRestriction | None = None,
    using: str | None = None,
) -> FoundConversation | None:
    """The conversation behind ``ref`` (owned by ``user_id`` when given, and
    of one of ``tenants``); ``None`` for an unknown or malformed ref, without
    a query for the latter."""
    if not is_wellformed_ref(ref):
        return None
    alias = read_alias(using)
    if tenants is not None:
        found = restrict_to_tenants(_conversations(False).using(alias).filter(ref=ref), tenants)
        if user_id is not None:
            found = found.filter(user_id=user_id)
        rows: list[Any] = list(found.values_list(*_SUMMARY_ROW))
    else:
        rows = _find_query(alias, user_id is not None).rows(alias, {"ref": ref, "user_id": user_id})
    if not rows:
        return None
    return FoundConversation(id=rows[0][0], summary=summary_from_row(tuple(rows[0][1:])))


@lru_cache(maxsize=16)
def _find_query(alias: str, by_user: bool) -> CompiledQuery:
    # ref is unique: at most one row, so neither ORDER BY nor LIMIT.
    found = _conversations(by_user).filter(ref=Slot("ref", _CONVERSATION.get_field("ref")))
    return compile_once(found.values_list(*_SUMMARY_ROW), alias)


@retry_read_if_connection_lost
def list_message_page(
    conversation_id: int, *, after: int | None = None, limit: int, using: str | None = None
) -> MessagePage:
    """Up to ``limit`` messages with a position above ``after``, in position
    order; one query whatever the page."""
    validate_limit(limit)
    validate_after(after)
    alias = read_alias(using)
    query = _message_page_query(alias, after is not None, limit + 1)
    rows = query.rows(alias, {"conversation": conversation_id, "after": after})
    rows = codec_for(alias).open_rows(conversation_id, rows, position=0, message=4)
    return MessagePage(
        items=[message_from_row(tuple(row)) for row in rows[:limit]], has_more=len(rows) > limit
    )


@lru_cache(maxsize=64)
def _message_page_query(alias: str, after: bool, rows: int) -> CompiledQuery:
    messages = MemoryMessage.objects.filter(
        conversation=Slot("conversation", MemoryMessage._meta.get_field("conversation"))
    )
    if after:
        messages = messages.filter(
            position__gt=Slot("after", MemoryMessage._meta.get_field("position"))
        )
    return compile_once(messages.order_by("position").values_list(*MESSAGE_FIELDS)[:rows], alias)


@retry_read_if_connection_lost
def list_failed_runs(
    conversation_id: int, *, limit: int, using: str | None = None
) -> list[FailedRunRecord]:
    """The conversation's ``limit`` newest failed runs, newest first."""
    validate_limit(limit)
    alias = read_alias(using)
    rows: Any = (
        FailedRun.objects.using(alias)
        .filter(conversation_id=conversation_id)
        .order_by("-created_at", "-id")
        .values_list(*FAILED_RUN_FIELDS)[:limit]
    )
    codec = codec_for(alias)
    if codec.opens:
        rows = [
            (run_id, kind, *codec.open_failed_run(conversation_id, run_id, *payload), created)
            for run_id, kind, *payload, created in rows
        ]
    return [failed_run_from_row(row) for row in rows]


@retry_read_if_connection_lost
def get_conversation_with_messages(
    ref: str, *, using: str | None = None
) -> MemoryConversation | None:
    """One conversation and all its messages in position order (the
    inspector contract; the API and admin page through messages instead)."""
    found = find_conversation(ref, using=using)
    if found is None:
        return None
    alias = read_alias(using)
    messages: Any = (
        MemoryMessage.objects.using(alias)
        .filter(conversation_id=found.id)
        .order_by("position")
        .values_list(*MESSAGE_FIELDS)
    )
    messages = codec_for(alias).open_rows(found.id, messages, position=0, message=4)
    summary = found.summary
    return MemoryConversation.from_summary(summary, [message_from_row(row) for row in messages])


_METADATA_VALUE = _CONVERSATION.get_field("session_id")
"""How a metadata value is bound: as text compared exactly, like an id."""


def _metadata_slot(path: str) -> str:
    return f"metadata:{path}"


def _conversations(by_user: bool) -> QuerySet[Conversation, Any]:
    conversations = Conversation.objects.all()
    if by_user:
        conversations = conversations.filter(
            user_id=Slot("user_id", _CONVERSATION.get_field("user_id"))
        )
    return conversations
