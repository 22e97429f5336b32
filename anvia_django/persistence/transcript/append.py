"""Appending to a transcript: one transaction (or, on PostgreSQL with the
plain codec, one statement), validated before anything is written;
``messages_appended`` goes out once it has committed."""

from __future__ import annotations

from functools import partial
from typing import Any

from django.db import DatabaseError, connections, transaction
from django.utils import timezone

from anvia_django import signals
from anvia_django.conf import app_settings
from anvia_django.core.memory.scope import ConversationScope
from anvia_django.core.memory.types import MemoryAppendInput
from anvia_django.core.memory.validation import validate_append
from anvia_django.models import MemoryMessage
from anvia_django.persistence.codec import Codec, codec_for
from anvia_django.persistence.databases import write_alias
from anvia_django.persistence.dialects import AppendRequest, LockedConversation, dialect_for
from anvia_django.persistence.notify import send_after_commit
from anvia_django.persistence.reconnect import retry_if_connection_lost
from anvia_django.persistence.scope import scope_key
from anvia_django.persistence.transcript import unconfirmed


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
    then runs each of its appends alone, see ``threads/group_commit.py``).

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
