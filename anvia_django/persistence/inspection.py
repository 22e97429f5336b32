"""Read-only queries behind the inspector, the API and the admin.

Nothing here writes. Conversations are listed newest first by keyset on
(updated_at, id), served by the ``anvia_conv_*updated_idx`` indexes, so page
1000 costs what page 1 costs; messages are paged by position, served by the
(conversation, position) constraint. Message counts are the stored ones.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Q, QuerySet

from anvia_django.core.memory.errors import InvalidMemoryInputError
from anvia_django.core.memory.types import (
    MemoryConversation,
    MemoryConversationMessage,
    MemoryConversationSummary,
)
from anvia_django.models import Conversation, FailedRun, MemoryMessage

from .databases import read_alias
from .rows import (
    FAILED_RUN_FIELDS,
    MESSAGE_FIELDS,
    SUMMARY_FIELDS,
    FailedRunRecord,
    as_utc,
    failed_run_from_row,
    message_from_row,
    summary_from_row,
)

_REF_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,32}")


@dataclass(frozen=True, slots=True)
class ConversationKey:
    """Where a listing stopped: the last row's (updated_at, id)."""

    updated_at: datetime
    id: int


@dataclass(frozen=True, slots=True)
class ConversationPage:
    items: list[MemoryConversationSummary]
    next_key: ConversationKey | None
    """Pass as ``after`` for the next page; ``None`` on the last page."""


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
    return after


def is_wellformed_ref(ref: object) -> bool:
    return isinstance(ref, str) and _REF_PATTERN.fullmatch(ref) is not None


def list_conversation_summaries(
    limit: int, user_id: str | None = None, *, using: str | None = None
) -> list[MemoryConversationSummary]:
    """The ``limit`` most recently updated conversations, newest first."""
    return list_conversation_page(limit, user_id, using=using).items


def list_conversation_page(
    limit: int,
    user_id: str | None = None,
    *,
    after: ConversationKey | None = None,
    using: str | None = None,
) -> ConversationPage:
    """Up to ``limit`` conversations newest first (ties: newest row first),
    starting after ``after``; one query whatever the page.

    A conversation updated while a client pages moves to the front, so a
    scan sees every conversation that was not updated during it exactly once.
    """
    validate_limit(limit)
    conversations = _conversations(using, user_id)
    if after is not None:
        conversations = conversations.filter(
            Q(updated_at__lt=after.updated_at) | Q(updated_at=after.updated_at, id__lt=after.id)
        )
    rows = list(
        conversations.order_by("-updated_at", "-id").values_list("id", *SUMMARY_FIELDS)[: limit + 1]
    )
    next_key = None
    if len(rows) > limit:
        last = rows[limit - 1]
        next_key = ConversationKey(
            updated_at=last[SUMMARY_FIELDS.index("updated_at") + 1], id=last[0]
        )
    return ConversationPage(
        items=[summary_from_row(row[1:]) for row in rows[:limit]], next_key=next_key
    )


def find_conversation(
    ref: str, user_id: str | None = None, *, using: str | None = None
) -> FoundConversation | None:
    """The conversation behind ``ref`` (owned by ``user_id`` when given);
    ``None`` for an unknown or malformed ref, without a query for the latter."""
    if not is_wellformed_ref(ref):
        return None
    row = _conversations(using, user_id).filter(ref=ref).values_list("id", *SUMMARY_FIELDS).first()
    if row is None:
        return None
    return FoundConversation(id=row[0], summary=summary_from_row(row[1:]))


def list_message_page(
    conversation_id: int, *, after: int | None = None, limit: int, using: str | None = None
) -> MessagePage:
    """Up to ``limit`` messages with a position above ``after``, in position
    order; one query whatever the page."""
    validate_limit(limit)
    validate_after(after)
    messages = MemoryMessage.objects.using(read_alias(using)).filter(
        conversation_id=conversation_id
    )
    if after is not None:
        messages = messages.filter(position__gt=after)
    rows = list(messages.order_by("position").values_list(*MESSAGE_FIELDS)[: limit + 1])
    return MessagePage(
        items=[message_from_row(row) for row in rows[:limit]], has_more=len(rows) > limit
    )


def list_failed_runs(
    conversation_id: int, *, limit: int, using: str | None = None
) -> list[FailedRunRecord]:
    """The conversation's ``limit`` newest failed runs, newest first."""
    validate_limit(limit)
    rows = (
        FailedRun.objects.using(read_alias(using))
        .filter(conversation_id=conversation_id)
        .order_by("-created_at", "-id")
        .values_list(*FAILED_RUN_FIELDS)[:limit]
    )
    return [failed_run_from_row(row) for row in rows]


def get_conversation_with_messages(
    ref: str, *, using: str | None = None
) -> MemoryConversation | None:
    """One conversation and all its messages in position order (the
    inspector contract; the API and admin page through messages instead)."""
    found = find_conversation(ref, using=using)
    if found is None:
        return None
    messages = (
        MemoryMessage.objects.using(read_alias(using))
        .filter(conversation_id=found.id)
        .order_by("position")
        .values_list(*MESSAGE_FIELDS)
    )
    summary = found.summary
    return MemoryConversation(
        ref=summary.ref,
        session_id=summary.session_id,
        user_id=summary.user_id,
        metadata=summary.metadata,
        created_at=summary.created_at,
        updated_at=summary.updated_at,
        message_count=summary.message_count,
        messages=[message_from_row(row) for row in messages],
    )


def _conversations(using: str | None, user_id: str | None) -> QuerySet[Conversation, Any]:
    conversations = Conversation.objects.using(read_alias(using))
    if user_id is not None:
        conversations = conversations.filter(user_id=user_id)
    return conversations


__all__ = [
    "ConversationKey",
    "ConversationPage",
    "FailedRunRecord",
    "FoundConversation",
    "MessagePage",
    "as_utc",
    "find_conversation",
    "get_conversation_with_messages",
    "is_wellformed_ref",
    "list_conversation_page",
    "list_conversation_summaries",
    "list_failed_runs",
    "list_message_page",
    "validate_after",
    "validate_limit",
]
