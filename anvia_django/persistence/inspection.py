"""Read-only queries behind the inspector, the API and the admin.

Nothing here writes. Listing is served by the (updated_at, id) indexes;
message counts are the stored ones.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from anvia_django.core.memory.errors import InvalidMemoryInputError
from anvia_django.core.memory.types import (
    MemoryConversation,
    MemoryConversationMessage,
    MemoryConversationSummary,
)
from anvia_django.models import Conversation, MemoryMessage

from .databases import read_alias

_REF_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,32}")

SUMMARY_FIELDS = (
    "ref",
    "session_id",
    "user_id",
    "metadata",
    "created_at",
    "updated_at",
    "message_count",
)
MESSAGE_FIELDS = ("position", "run_id", "turn", "created_at", "message")


def validate_limit(limit: object, *, maximum: int | None = None) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvalidMemoryInputError("must be a positive integer", path="limit")
    if maximum is not None and limit > maximum:
        raise InvalidMemoryInputError(f"must be at most {maximum}", path="limit")
    return limit


def is_wellformed_ref(ref: object) -> bool:
    return isinstance(ref, str) and _REF_PATTERN.fullmatch(ref) is not None


def list_conversation_summaries(
    limit: int, user_id: str | None = None, *, using: str | None = None
) -> list[MemoryConversationSummary]:
    """The ``limit`` most recently updated conversations, newest first."""
    validate_limit(limit)
    conversations = Conversation.objects.using(read_alias(using))
    if user_id is not None:
        conversations = conversations.filter(user_id=user_id)
    rows = conversations.order_by("-updated_at", "-id").values_list(*SUMMARY_FIELDS)[:limit]
    return [summary_from_row(row) for row in rows]


def get_conversation_with_messages(
    ref: str, *, using: str | None = None
) -> MemoryConversation | None:
    """One conversation and all its messages in position order."""
    if not is_wellformed_ref(ref):
        return None
    alias = read_alias(using)
    row = (
        Conversation.objects.using(alias).filter(ref=ref).values_list("id", *SUMMARY_FIELDS).first()
    )
    if row is None:
        return None
    conversation_id, ref, session_id, user_id, metadata, created_at, updated_at, count = row
    messages = (
        MemoryMessage.objects.using(alias)
        .filter(conversation_id=conversation_id)
        .order_by("position")
        .values_list(*MESSAGE_FIELDS)
    )
    return MemoryConversation(
        ref=ref,
        session_id=session_id,
        user_id=user_id,
        metadata=metadata,
        created_at=as_utc(created_at),
        updated_at=as_utc(updated_at),
        message_count=count,
        messages=[message_from_row(message) for message in messages],
    )


def summary_from_row(row: tuple[Any, ...]) -> MemoryConversationSummary:
    ref, session_id, user_id, metadata, created_at, updated_at, message_count = row
    return MemoryConversationSummary(
        ref=ref,
        session_id=session_id,
        user_id=user_id,
        metadata=metadata,
        created_at=as_utc(created_at),
        updated_at=as_utc(updated_at),
        message_count=message_count,
    )


def message_from_row(row: tuple[Any, ...]) -> MemoryConversationMessage:
    position, run_id, turn, created_at, message = row
    return MemoryConversationMessage(
        position=position, run_id=run_id, turn=turn, created_at=as_utc(created_at), message=message
    )


def as_utc(moment: datetime) -> datetime:
    """Timezone-aware UTC, also for projects that run with ``USE_TZ = False``."""
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)
