"""What every dialect shares: an append's data, and the ORM dialect that
any database Django supports gets (:class:`Dialect`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import IntegrityError, connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import F, Model, TextField
from django.db.models.functions import Cast

from anvia_django.core.memory.types import JsonObject
from anvia_django.fields import EncodedJSON
from anvia_django.models import Conversation, MemoryMessage
from anvia_django.persistence.scope import check_scope


@dataclass(frozen=True, slots=True)
class LockedConversation:
    id: int
    ref: str
    user_id: str | None
    first_position: int
    """The position of the first of the reserved messages."""
    updated_at: datetime
    """The conversation's new ``updated_at``: never earlier than the one before,
    so the messages written under this lock are stamped in position order even
    when this writer read the clock before another's commit."""

    def could_hold(self, count: int) -> bool:
        """Whether ``count`` messages appended now could be stored already (a
        retry): not in a new conversation, nor in one shorter than that."""
        return self.first_position >= count


@dataclass(frozen=True, slots=True)
class NewMessages:
    """The rows of one append, messages already encoded as JSON text."""

    conversation_id: int
    first_position: int
    run_id: str
    turn: int
    roles: list[str]
    encoded: list[str]
    created_at: datetime


@dataclass(frozen=True, slots=True)
class AppendRequest:
    """One validated append, messages already encoded as JSON text."""

    session_id: str
    scope_key: str
    user_id: str | None
    metadata: JsonObject | None
    run_id: str
    turn: int
    roles: list[str]
    encoded: list[str]
    now: datetime


# How often a first append looks for its conversation and tries to create it
# when other writers create it and clears delete it in between.
CREATE_ATTEMPTS = 5


class Dialect:
    """Any database Django supports: the ORM, with ``select_for_update``.

    Correct wherever a failed INSERT releases its locks with its savepoint
    (PostgreSQL does): creating a new session may otherwise deadlock when
    several first appends race.
    """

    def lock_conversation(
        self,
        using: str,
        *,
        session_id: str,
        scope_key: str,
        user_id: str | None,
        metadata: JsonObject | None,
        now: datetime,
        reserve: int,
    ) -> LockedConversation:
        conversations = Conversation.objects.using(using)
        found = conversations.select_for_update().filter(session_id=session_id, scope_key=scope_key)
        for attempt in range(CREATE_ATTEMPTS):
            row = found.first()
            if row is not None:
                break
            try:
                with transaction.atomic(using=using):
                    row = conversations.create(
                        session_id=session_id,
                        scope_key=scope_key,
                        user_id=user_id,
                        metadata=metadata,
                        created_at=now,
                        updated_at=now,
                        message_count=0,
                    )
                break
            except IntegrityError:
                # Another writer created it first and its commit released the
                # row, which a clear may delete again before we lock it: look
                # again, a bounded number of times (an IntegrityError that is
                # not this race must still reach the caller).
                if attempt == CREATE_ATTEMPTS - 1:
                    raise
        assert row is not None
        updated_at = max(now, row.updated_at)
        changes: dict[str, object] = {
            "updated_at": updated_at,
            "message_count": F("message_count") + reserve,
        }
        if metadata is not None:
            changes["metadata"] = metadata
        conversations.filter(pk=row.pk).update(**changes)
        return LockedConversation(row.pk, row.ref, row.user_id, row.message_count, updated_at)

    def append_in_one_statement(
        self, using: str, append: AppendRequest
    ) -> LockedConversation | None:
        """Do the whole append (create or lock, scope check, retry check,
        reserve, insert) in one statement, where the dialect has one;
        ``None`` means nothing was written and the caller must take the row
        lock and append in steps."""
        return None

    def append_under_lock(self, using: str, append: AppendRequest) -> LockedConversation | None:
        """The append in steps, inside the caller's ``transaction.atomic``:
        create or lock the conversation and reserve positions, check the
        scope (raising ``ConversationScopeError``), check for a retry,
        insert. ``None``: a retry, nothing to write; the caller must roll
        back (the positions were reserved)."""
        count = len(append.encoded)
        conversation = self.lock_for_append(using, append)
        rows = NewMessages(
            conversation.id,
            conversation.first_position,
            append.run_id,
            append.turn,
            append.roles,
            append.encoded,
            conversation.updated_at,
        )
        retry_of = append.encoded if conversation.could_hold(count) else None
        if not self.insert_messages(using, rows, unless_retry_of=retry_of):
            return None
        return conversation

    def lock_for_append(self, using: str, append: AppendRequest) -> LockedConversation:
        """Create or lock ``append``'s conversation, reserve its positions and
        check the scope (raising ``ConversationScopeError``): the first step of
        every append in steps, inside the caller's ``transaction.atomic``."""
        conversation = self.lock_conversation(
            using,
            session_id=append.session_id,
            scope_key=append.scope_key,
            user_id=append.user_id,
            metadata=append.metadata,
            now=append.now,
            reserve=len(append.encoded),
        )
        # A new row takes the caller's user: a mismatch is an existing row.
        check_scope(conversation.user_id, append.user_id)
        return conversation

    def appends_in_one_statement(self, using: str) -> bool:
        """Whether :meth:`append_group` can run a group of appends on ``using``."""
        return False

    def append_group(
        self, using: str, appends: Sequence[AppendRequest]
    ) -> list[LockedConversation | None]:
        """Run ``appends`` in one statement (in autocommit, its own
        transaction), in order: each one's conversation, or ``None`` where it
        wrote nothing (the caller then appends it in steps). Raises the
        database's error, having written nothing."""
        raise NotImplementedError

    def insert_messages(
        self, using: str, rows: NewMessages, *, unless_retry_of: list[str] | None
    ) -> bool:
        """Insert ``rows``; with ``unless_retry_of``, first compare it with the
        text of the last messages stored for the run and turn, and write
        nothing (returning ``False``) when they are equal.

        ``False`` means the caller must roll the transaction back: a dialect
        may have written the rows in the statement that compared them.
        Runs under the conversation's row lock, so the comparison sees every
        append committed before this one.
        """
        if unless_retry_of is not None:
            stored = (
                MemoryMessage.objects.using(using)
                .filter(conversation_id=rows.conversation_id, run_id=rows.run_id, turn=rows.turn)
                # The column's value, not the decoded message (see _as_stored).
                .annotate(text=Cast("message", output_field=TextField()))
                .order_by("-position")
                .values_list("text", flat=True)[: len(unless_retry_of)]
            )
            if _in_position_order(list(stored)) == _as_stored(connections[using], unless_retry_of):
                return False
        MemoryMessage.objects.using(using).bulk_create(
            [
                MemoryMessage(
                    conversation_id=rows.conversation_id,
                    position=rows.first_position + offset,
                    run_id=rows.run_id,
                    turn=rows.turn,
                    role=role,
                    message=EncodedJSON(message),
                    created_at=rows.created_at,
                )
                for offset, (role, message) in enumerate(zip(rows.roles, rows.encoded, strict=True))
            ]
        )
        return True

    def estimated_row_count(self, using: str, model: type[Model]) -> int | None:
        """The planner's idea of ``model``'s row count, ``None`` if it has none."""
        return None


def _in_position_order(newest_first: list[str]) -> list[str]:
    newest_first.reverse()
    return newest_first


def _as_stored(connection: BaseDatabaseWrapper, encoded: list[str]) -> list[Any]:
    """``encoded`` as the message column holds it: what the field makes of it.

    A retry is recognised by comparing column values, not decoded messages:
    in Python ``True == 1 == 1.0`` would call different messages equal.
    """
    encode = MemoryMessage._meta.get_field("message").get_db_prep_save
    return [encode(EncodedJSON(message), connection) for message in encoded]
