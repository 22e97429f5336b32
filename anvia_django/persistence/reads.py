"""Loading a session's transcript for the agent runtime."""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any, cast

from django.db import connections

from anvia_django.conf import app_settings
from anvia_django.core.memory.types import MemoryContext, Message
from anvia_django.core.memory.validation import validate_context
from anvia_django.core.memory.window import window_start
from anvia_django.models import Conversation, MemoryMessage

from .databases import write_alias
from .scope import check_scope


def load_messages(
    context: MemoryContext, *, using: str | None = None, limit: int | None = None
) -> list[Message]:
    """The session's messages in position order; the newest run-aligned
    window of at most ``limit`` messages when ``limit`` is given.

    Reads from the write database: an agent must see its own last turn,
    which a lagging replica might not have yet.
    """
    validate_context(context, app_settings.input_limits)
    alias = write_alias(using)
    # One query: the conversation's owner on every row, its messages joined
    # only when the caller may read them, so another user's messages never
    # leave the database. A conversation without (readable) messages still
    # yields one row, with a NULL message.
    params: list[Any] = [not context.user_id, context.user_id, context.session_id]
    if limit is not None:
        params.append(limit + 1)
    with connections[alias].cursor() as cursor:
        cursor.execute(_load_sql(alias, windowed=limit is not None), params)
        rows = cursor.fetchall()
    if not rows:
        return []
    check_scope(rows[0][0], context.user_id)
    if rows[0][2] is None:
        return []
    if limit is None:
        return [json.loads(message) for _, _, message in rows]
    rows.reverse()
    start = window_start([run_id for _, run_id, _ in rows], limit)
    return [json.loads(message) for _, _, message in rows[start:]]


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
