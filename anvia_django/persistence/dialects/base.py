"""What every dialect shares: an append's data, and the ORM dialect that
any database Django supports gets (:class:`Dialect`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from django.db import IntegrityError, connections, transaction
from django.db.models import F, Model, TextField
from django.db.models.functions import Cast

from anvia_django.core.memory.bounded_records import UNBOUNDED, RecordLimit
from anvia_django.core.memory.types import JsonObject
from anvia_django.fields import EncodedJSON
from anvia_django.models import Conversation, MemoryMessage
from anvia_django.persistence.codec import Codec
from anvia_django.persistence.retry_check import is_retry
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
class ConversationLock:
    """What creating or locking a conversation row needs: its key, who
    creates it and with what metadata, when, and how many positions to reserve."""

    session_id: str
    scope_key: str
    user_id: str | None
    metadata: JsonObject | None
    now: datetime
    reserve: int = 0


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

    def lock(self) -> ConversationLock:
        """The lock of its conversation, reserving a position per message."""
        return ConversationLock(
            self.session_id,
            self.scope_key,
            self.user_id,
            self.metadata,
            self.now,
            len(self.encoded),
        )


# How often a first append looks for its conversation and tries to create it
# when other writers create it and clears delete it in between.
CREATE_ATTEMPTS = 5


class Dialect:
    """Any database Django supports: the ORM, with ``select_for_update``.

    Correct wherever a failed INSERT releases its locks with its savepoint
    (PostgreSQL does): creating a new session may otherwise deadlock when
    several first appends race.
    """

    record_limit: RecordLimit = UNBOUNDED
    """How big one failed-run record may be in its INSERT."""

    def lock_conversation(self, using: str, lock: ConversationLock) -> LockedConversation:
        conversations = Conversation.objects.using(using)
        found = conversations.select_for_update().filter(
            session_id=lock.session_id, scope_key=lock.scope_key
        )
        for attempt in range(CREATE_ATTEMPTS):
            row = found.first()
            if row is not None:
                break
            try:
                with transaction.atomic(using=using):
                    row = conversations.create(
                        session_id=lock.session_id,
                        scope_key=lock.scope_key,
                        user_id=lock.user_id,
                        metadata=lock.metadata,
                        created_at=lock.now,
                        updated_at=lock.now,
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
        updated_at = max(lock.now, row.updated_at)
        changes: dict[str, object] = {
            "updated_at": updated_at,
            "message_count": F("message_count") + lock.reserve,
        }
        if lock.metadata is not None:
            changes["metadata"] = lock.metadata
        conversations.filter(pk=row.pk).update(**changes)
        return LockedConversation(row.pk, row.ref, row.user_id, row.message_count, updated_at)

    def append_in_one_statement(
        self, using: str, append: AppendRequest, codec: Codec
    ) -> LockedConversation | None:
        """Do the whole append (create or lock, scope check, retry check,
        reserve, insert) in one statement, where the dialect has one;
        ``None`` means nothing was written and the caller must take the row
        lock and append in steps."""
        return None

    def append_under_lock(
        self, using: str, append: AppendRequest, codec: Codec
    ) -> LockedConversation | None:
        """The append in steps, inside the caller's ``transaction.atomic``:
        create or lock the conversation and reserve positions, check the
        scope (raising ``ConversationScopeError``), store the messages as
        ``codec`` does, check for a retry, insert. ``None``: a retry,
        nothing to write; the caller must roll back (the positions were
        reserved, and a dialect may have written the rows already)."""
        conversation = self.lock_for_append(using, append)
        owner = (conversation.user_id, conversation.ref, append.scope_key)
        first = conversation.first_position
        rows = NewMessages(
            conversation.id,
            first,
            append.run_id,
            append.turn,
            append.roles,
            codec.seal_messages(owner, conversation.id, first, append.encoded),
            conversation.updated_at,
        )
        retry_of = append.encoded if conversation.could_hold(len(append.encoded)) else None
        if not self.insert_messages(using, rows, retry_of=retry_of, codec=codec):
            return None
        return conversation

    def lock_for_append(self, using: str, append: AppendRequest) -> LockedConversation:
        """Create or lock ``append``'s conversation, reserve its positions and
        check the scope (raising ``ConversationScopeError``): the first step of
        every append in steps, inside the caller's ``transaction.atomic``."""
        conversation = self.lock_conversation(using, append.lock())
        # A new row takes the caller's user: a mismatch is an existing row.
        check_scope(conversation.user_id, append.user_id)
        return conversation

    def appends_in_one_statement(self, using: str, codec: Codec) -> bool:
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
        self, using: str, rows: NewMessages, *, retry_of: list[str] | None, codec: Codec
    ) -> bool:
        """Insert ``rows``; with ``retry_of`` (the append's JSON texts), first
        read the last messages stored for the run and turn, and write nothing
        (returning ``False``) when they are a retry of it (:func:`is_retry`).

        ``False`` means the caller must roll the transaction back: a dialect
        may have written the rows in the statement that read the tail.
        Runs under the conversation's row lock, so the tail holds every
        append committed before this one.
        """
        if retry_of is not None:
            tail = self.stored_tail(using, rows, len(retry_of))
            if is_retry(codec, rows.conversation_id, tail, retry_of):
                return False
        self.insert(using, rows)
        return True

    def stored_tail(self, using: str, rows: NewMessages, count: int) -> list[tuple[int, str]]:
        """The newest ``count`` messages stored for the run and turn of
        ``rows``, newest first: their positions and column texts."""
        return list(
            MemoryMessage.objects.using(using)
            .filter(conversation_id=rows.conversation_id, run_id=rows.run_id, turn=rows.turn)
            # The column's text, not the decoded message (see retry_check).
            .annotate(text=Cast("message", output_field=TextField()))
            .order_by("-position")
            .values_list("position", "text")[:count]
        )

    def insert(self, using: str, rows: NewMessages) -> None:
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

    def wait_for_writes_in_flight(self, using: str) -> None:
        """Return once every transaction that wrote to the conversation
        table on ``using`` before this call has committed or rolled back.

        ``--reencrypt`` waits so before it destroys a retired data key: a
        writer fetches its key after it has written its conversation row, so
        one that fetched a key before the key was retired is inside such a
        transaction, and once they have all ended the last sweep sees what
        they sealed. A conversation such a writer is creating is not visible
        to lock until it commits, hence a wait on the table. Writers that
        begin meanwhile queue behind it for a moment, as behind any lock.

        SQL's standard form (PostgreSQL's): SHARE conflicts with the ROW
        EXCLUSIVE lock every writer of the table holds until it ends.
        """
        connection = connections[using]
        table = connection.ops.quote_name(Conversation._meta.db_table)
        with transaction.atomic(using=using), connection.cursor() as cursor:
            cursor.execute(f"LOCK TABLE {table} IN SHARE MODE")

    def estimated_row_count(self, using: str, model: type[Model]) -> int | None:
        """The planner's idea of ``model``'s row count, ``None`` if it has none."""
        return None

    def compact(self, using: str, models: Sequence[type[Model]]) -> list[str]:
        """Reclaim what deleted and replaced rows of ``models``' tables (and
        their search index) leave in the live database, as far as can be done
        now: the statements still to run, for the operator (printed by the
        commands). Erasure and re-encryption ask it; what they destroyed is
        already unreadable (its key is gone), this clears the leftovers.

        Any other database: nothing known to run."""
        return []
