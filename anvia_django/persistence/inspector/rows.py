"""Turning ``values_list`` rows into the contract's dataclasses.

Reads fetch tuples rather than model instances: no per-row model
construction, and exactly the columns a caller shows.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from anvia_django.core.memory.types import (
    FailedRunRecord,
    MemoryConversationMessage,
    MemoryConversationSummary,
)

SUMMARY_FIELDS = (
    "ref",
    "session_id",
    "user_id",
    "metadata",
    "created_at",
    "updated_at",
    "message_count",
    "scope_key",
)
MESSAGE_FIELDS = ("position", "run_id", "turn", "created_at", "message")
FAILED_RUN_FIELDS = (
    "run_id",
    "error_type",
    "error_message",
    "traceback",
    "messages",
    "created_at",
)


def summary_from_row(row: tuple[Any, ...]) -> MemoryConversationSummary:
    ref, session_id, user_id, metadata, created_at, updated_at, message_count, scope_key = row
    return MemoryConversationSummary(
        ref=ref,
        session_id=session_id,
        user_id=user_id,
        metadata=metadata,
        created_at=as_utc(created_at),
        updated_at=as_utc(updated_at),
        message_count=message_count,
        scope_key=scope_key,
    )


def message_from_row(row: tuple[Any, ...]) -> MemoryConversationMessage:
    position, run_id, turn, created_at, message = row
    return MemoryConversationMessage(
        position=position, run_id=run_id, turn=turn, created_at=as_utc(created_at), message=message
    )


def failed_run_from_row(row: tuple[Any, ...]) -> FailedRunRecord:
    run_id, error_type, error_message, traceback, messages, created_at = row
    return FailedRunRecord(
        run_id=run_id,
        error_type=error_type,
        error_message=error_message,
        traceback=traceback,
        messages=list(messages or []),
        created_at=as_utc(created_at),
    )


def as_utc(moment: datetime) -> datetime:
    """Timezone-aware UTC, also for projects that run with ``USE_TZ = False``."""
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)
