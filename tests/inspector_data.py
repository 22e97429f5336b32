"""Rows for the inspector tests, created in bulk.

Volume fixtures write the models directly (one INSERT per table) so a
10,000-row test takes seconds; the store's own write path is tested in
test_store.py, and the small fixtures here go through it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from anvia_django.models import Conversation, MemoryMessage

EPOCH = datetime(2025, 1, 1, tzinfo=UTC)


def make_conversations(
    count: int,
    *,
    user_id: str | None = None,
    prefix: str = "s",
    start: datetime = EPOCH,
    step: timedelta = timedelta(seconds=1),
) -> list[Conversation]:
    """``count`` conversations, each updated ``step`` after the previous one
    (a zero step gives them all the same ``updated_at``)."""
    rows = [
        Conversation(
            session_id=f"{prefix}-{index}",
            user_id=user_id,
            metadata={"index": index},
            created_at=start + step * index,
            updated_at=start + step * index,
            message_count=0,
        )
        for index in range(count)
    ]
    Conversation.objects.bulk_create(rows)
    return list(Conversation.objects.filter(session_id__startswith=f"{prefix}-").order_by("id"))


def make_messages(conversation: Conversation, count: int, *, run_id: str = "run-1") -> None:
    """``count`` alternating user/assistant messages at positions 0..count-1."""
    now = conversation.updated_at
    MemoryMessage.objects.bulk_create(
        MemoryMessage(
            conversation=conversation,
            position=position,
            run_id=run_id,
            turn=1 + position // 2,
            role="user" if position % 2 == 0 else "assistant",
            message=message_at(position),
            created_at=now,
        )
        for position in range(count)
    )
    Conversation.objects.filter(pk=conversation.pk).update(message_count=count)
    conversation.refresh_from_db()


def message_at(position: int) -> dict[str, Any]:
    role = "user" if position % 2 == 0 else "assistant"
    return {"role": role, "content": f"message number {position}"}
