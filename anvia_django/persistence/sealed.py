"""Appends with encryption at rest on (``ANVIA_DJANGO["ENCRYPTION"]``).

Always the append in steps, inside the caller's ``transaction.atomic``:

1. lock (or create) the conversation and reserve the positions, as every
   dialect does; check the scope;
2. fetch the data key of the conversation's owner (its user, else the
   conversation), creating it on first use. A key that does not unwrap
   raises here, naming its id: the transaction rolls back, nothing written;
3. seal each message, with its data key id, conversation id and position
   (known under the lock) as associated data;
4. the retried-append check (SPEC invariant 7): the newest messages stored
   for the run and turn, opened, compared as text with the new ones, then
   the insert of the envelopes. The database cannot compare ciphertexts
   (each has a random nonce), so PostgreSQL's one-statement append function
   is not used; there the tail is read by the INSERT's own statement, as
   its dialect does for appends in steps.
"""

from __future__ import annotations

from functools import lru_cache

from django.db import connections

from anvia_django.encryption.keys import (
    data_key_for,
    open_column_text,
    owner_of,
    seal_messages,
)
from anvia_django.models import MemoryMessage

from .dialects import (
    AppendRequest,
    LockedConversation,
    NewMessages,
    PostgreSQLDialect,
    dialect_for,
)
from .dialects.statements import _quoted


def append_sealed_under_lock(alias: str, append: AppendRequest) -> LockedConversation | None:
    """The append in steps with sealed messages; ``None``: a retry (the
    caller rolls back: the positions were reserved, and on PostgreSQL the
    rows written)."""
    dialect = dialect_for(alias)
    count = len(append.encoded)
    conversation = dialect.lock_for_append(alias, append)
    key_id, cipher = data_key_for(alias, owner_of(conversation.user_id, conversation.ref))
    could_be_retry = conversation.could_hold(count)
    in_one_statement = could_be_retry and isinstance(dialect, PostgreSQLDialect)
    if (
        could_be_retry
        and not in_one_statement
        and _stored_tail(alias, conversation.id, append) == append.encoded
    ):
        return None
    sealed = seal_messages(
        cipher, key_id, conversation.id, conversation.first_position, append.encoded
    )
    rows = NewMessages(
        conversation.id,
        conversation.first_position,
        append.run_id,
        append.turn,
        append.roles,
        sealed,
        conversation.updated_at,
    )
    if in_one_statement:
        assert isinstance(dialect, PostgreSQLDialect)
        if not _insert_unless_retry(alias, dialect, rows, append.encoded):
            return None
    else:
        dialect.insert_messages(alias, rows, unless_retry_of=None)
    return conversation


def _stored_tail(alias: str, conversation_id: int, append: AppendRequest) -> list[str]:
    """The JSON text of the newest messages stored for the append's run and
    turn (as many as it has), in position order, opened."""
    connection = connections[alias]
    with connection.cursor() as cursor:
        cursor.execute(
            _located_tail_sql(alias),
            [conversation_id, append.run_id, append.turn, len(append.encoded)],
        )
        stored = list(cursor.fetchall())
    stored.reverse()
    return [open_column_text(alias, conversation_id, p, text) for p, text in stored]


def _insert_unless_retry(
    alias: str, dialect: PostgreSQLDialect, rows: NewMessages, encoded: list[str]
) -> bool:
    """PostgreSQL: read the tail and insert in one statement (one round trip
    fewer), as :meth:`PostgreSQLDialect.insert_messages` does: the tail is
    read from the statement's snapshot, taken after the row lock was granted,
    and the INSERT's own rows are invisible to it. ``False``: a retry, whose
    rows the caller must roll back."""
    connection = connections[alias]
    first, *rest = dialect._inserts(connection, rows)
    with connection.cursor() as cursor:
        cursor.execute(
            f"WITH tail AS ({_located_tail_sql(alias)}), written AS ({first[0]}) "
            "SELECT * FROM tail",
            [rows.conversation_id, rows.run_id, rows.turn, len(encoded), *first[1]],
        )
        stored = list(cursor.fetchall())
        stored.reverse()
        opened = [open_column_text(alias, rows.conversation_id, p, text) for p, text in stored]
        if opened == encoded:
            return False
        for sql, params in rest:
            cursor.execute(sql, params)
    return True


@lru_cache(maxsize=16)
def _located_tail_sql(using: str) -> str:
    """The newest messages of a run and turn with their positions, newest
    first: the column's text as stored, an envelope or a plain message."""
    table, c = _quoted(using, MemoryMessage)
    return (
        f"SELECT {c['position']}, {c['message']} FROM {table} WHERE {c['conversation']} = %s "
        f"AND {c['run_id']} = %s AND {c['turn']} = %s ORDER BY {c['position']} DESC LIMIT %s"
    )
