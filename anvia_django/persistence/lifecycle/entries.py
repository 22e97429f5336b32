"""A session's loaded history with each message's stored position."""

from __future__ import annotations

from anvia_django.conf import app_settings
from anvia_django.core.memory.entries import HistoryEntry, StoredRow, windowed_entries
from anvia_django.core.memory.scope import ConversationScope
from anvia_django.core.memory.types import MemoryContext
from anvia_django.core.memory.validation import validate_context
from anvia_django.models import MemoryMessage
from anvia_django.persistence.codec import codec_for
from anvia_django.persistence.databases import write_alias
from anvia_django.persistence.lifecycle.compaction import newest_summary
from anvia_django.persistence.reconnect import retry_if_connection_lost
from anvia_django.persistence.scope import find_conversation_id


@retry_if_connection_lost
def load_entries(
    context: MemoryContext,
    *,
    compacted: bool = False,
    using: str | None = None,
    limit: int | None = None,
    scope: ConversationScope | None = None,
) -> list[HistoryEntry]:
    """What ``load_messages`` (``compacted``: ``load_through_summary``)
    returns, each message with its position; the summary has none.

    Reads the write database, as the loads do. Three short indexed queries
    (conversation, newest summary, messages): this serves "edit a message",
    not every run, so it is not compiled as the loads are.
    """
    validate_context(context, app_settings.input_limits)
    alias = write_alias(using)
    conversation_id = find_conversation_id(alias, context, scope)
    if conversation_id is None:
        return []
    newest = newest_summary(alias, conversation_id) if compacted else None
    summary = None if newest is None else HistoryEntry(None, newest[1], newest[0])
    after = -1 if newest is None else newest[0]
    messages = MemoryMessage.objects.using(alias).filter(
        conversation_id=conversation_id, position__gt=after
    )
    columns = ("position", "run_id", "message")
    if limit is None:
        rows = list(messages.order_by("position").values_list(*columns))
    else:
        # One more than the window, so the run boundary before it is visible.
        rows = list(messages.order_by("-position").values_list(*columns)[: limit + 1])
        rows.reverse()
    rows = codec_for(alias).open_rows(conversation_id, rows, position=0, message=2)
    stored = [StoredRow(position, run_id, message) for position, run_id, message in rows]
    return windowed_entries(stored, limit, summary)
