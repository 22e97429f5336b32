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

When step 4 reads the tail anyway and the key table is on the same
database, step 2 is not a statement of its own: the key this process last
read for the owner (:func:`~anvia_django.encryption.keys.remembered_key`)
seals the messages, and the tail's statement confirms that key's row still
holds that wrapped form, read after the lock like step 2's query. On
PostgreSQL the INSERT in that statement writes only if it does. When it
does not (rotated, re-encrypted or erased since), nothing was written under
it: the key is read again, the messages sealed again and inserted.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from django.db import connections

from anvia_django.encryption.keys import (
    data_key_row_for,
    forget_remembered_key,
    key_check_sql,
    open_column_text,
    owner_of,
    remembered_key,
    seal_messages,
)
from anvia_django.models import MemoryMessage

from .dialects import (
    AppendRequest,
    Dialect,
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
    conversation = dialect.lock_for_append(alias, append)
    owner = owner_of(conversation.user_id, conversation.ref)
    guess = remembered_key(alias, owner) if conversation.could_hold(len(append.encoded)) else None
    if guess is None:
        return _append_with_key_read(alias, dialect, append, conversation, owner)
    key = _Key(*guess)
    rows = _sealed_rows(append, conversation, key)
    if isinstance(dialect, PostgreSQLDialect):
        tail, confirmed = _insert_unless_retry(alias, dialect, rows, append.encoded, key)
        if tail == append.encoded:
            return None
        if confirmed:
            return conversation
    else:
        tail, confirmed = _stored_tail(alias, conversation.id, append, key)
        if tail == append.encoded:
            return None
        if confirmed:
            dialect.insert_messages(alias, rows, unless_retry_of=None)
            return conversation
    # The remembered key is not the owner's any more: nothing was written
    # under it, and the tail it came with was compared already.
    forget_remembered_key(alias, owner)
    key = _Key(*data_key_row_for(alias, owner))
    dialect.insert_messages(alias, _sealed_rows(append, conversation, key), unless_retry_of=None)
    return conversation


@dataclass(frozen=True, slots=True)
class _Key:
    id: int
    wrapped: str
    cipher: AESGCM


def _append_with_key_read(
    alias: str,
    dialect: Dialect,
    append: AppendRequest,
    conversation: LockedConversation,
    owner: str,
) -> LockedConversation | None:
    """Steps 2 to 4 with the owner's key read by a query of its own."""
    key = _Key(*data_key_row_for(alias, owner))
    could_be_retry = conversation.could_hold(len(append.encoded))
    in_one_statement = could_be_retry and isinstance(dialect, PostgreSQLDialect)
    if (
        could_be_retry
        and not in_one_statement
        and _stored_tail(alias, conversation.id, append, None)[0] == append.encoded
    ):
        return None
    rows = _sealed_rows(append, conversation, key)
    if in_one_statement:
        assert isinstance(dialect, PostgreSQLDialect)
        tail, _ = _insert_unless_retry(alias, dialect, rows, append.encoded, None)
        if tail == append.encoded:
            return None
    else:
        dialect.insert_messages(alias, rows, unless_retry_of=None)
    return conversation


def _sealed_rows(append: AppendRequest, conversation: LockedConversation, key: _Key) -> NewMessages:
    sealed = seal_messages(
        key.cipher, key.id, conversation.id, conversation.first_position, append.encoded
    )
    return NewMessages(
        conversation.id,
        conversation.first_position,
        append.run_id,
        append.turn,
        append.roles,
        sealed,
        conversation.updated_at,
    )


def _stored_tail(
    alias: str, conversation_id: int, append: AppendRequest, key: _Key | None
) -> tuple[list[str], bool]:
    """The JSON text of the newest messages stored for the append's run and
    turn (as many as it has), in position order, opened; and, with ``key``,
    whether its row still holds its wrapped form (read in the same query)."""
    sql = _located_tail_sql(alias)
    params: list[Any] = [conversation_id, append.run_id, append.turn, len(append.encoded)]
    if key is not None:
        sql = _tail_with_key_check_sql(alias)
        params += [key.id, key.wrapped]
    with connections[alias].cursor() as cursor:
        cursor.execute(sql, params)
        stored = list(cursor.fetchall())
    return _opened_tail(alias, conversation_id, stored), key is None or _confirmed(stored)


def _insert_unless_retry(
    alias: str,
    dialect: PostgreSQLDialect,
    rows: NewMessages,
    encoded: list[str],
    key: _Key | None,
) -> tuple[list[str], bool]:
    """PostgreSQL: read the tail and insert in one statement (one round trip
    fewer), as :meth:`PostgreSQLDialect.insert_messages` does: the tail is
    read from the statement's snapshot, taken after the row lock was granted,
    and the INSERT's own rows are invisible to it. With ``key``, the INSERT
    writes only if that key's row still holds its wrapped form. Returns the
    tail, opened, and whether the rows were written; a tail equal to
    ``encoded`` is a retry, whose rows the caller must roll back."""
    connection = connections[alias]
    first, *rest = dialect._inserts(connection, rows)
    insert_sql, insert_params = first
    params = [rows.conversation_id, rows.run_id, rows.turn, len(encoded), *insert_params]
    if key is None:
        tail_sql = _located_tail_sql(alias)
        sql = f"WITH tail AS ({tail_sql}), written AS ({insert_sql}) SELECT * FROM tail"
    else:
        # The key check's CTE comes first: its parameters too.
        sql = _tail_insert_with_key_check_sql(alias, insert_sql)
        params = [key.id, key.wrapped, *params]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        stored = list(cursor.fetchall())
        opened = _opened_tail(alias, rows.conversation_id, stored)
        written = key is None or _confirmed(stored)
        if written and opened != encoded:
            for more_sql, more_params in rest:
                cursor.execute(more_sql, more_params)
    return opened, written


def _opened_tail(alias: str, conversation_id: int, stored: list[tuple[Any, ...]]) -> list[str]:
    """The stored tail's messages, opened, in position order (the key
    check's row, whose position is NULL, left out)."""
    located = sorted(row for row in stored if row[0] is not None)
    return [open_column_text(alias, conversation_id, p, text) for p, text in located]


def _confirmed(stored: list[tuple[Any, ...]]) -> bool:
    """Whether the key check's statement found the key as remembered (it
    adds a row of NULLs when not)."""
    return all(row[0] is not None for row in stored)


@lru_cache(maxsize=16)
def _located_tail_sql(using: str) -> str:
    """The newest messages of a run and turn with their positions, newest
    first: the column's text as stored, an envelope or a plain message."""
    table, c = _quoted(using, MemoryMessage)
    return (
        f"SELECT {c['position']}, {c['message']} FROM {table} WHERE {c['conversation']} = %s "
        f"AND {c['run_id']} = %s AND {c['turn']} = %s ORDER BY {c['position']} DESC LIMIT %s"
    )


@lru_cache(maxsize=16)
def _tail_with_key_check_sql(using: str) -> str:
    """The located tail, and a row of NULLs if the key check fails; the
    derived tables are written so that SQLite, MariaDB and PostgreSQL all
    take them (MariaDB wants a FROM before a WHERE)."""
    return (
        f"SELECT * FROM ({_located_tail_sql(using)}) AS tail "
        "UNION ALL SELECT NULL, NULL FROM (SELECT 1 AS one) AS one "
        f"WHERE NOT {key_check_sql(using)}"
    )


@lru_cache(maxsize=64)
def _tail_insert_with_key_check_sql(using: str, insert_sql: str) -> str:
    """PostgreSQL: the located tail and the INSERT of ``insert_sql`` (one
    multi-row ``VALUES``) in one statement, the INSERT only if the key check
    holds; a row of NULLs reports that it did not."""
    head, values = insert_sql.split(" VALUES ", 1)
    return (
        f"WITH checked AS (SELECT {key_check_sql(using)} AS holds), "
        f"tail AS ({_located_tail_sql(using)}), "
        f"written AS ({head} SELECT * FROM (VALUES {values}) AS v "
        "WHERE (SELECT holds FROM checked)) "
        "SELECT * FROM tail UNION ALL SELECT NULL, NULL FROM checked WHERE NOT holds"
    )
