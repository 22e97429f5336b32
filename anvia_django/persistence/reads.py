"""Loading a session's transcript for the agent runtime."""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any, cast

from django.db import connections

from anvia_django.conf import app_settings
from anvia_django.core.memory.errors import InvalidMemoryInputError
from anvia_django.core.memory.types import MemoryContext, Message
from anvia_django.core.memory.validation import validate_context
from anvia_django.core.memory.window import window_start
from anvia_django.models import Conversation, MemoryMessage

from .databases import write_alias
from .reconnect import retry_if_connection_lost
from .scope import check_scope


@retry_if_connection_lost
def load_messages(
    context: MemoryContext, *, using: str | None = None, limit: int | None = None
) -> list[Message]:
    """The session's messages in position order; the newest run-aligned
    window of at most ``limit`` messages when ``limit`` is given.

    Reads from the write database: an agent must see its own last turn,
    which a lagging replica might not have yet.
    """
    rows = _fetch(context, using, limit + 1 if limit is not None else None)
    if limit is None:
        return [json.loads(message) for _, message in rows]
    rows.reverse()
    start = window_start([run_id for run_id, _ in rows], limit)
    return [json.loads(message) for _, message in rows[start:]]


@retry_if_connection_lost
def load_latest_messages(
    context: MemoryContext, count: int, *, using: str | None = None
) -> list[Message]:
    """The session's newest ``count`` messages in position order, cut exactly
    at ``count`` (not aligned to runs): what framework sessions mean by a
    history limit. ``count`` 0 gives an empty list.
    """
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise InvalidMemoryInputError("must be a non-negative integer", path="limit")
    rows = _fetch(context, using, count) if count else []
    return [json.loads(message) for _, message in reversed(rows)]


def _fetch(context: MemoryContext, using: str | None, newest: int | None) -> list[Any]:
    """``(run_id, message JSON)`` rows in position order, or the ``newest``
    rows newest first; refuses another user's conversation."""
    validate_context(context, app_settings.input_limits)
    alias = write_alias(using)
    # One query: the conversation's owner on every row, its messages joined
    # only when the caller may read them, so another user's messages never
    # leave the database. A conversation without (readable) messages still
    # yields one row, with a NULL message.
    params: list[Any] = [not context.user_id, context.user_id, context.session_id]
    if newest is not None:
        params.append(newest)
    with connections[alias].cursor() as cursor:
        cursor.execute(_load_sql(alias, windowed=newest is not None), params)
        rows = cursor.fetchall()
    if not rows:
        return []
    check_scope(rows[0][0], context.user_id)
    if rows[0][2] is None:
        return []
    return [(run_id, message) for _, run_id, message in rows]


@lru_cache(maxsize=16)
def _load_sql(using: str, *, windowed: bool) -> str:
    quote = connections[using].ops.quote_name
    conversation = Conversation._meta
    message = MemoryMessage._meta

    def column(meta: Any, name: str) -> str:
        return quote(cast(str, meta.get_field(name).column))

    sql = (
        f"SELECT c.{column(conversation, 'user_id')}, m.{column(message, 'run_id')},"
        f" m.{column(message, 'message')}"
        f" FROM {quote(conversation.db_table)} c LEFT JOIN {quote(message.db_table)} m"
        f" ON m.{column(message, 'conversation')} = c.{column(conversation, 'id')}"
        f" AND (%s OR c.{column(conversation, 'user_id')} = %s)"
        f" WHERE c.{column(conversation, 'session_id')} = %s"
        f" ORDER BY m.{column(message, 'position')}"
    )
    return sql + " DESC LIMIT %s" if windowed else sql
