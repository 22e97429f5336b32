"""Every write to memory: append, pop the last message, clear, record a failed run.

Each function is one transaction: it validates first, then either does all
of its work or none of it. Signals go out only after the commit.
"""

from __future__ import annotations

from datetime import datetime
from functools import partial
from typing import Any

from django.db import DatabaseError, connections, transaction
from django.db.models import F
from django.utils import timezone

from anvia_django import signals
from anvia_django.conf import app_settings
from anvia_django.core.memory.bounded_records import bound_record
from anvia_django.core.memory.errors import describe_error
from anvia_django.core.memory.scope import ConversationScope
from anvia_django.core.memory.types import (
    MemoryAppendInput,
    MemoryContext,
    MemoryErrorInput,
    Message,
)
from anvia_django.core.memory.validation import (
    validate_append,
    validate_context,
    validate_error_input,
)
from anvia_django.models import Conversation, FailedRun, MemoryMessage
from anvia_django.persistence.codec import Codec, codec_for
from anvia_django.persistence.databases import write_alias
from anvia_django.persistence.dialects import (
    AppendRequest,
    ConversationLock,
    LockedConversation,
    dialect_for,
)
from anvia_django.persistence.notify import send_after_commit
from anvia_django.persistence.reconnect import retry_if_connection_lost
from anvia_django.persistence.scope import check_scope, scope_key
from anvia_django.persistence.transcript import unconfirmed
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


class _AlreadyStored(Exception):
    """Rolls back a retried append's reservation; never leaves this module."""


@retry_if_connection_lost
def append_messages(
    input: MemoryAppendInput,
    scope: ConversationScope | None = None,
    *,
    using: str | None = None,
    savepoint: bool = True,
) -> None:
    """Append messages to a session's transcript, creating it on first use.

    A retried append (same ``run_id``, ``turn`` and messages as the ones
    stored last for that run and turn) writes nothing. ``savepoint=False``
    inside the caller's transaction: an append that fails, or finds a retry,
    dooms that transaction instead of rolling back alone (a group commit
    then runs each of its appends alone, see :mod:`.groups`).

    A ``DatabaseError`` other than bad input's (an ``OperationalError``
    or ``InterfaceError`` above all: a lost connection) may come after the
    database committed: the append may be stored. Calling again with the
    same input is safe: it writes nothing if the first call was stored, and
    its ``messages_appended`` then goes out once (:mod:`.unconfirmed`).
    """
    append = validated_append(input, scope)
    if append is None:
        return
    append_validated(write_alias(using), input, append, savepoint=savepoint)


def append_validated(
    alias: str, input: MemoryAppendInput, append: AppendRequest, *, savepoint: bool = True
) -> None:
    """:func:`append_messages` once ``input`` is validated as ``append``."""
    codec = codec_for(alias)
    conversation = _append_in_one_statement(alias, append, codec)
    if conversation is None:
        _append_in_steps(alias, input, append, codec, savepoint)
    else:
        announce_append(alias, input, append, conversation)


def validated_append(
    input: MemoryAppendInput, scope: ConversationScope | None = None
) -> AppendRequest | None:
    """``input`` checked and encoded for the database; ``None``: nothing to append."""
    encoded = validate_append(input, app_settings.input_limits)
    context = input.context
    key = scope_key(context, scope)
    if not input.messages:
        return None
    return AppendRequest(
        session_id=context.session_id,
        scope_key=key,
        user_id=context.user_id,
        metadata=context.metadata,
        run_id=input.run_id,
        turn=input.turn,
        roles=[message["role"] for message in input.messages],
        encoded=encoded,
        now=timezone.now(),
    )


def appended_signal(input: MemoryAppendInput, conversation: LockedConversation) -> dict[str, Any]:
    """The arguments of ``messages_appended`` for a committed append."""
    return {
        "session_id": input.context.session_id,
        "ref": conversation.ref,
        "user_id": conversation.user_id,
        "run_id": input.run_id,
        "turn": input.turn,
        "first_position": conversation.first_position,
        "messages": input.messages,
    }


def announce_append(
    alias: str, input: MemoryAppendInput, append: AppendRequest, conversation: LockedConversation
) -> None:
    """Once the transaction that wrote ``append`` commits: its signal, and
    any earlier attempt of it whose outcome was unknown forgotten."""
    if unconfirmed.any_remembered():
        transaction.on_commit(partial(unconfirmed.settle, alias, append), using=alias)
    send_after_commit(
        signals.messages_appended, using=alias, **appended_signal(input, conversation)
    )


def _append_in_one_statement(
    alias: str, append: AppendRequest, codec: Codec
) -> LockedConversation | None:
    own_transaction = not connections[alias].in_atomic_block
    try:
        return dialect_for(alias).append_in_one_statement(alias, append, codec)
    except DatabaseError:
        if own_transaction:
            # In autocommit the statement was the transaction: its answer
            # may be what was lost.
            unconfirmed.remember(alias, append)
        raise


def _append_in_steps(
    alias: str, input: MemoryAppendInput, append: AppendRequest, codec: Codec, savepoint: bool
) -> None:
    own_transaction = not connections[alias].in_atomic_block
    committing = False
    try:
        with transaction.atomic(using=alias, savepoint=savepoint):
            conversation = dialect_for(alias).append_under_lock(alias, append, codec)
            if conversation is None:
                raise _AlreadyStored  # rolls back the reservation
            committing = own_transaction
    except _AlreadyStored:
        _signal_if_owed(alias, input, append)
        return
    except DatabaseError:
        if committing:  # the COMMIT failed: it may have reached the database
            unconfirmed.remember(alias, append)
        raise
    announce_append(alias, input, append, conversation)


def _signal_if_owed(alias: str, input: MemoryAppendInput, append: AppendRequest) -> None:
    """A retry found ``append`` stored: signal it if an attempt of it whose
    outcome this process could not see stored it (see :mod:`.unconfirmed`)."""
    if not unconfirmed.remembered(alias, append):
        return
    connection = connections[alias]
    if connection.in_atomic_block and connection.needs_rollback:
        return  # a group's doomed transaction: its appends run again alone
    stored = list(
        MemoryMessage.objects.using(alias)
        .filter(
            conversation__session_id=append.session_id,
            conversation__scope_key=append.scope_key,
            run_id=append.run_id,
            turn=append.turn,
        )
        .order_by("-position")
        .values_list("position", "created_at", "conversation__ref", "conversation__user_id")[
            : len(append.encoded)
        ]
    )
    if not stored or not unconfirmed.claim(alias, append, stored[0][1]):
        return
    send_after_commit(
        signals.messages_appended,
        using=alias,
        session_id=append.session_id,
        ref=stored[0][2],
        user_id=stored[0][3],
        run_id=append.run_id,
        turn=append.turn,
        first_position=stored[-1][0],
        messages=input.messages,
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
        owner = (conversation.user_id, conversation.ref)
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
