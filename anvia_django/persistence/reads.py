"""Loading a session's transcript for the agent runtime and the integrations."""

from __future__ import annotations

from django.db.models import QuerySet

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
    """
    messages = _messages_of(context, using)
    if messages is None:
        return []
    if limit is None:
        return list(messages.order_by("position").values_list("message", flat=True))
    newest = list(messages.order_by("-position").values_list("run_id", "message")[: limit + 1])
    newest.reverse()
    start = window_start([run_id for run_id, _ in newest], limit)
    return [message for _, message in newest[start:]]


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
    messages = _messages_of(context, using)
    if messages is None or count == 0:
        return []
    newest = list(messages.order_by("-position").values_list("message", flat=True)[:count])
    newest.reverse()
    return newest


def _messages_of(context: MemoryContext, using: str | None) -> QuerySet[MemoryMessage] | None:
    # Reads from the write database: an agent must see its own last turn,
    # which a lagging replica might not have yet.
    validate_context(context, app_settings.input_limits)
    alias = write_alias(using)
    row = (
        Conversation.objects.using(alias)
        .filter(session_id=context.session_id)
        .values_list("id", "user_id")
        .first()
    )
    if row is None:
        return None
    conversation_id, owner = row
    check_scope(owner, context.user_id)
    return MemoryMessage.objects.using(alias).filter(conversation_id=conversation_id)
