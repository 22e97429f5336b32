"""Creating and locking a conversation row, in one statement where possible.

Every write to a conversation first takes its row lock here and reserves the
positions it will fill. Concurrent writers to one session therefore queue on
that row, so positions come out gap-free and unique across processes. How
the lock is taken depends on the database: see :mod:`.dialects`.
"""

from __future__ import annotations

from anvia_django.models import Conversation
from anvia_django.persistence.dialects import ConversationLock, LockedConversation, dialect_for


def lock_conversation(using: str, lock: ConversationLock) -> LockedConversation:
    """Create or lock the conversation of ``lock``'s key and reserve its
    positions.

    Must run inside ``transaction.atomic(using=using)``; the lock and the
    reservation last until that transaction ends.
    """
    return dialect_for(using).lock_conversation(using, lock)


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
