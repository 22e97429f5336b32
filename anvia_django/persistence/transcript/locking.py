"""Creating and locking a conversation row, in one statement where possible.

Every write to a conversation first takes its row lock here and reserves the
positions it will fill. Concurrent writers to one session therefore queue on
that row, so positions come out gap-free and unique across processes. How
the lock is taken depends on the database: see :mod:`.dialects`.
"""

from __future__ import annotations

from datetime import datetime

from anvia_django.core.memory.types import JsonObject
from anvia_django.models import Conversation
from anvia_django.persistence.dialects import LockedConversation, dialect_for

__all__ = ["LockedConversation", "lock_conversation", "lock_existing_conversation"]


def lock_conversation(
    using: str,
    *,
    session_id: str,
    scope_key: str,
    user_id: str | None,
    metadata: JsonObject | None,
    now: datetime,
    reserve: int,
) -> LockedConversation:
    """Create or lock the conversation of ``(session_id, scope_key)`` and
    reserve ``reserve`` positions.

    Must run inside ``transaction.atomic(using=using)``; the lock and the
    reservation last until that transaction ends.
    """
    return dialect_for(using).lock_conversation(
        using,
        session_id=session_id,
        scope_key=scope_key,
        user_id=user_id,
        metadata=metadata,
        now=now,
        reserve=reserve,
    )


def lock_existing_conversation(
    using: str, session_id: str, scope_key: str
) -> tuple[int, str, str | None] | None:
    """Lock the conversation's row if it exists: ``(id, ref, user_id)``, else ``None``.

    Unlike :func:`lock_conversation` this never creates a conversation, for
    writes that only remove. Must run inside ``transaction.atomic(using=using)``.
    """
    return (
        Conversation.objects.using(using)
        .select_for_update()
        .filter(session_id=session_id, scope_key=scope_key)
        .values_list("id", "ref", "user_id")
        .first()
    )
