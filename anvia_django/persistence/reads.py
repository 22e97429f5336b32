"""Loading a session's transcript for the agent runtime."""

from __future__ import annotations

from functools import partial

from anvia_django.conf import app_settings
from anvia_django.core.memory.types import MemoryContext, Message
from anvia_django.core.memory.validation import validate_context
from anvia_django.core.memory.window import window_start
from anvia_django.models import Conversation, MemoryMessage

from .databases import write_alias
from .reconnect import retry_if_connection_lost
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
    return retry_if_connection_lost(alias, partial(_load, alias, context, limit))


def _load(alias: str, context: MemoryContext, limit: int | None) -> list[Message]:
    row = (
        Conversation.objects.using(alias)
        .filter(session_id=context.session_id)
        .values_list("id", "user_id")
        .first()
    )
    if row is None:
        return []
    conversation_id, owner = row
    check_scope(owner, context.user_id)
    messages = MemoryMessage.objects.using(alias).filter(conversation_id=conversation_id)
    if limit is None:
        return list(messages.order_by("position").values_list("message", flat=True))
    newest = list(messages.order_by("-position").values_list("run_id", "message")[: limit + 1])
    newest.reverse()
    start = window_start([run_id for run_id, _ in newest], limit)
    return [message for _, message in newest[start:]]
