"""The message rows of an append, written by the database's dialect.

An append already holds every message encoded as JSON (validation produced
it); the dialect writes those strings through the field, checking first, if
asked, whether they are a retry of what is stored (see :mod:`.dialects`).
"""

from __future__ import annotations

from datetime import datetime

from .dialects import NewMessages, dialect_for


def insert_messages(
    using: str,
    *,
    conversation_id: int,
    first_position: int,
    run_id: str,
    turn: int,
    roles: list[str],
    encoded: list[str],
    now: datetime,
    unless_retry_of: list[str] | None = None,
) -> bool:
    """Insert ``encoded`` (JSON text) at positions from ``first_position``.

    With ``unless_retry_of`` (the messages' JSON text, normally ``encoded``),
    first compare it with the text of the last messages stored for ``run_id``
    and ``turn``: when they are equal the append is a retry and this returns
    ``False``, and the caller must roll the transaction back (on PostgreSQL
    the rows went in by then: the comparison shares the INSERT's statement,
    saving a round trip). Must run while the conversation's row lock is
    held, so the comparison sees every append committed before this one.
    """
    rows = NewMessages(conversation_id, first_position, run_id, turn, roles, encoded, now)
    return dialect_for(using).insert_messages(using, rows, unless_retry_of=unless_retry_of)
