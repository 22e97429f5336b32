"""Rewinding a conversation: removing its messages from a position onwards.

The removal takes the highest positions only, so positions stay gap-free,
and ``message_count`` becomes exactly the position rewound to. Summaries
that covered any removed message go with it (they summarise history that
no longer exists).
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from anvia_django import signals
from anvia_django.conf import app_settings
from anvia_django.core.memory.branches import check_position_within, validate_position
from anvia_django.core.memory.scope import ConversationScope
from anvia_django.core.memory.types import MemoryContext
from anvia_django.core.memory.validation import validate_context
from anvia_django.models import Conversation, MemoryMessage, MemorySummary
from anvia_django.persistence.databases import write_alias
from anvia_django.persistence.notify import send_after_commit
from anvia_django.persistence.reconnect import retry_if_connection_lost
from anvia_django.persistence.scope import check_scope, scope_key
from anvia_django.persistence.transcript.locking import lock_existing_conversation


@retry_if_connection_lost(idempotent=False)
def rewind_conversation(
    context: MemoryContext,
    to_position: int,
    *,
    using: str | None = None,
    scope: ConversationScope | None = None,
) -> int:
    """Remove the session's messages at ``to_position`` and after; return how many went.

    ``to_position`` is 0 (remove everything, keep the conversation) up to
    the message count (remove nothing, write nothing); beyond that it is an
    :class:`InvalidMemoryInputError` naming ``to_position``.

    Run again on a lost connection only when none of its statements got an
    answer: a rewind that committed before the connection died, retried
    after a new append, would remove that append.
    """
    validate_context(context, app_settings.input_limits)
    validate_position(to_position, "to_position")
    key = scope_key(context, scope)
    alias = write_alias(using)
    with transaction.atomic(using=alias):
        row = lock_existing_conversation(alias, context.session_id, key)
        if row is None:
            check_position_within(to_position, 0, "to_position")
            return 0
        conversation_id, ref, owner = row
        check_scope(owner, context.user_id)
        conversations = Conversation.objects.using(alias).filter(pk=conversation_id)
        count, updated_at = conversations.values_list("message_count", "updated_at").get()
        check_position_within(to_position, count, "to_position")
        if to_position == count:
            return 0
        removed, _ = (
            MemoryMessage.objects.using(alias)
            .filter(conversation_id=conversation_id, position__gte=to_position)
            .delete()
        )
        MemorySummary.objects.using(alias).filter(
            conversation_id=conversation_id, covers_through__gte=to_position
        ).delete()
        conversations.update(message_count=to_position, updated_at=max(timezone.now(), updated_at))
        send_after_commit(
            signals.messages_rewound,
            using=alias,
            session_id=context.session_id,
            ref=ref,
            user_id=owner,
            to_position=to_position,
            removed=removed,
        )
    return removed
