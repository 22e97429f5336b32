"""Columns the admin's lists add to each row, computed in the list's own
query (correlated subqueries and expressions), so a page of 50 rows costs
the same queries as a page of 5.

A preview is read from the start of a message's JSON text. A message that
does not open (tampered, or its key gone) gives a preview that says so,
with the message's row id and the error's class, and the list goes on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Exists, ExpressionWrapper, F, OuterRef, QuerySet, Subquery, TextField
from django.db.models.functions import Substr

from anvia_django.models import Conversation, FailedRun, MemoryMessage
from anvia_django.persistence.codec import codec_for


@dataclass(frozen=True, slots=True)
class PreviewSource:
    """What a list shows a message's preview from."""

    text: str | None
    """The first characters of the message's JSON text; ``None`` for no message."""
    unreadable: str | None = None
    """The class of the error opening the message raised, when it does not open."""
    message_id: int | None = None
    """The message's row id, given with ``unreadable``."""


def with_preview_columns(
    conversations: QuerySet[Conversation], *, preview_chars: int
) -> QuerySet[Conversation]:
    """Annotate ``first_user_message`` (the first ``preview_chars``
    characters of the JSON text of the first user message, or ``None``) and
    ``has_failed_run``.

    Where the codec opens what is stored (an envelope opens only whole), the
    whole text is fetched, with ``first_user_position`` and ``first_user_id``
    to open it by (:func:`opened_preview_source`)."""
    first_user = MemoryMessage.objects.filter(conversation_id=OuterRef("pk"), role="user").order_by(
        "position"
    )
    failed = Exists(FailedRun.objects.filter(conversation_id=OuterRef("pk")))
    if codec_for(conversations.db).opens:
        return conversations.annotate(
            first_user_message=Subquery(first_user.values("message")[:1], TextField()),
            first_user_position=Subquery(first_user.values("position")[:1]),
            first_user_id=Subquery(first_user.values("id")[:1]),
            has_failed_run=failed,
        )
    head = first_user.annotate(head=Substr("message", 1, preview_chars)).values("head")[:1]
    return conversations.annotate(
        first_user_message=Subquery(head, output_field=TextField()), has_failed_run=failed
    )


def opened_preview_source(conversation: Conversation, preview_chars: int) -> PreviewSource:
    """The preview source of the first user message of a conversation
    :func:`with_preview_columns` annotated."""
    text: str | None = getattr(conversation, "first_user_message", None)
    position = getattr(conversation, "first_user_position", None)
    if text is None or position is None:
        return PreviewSource(text)
    row_id = getattr(conversation, "first_user_id", None)
    alias = conversation._state.db or "default"
    return _opened(alias, conversation.pk, position, row_id, text, preview_chars)


def with_message_preview(
    messages: QuerySet[MemoryMessage], *, preview_chars: int
) -> QuerySet[MemoryMessage]:
    """Messages with ``message`` deferred (a list shows none of them whole)
    and ``preview_text`` annotated: the first ``preview_chars`` characters
    of the JSON text, or the whole stored text where the codec opens it
    (:func:`message_preview_source`)."""
    text: Any
    if codec_for(messages.db).opens:
        text = ExpressionWrapper(F("message"), output_field=TextField())
    else:
        text = Substr("message", 1, preview_chars)
    return messages.defer("message").annotate(preview_text=text)


def message_preview_source(message: MemoryMessage, preview_chars: int) -> PreviewSource:
    """The preview source of a message :func:`with_message_preview` annotated."""
    text: str | None = getattr(message, "preview_text", None)
    if text is None:
        return PreviewSource(None)
    alias = message._state.db or "default"
    return _opened(
        alias, message.conversation_id, message.position, message.pk, text, preview_chars
    )


def _opened(
    alias: str, conversation_id: int, position: int, row_id: int | None, text: str, chars: int
) -> PreviewSource:
    codec = codec_for(alias)
    try:
        opened = codec.open_text(conversation_id, position, text)
    except codec.cannot_open as error:
        return PreviewSource(None, unreadable=type(error).__name__, message_id=row_id)
    return PreviewSource(opened[:chars])
