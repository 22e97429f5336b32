"""The other writes to a transcript: pop the last message, clear, record a failed run.

Each function is one transaction: it validates first, then either does all
of its work or none of it. Signals go out only after the commit.
"""

from __future__ import annotations

from datetime import datetime

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from anvia_django import signals
from anvia_django.conf import app_settings
from anvia_django.core.memory.bounded_records import bound_record
from anvia_django.core.memory.errors import describe_error
from anvia_django.core.memory.scope import ConversationScope
from anvia_django.core.memory.types import (
    MemoryContext,
    MemoryErrorInput,
    Message,
)
from anvia_django.core.memory.validation import (
    validate_context,
    validate_error_input,
)
from anvia_django.models import Conversation, FailedRun, MemoryMessage
from anvia_django.persistence.codec import codec_for
from anvia_django.persistence.databases import write_alias
from anvia_django.persistence.dialects import (
    ConversationLock,
    LockedConversation,
    dialect_for,
)
from anvia_django.persistence.notify import send_after_commit
from anvia_django.persistence.reconnect import retry_if_connection_lost
from anvia_django.persistence.scope import check_scope, scope_key
from anvia_django.persistence.transcript.deletion import (
    ROW_FIELDS,
    ConversationRow,
    DeletionCounts,
    delete_conversations,
)
from anvia_django.persistence.transcript.locking import (
    lock_conversation,
    lock_existing_conversation,
)


@retry_if_connection_lost(idempotent=False)
def pop_last_message(
    context: MemoryContext, *, using: str | None = None, scope: ConversationScope | None = None
) -> Message | None:
    """Remove the session's newest message and return it; ``None`` if there is none.

    Removes the highest position, so positions stay gap-free, and keeps
    ``message_count`` exact. The conversation stays, also when it is left empty.
    """
    validate_context(context, app_settings.input_limits)
    key = scope_key(context, scope)
    alias = write_alias(using)
    with transaction.atomic(using=alias):
        row = lock_existing_conversation(alias, context.session_id, key)
        if row is None:
            return None
        conversation_id, ref, owner = row
        check_scope(owner, context.user_id)
        messages = MemoryMessage.objects.using(alias).filter(conversation_id=conversation_id)
        last = messages.order_by("-position").values_list("pk", "position", "message").first()
        if last is None:
            return None
        pk, position = last[0], last[1]
        message: Message = codec_for(alias).open_message(conversation_id, position, last[2])
        messages.filter(pk=pk).delete()
        Conversation.objects.using(alias).filter(pk=conversation_id).update(
            message_count=F("message_count") - 1, updated_at=timezone.now()
        )
        send_after_commit(
            signals.message_popped,
            using=alias,
            session_id=context.session_id,
            ref=ref,
            user_id=owner,
            position=position,
            message=message,
        )
    return message


@retry_if_connection_lost
def clear_conversation(
    context: MemoryContext, *, using: str | None = None, scope: ConversationScope | None = None
) -> DeletionCounts:
    """Delete the session's conversation, messages and failed runs.

    Returns what was deleted; an unknown session deletes nothing.
    """
    validate_context(context, app_settings.input_limits)
    key = scope_key(context, scope)
    alias = write_alias(using)
    with transaction.atomic(using=alias):
        values = (
            Conversation.objects.using(alias)
            .select_for_update()
            .filter(session_id=context.session_id, scope_key=key)
            .values_list(*ROW_FIELDS)
            .first()
        )
        if values is None:
            return DeletionCounts()
        row = ConversationRow(*values)
        check_scope(row.user_id, context.user_id)
        return delete_conversations(alias, [row])


@retry_if_connection_lost
def record_failed_run(
    input: MemoryErrorInput, *, using: str | None = None, scope: ConversationScope | None = None
) -> None:
    """Keep a failed run's error and partial messages, outside the transcript."""
    encoded = validate_error_input(input, app_settings.input_limits)
    key = scope_key(input.context, scope)
    alias = write_alias(using)
    limit = dialect_for(alias).record_limit
    error = describe_error(input.error)
    if limit.bytes is not None:
        error, encoded = bound_record(error, encoded, limit.bytes)
    with transaction.atomic(using=alias):
        now = timezone.now()
        conversation = _lock(alias, input.context, key, now, reserve=0)
        owner = (conversation.user_id, conversation.ref, key)
        payload = codec_for(alias).failed_run_columns(
            owner, conversation.id, input.run_id, error, encoded, limit
        )
        FailedRun.objects.using(alias).create(
            conversation_id=conversation.id,
            run_id=input.run_id,
            error_type=error.type,
            created_at=conversation.updated_at,
            **payload,
        )
        send_after_commit(
            signals.run_failed,
            using=alias,
            session_id=input.context.session_id,
            ref=conversation.ref,
            user_id=conversation.user_id,
            run_id=input.run_id,
            error_type=error.type,
        )


def _lock(
    alias: str, context: MemoryContext, key: str, now: datetime, *, reserve: int
) -> LockedConversation:
    lock = ConversationLock(
        context.session_id, key, context.user_id, context.metadata, now, reserve
    )
    conversation = lock_conversation(alias, lock)
    # Raising here rolls back the reservation (and a row created just now,
    # which cannot happen for a mismatch: a new row takes the caller's user).
    check_scope(conversation.user_id, context.user_id)
    return conversation
