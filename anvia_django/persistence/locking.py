"""Creating and locking a conversation row, in one statement where possible.

Every write to a conversation first takes its row lock here and reserves the
positions it will fill. Concurrent writers to one session therefore queue on
that row, so positions come out gap-free and unique across processes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import cast

from django.db import IntegrityError, connections, transaction
from django.db.models import F

from anvia_django.core.memory.types import JsonObject
from anvia_django.models import Conversation, new_ref

from . import statements


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


def lock_conversation(
    using: str,
    *,
    session_id: str,
    user_id: str | None,
    metadata: JsonObject | None,
    now: datetime,
    reserve: int,
) -> LockedConversation:
    """Create or lock the session's row and reserve ``reserve`` positions.

    Must run inside ``transaction.atomic(using=using)``; the lock and the
    reservation last until that transaction ends.
    """
    connection = connections[using]
    if (
        connection.vendor in ("postgresql", "sqlite")
        and connection.features.can_return_columns_from_insert
    ):
        return _upsert(using, session_id, user_id, metadata, now, reserve)
    return _select_for_update(using, session_id, user_id, metadata, now, reserve)


def _upsert(
    using: str,
    session_id: str,
    user_id: str | None,
    metadata: JsonObject | None,
    now: datetime,
    reserve: int,
) -> LockedConversation:
    # INSERT ... ON CONFLICT DO UPDATE takes the row lock (PostgreSQL) or runs
    # under the database write lock (SQLite) and returns the new count, so
    # creating, locking and reserving cost one round trip.
    connection = connections[using]
    meta = Conversation._meta
    # created_at and updated_at are alike DateTimeFields: one conversion serves both.
    stamp = meta.get_field("updated_at").get_db_prep_save(now, connection)
    params = [
        new_ref(),
        session_id,
        user_id,
        meta.get_field("metadata").get_db_prep_save(metadata, connection),
        stamp,
        stamp,
        reserve,
    ]
    spec = statements.columns(using, Conversation, _RETURNED)
    ((conversation_id, ref, owner, count, updated_at),) = statements.fetch(
        using, _upsert_sql(using), params, spec
    )
    return LockedConversation(conversation_id, ref, owner, count - reserve, updated_at)


def _select_for_update(
    using: str,
    session_id: str,
    user_id: str | None,
    metadata: JsonObject | None,
    now: datetime,
    reserve: int,
) -> LockedConversation:
    # Portable fallback for backends without INSERT ... RETURNING upserts.
    conversations = Conversation.objects.using(using)
    row = conversations.select_for_update().filter(session_id=session_id).first()
    if row is None:
        try:
            with transaction.atomic(using=using):
                row = conversations.create(
                    session_id=session_id,
                    user_id=user_id,
                    metadata=metadata,
                    created_at=now,
                    updated_at=now,
                    message_count=0,
                )
        except IntegrityError:
            # Another writer created it first; its commit released the row.
            row = conversations.select_for_update().get(session_id=session_id)
    updated_at = max(now, row.updated_at)
    changes: dict[str, object] = {
        "updated_at": updated_at,
        "message_count": F("message_count") + reserve,
    }
    if metadata is not None:
        changes["metadata"] = metadata
    conversations.filter(pk=row.pk).update(**changes)
    return LockedConversation(row.pk, row.ref, row.user_id, row.message_count, updated_at)


def lock_existing_conversation(using: str, session_id: str) -> tuple[int, str, str | None] | None:
    """Lock the session's row if it exists: ``(id, ref, user_id)``, else ``None``.

    Unlike :func:`lock_conversation` this never creates a conversation, for
    writes that only remove. Must run inside ``transaction.atomic(using=using)``.
    """
    return (
        Conversation.objects.using(using)
        .select_for_update()
        .filter(session_id=session_id)
        .values_list("id", "ref", "user_id")
        .first()
    )


_RETURNED = ("id", "ref", "user_id", "message_count", "updated_at")


@lru_cache(maxsize=16)
def _upsert_sql(using: str) -> str:
    quote = connections[using].ops.quote_name
    meta = Conversation._meta
    table = quote(meta.db_table)
    columns = {field.name: quote(cast(str, field.column)) for field in meta.concrete_fields}
    return (
        f"INSERT INTO {table} ({columns['ref']}, {columns['session_id']}, {columns['user_id']}, "
        f"{columns['metadata']}, {columns['created_at']}, {columns['updated_at']}, "
        f"{columns['message_count']}) VALUES (%s, %s, %s, %s, %s, %s, %s) "
        f"ON CONFLICT ({columns['session_id']}) DO UPDATE SET "
        # Never backwards: a writer that read the clock, then queued on the
        # lock behind a later one, must not move the conversation back in time.
        f"{columns['updated_at']} = CASE WHEN EXCLUDED.{columns['updated_at']} > "
        f"{table}.{columns['updated_at']} THEN EXCLUDED.{columns['updated_at']} "
        f"ELSE {table}.{columns['updated_at']} END, "
        f"{columns['message_count']} = {table}.{columns['message_count']} "
        f"+ EXCLUDED.{columns['message_count']}, "
        f"{columns['metadata']} = COALESCE(EXCLUDED.{columns['metadata']}, "
        f"{table}.{columns['metadata']}) "
        f"RETURNING {', '.join(columns[name] for name in _RETURNED)}"
    )
