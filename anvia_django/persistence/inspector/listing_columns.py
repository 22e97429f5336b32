"""Columns the admin's lists add to each row, computed in the list's own
query (correlated subqueries and expressions), so a page of 50 rows costs
the same queries as a page of 5.

A preview is read from the start of a message's JSON text, and a list
never reads a message whole where it need not: a plain one's first
characters are cut in SQL; a sealed one opens only whole, so it is fetched
only up to :data:`SEALED_PREVIEW_LIMIT` characters, and a longer one is
shown as such. A message that does not open (tampered, or its key gone)
gives a preview that says so, with its row id and the error's class, and
the list goes on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import (
    Case,
    Exists,
    F,
    OuterRef,
    QuerySet,
    Subquery,
    TextField,
    When,
)
from django.db.models.functions import Length, Substr
from django.db.models.lookups import LessThanOrEqual

from anvia_django.models import Conversation, FailedRun, MemoryMessage
from anvia_django.persistence.codec import codec_for

SEALED_PREVIEW_LIMIT = 64 * 1024
"""Longest stored text (an envelope's characters) of a sealed message that
a list fetches and opens for its preview: 50 rows read 3 MiB at most."""


@dataclass(frozen=True, slots=True)
class PreviewSource:
    """What a list shows a message's preview from."""

    text: str | None
    """The first characters of the message's JSON text; ``None`` for no message."""
    unreadable: str | None = None
    """The class of the error opening the message raised, when it does not open."""
    message_id: int | None = None
    """The message's row id, given with ``unreadable`` and ``sealed_length``."""
    sealed_length: int | None = None
    """The stored length of a sealed message too long to open for a preview."""


def _bounded_text(preview_chars: int, *, sealed: bool) -> Any:
    """The message column as a list fetches it: its first ``preview_chars``
    characters, or (``sealed``) the whole text up to the limit and the
    first characters past it (text written before encryption was on)."""
    head = Substr("message", 1, preview_chars)
    if not sealed:
        return head
    return Case(
        When(LessThanOrEqual(Length("message"), SEALED_PREVIEW_LIMIT), then=F("message")),
        default=head,
        output_field=TextField(),
    )


def with_preview_columns(
    conversations: QuerySet[Conversation], *, preview_chars: int
) -> QuerySet[Conversation]:
    """Annotate ``first_user_message`` (the first ``preview_chars``
    characters of the JSON text of the first user message, or ``None``) and
    ``has_failed_run``.

    Where the codec opens what is stored (an envelope opens only whole), the
    whole text is fetched when it is at most :data:`SEALED_PREVIEW_LIMIT`
    long, with ``first_user_length``, ``first_user_position`` and
    ``first_user_id`` to open it by (:func:`opened_preview_source`)."""
    first_user = MemoryMessage.objects.filter(conversation_id=OuterRef("pk"), role="user").order_by(
        "position"
    )
    failed = Exists(FailedRun.objects.filter(conversation_id=OuterRef("pk")))
    sealed = codec_for(conversations.db).opens
    text = first_user.annotate(head=_bounded_text(preview_chars, sealed=sealed))
    columns = conversations.annotate(
        first_user_message=Subquery(text.values("head")[:1], output_field=TextField()),
        has_failed_run=failed,
    )
    if not sealed:
        return columns
    return columns.annotate(
        first_user_length=Subquery(first_user.annotate(n=Length("message")).values("n")[:1]),
        first_user_position=Subquery(first_user.values("position")[:1]),
        first_user_id=Subquery(first_user.values("id")[:1]),
    )


def opened_preview_source(conversation: Conversation, preview_chars: int) -> PreviewSource:
    """The preview source of the first user message of a conversation
    :func:`with_preview_columns` annotated."""
    text: str | None = getattr(conversation, "first_user_message", None)
    position = getattr(conversation, "first_user_position", None)
    if text is None or position is None:
        return PreviewSource(text)
    return _opened(
        conversation._state.db or "default",
        conversation.pk,
        position,
        getattr(conversation, "first_user_id", None),
        text,
        getattr(conversation, "first_user_length", None),
        preview_chars,
    )


def with_message_preview(
    messages: QuerySet[MemoryMessage], *, preview_chars: int
) -> QuerySet[MemoryMessage]:
    """Messages with ``message`` deferred (a list shows none of them whole)
    and ``preview_text`` annotated as :func:`with_preview_columns` reads a
    first user message (with ``preview_length`` where the codec opens it),
    for :func:`message_preview_source`."""
    sealed = codec_for(messages.db).opens
    messages = messages.defer("message").annotate(
        preview_text=_bounded_text(preview_chars, sealed=sealed)
    )
    return messages.annotate(preview_length=Length("message")) if sealed else messages


def message_preview_source(message: MemoryMessage, preview_chars: int) -> PreviewSource:
    """The preview source of a message :func:`with_message_preview` annotated."""
    text: str | None = getattr(message, "preview_text", None)
    if text is None:
        return PreviewSource(None)
    return _opened(
        message._state.db or "default",
        message.conversation_id,
        message.position,
        message.pk,
        text,
        getattr(message, "preview_length", None),
        preview_chars,
    )


def _opened(
    alias: str,
    conversation_id: int,
    position: int,
    row_id: int | None,
    text: str,
    length: int | None,
    chars: int,
) -> PreviewSource:
    codec = codec_for(alias)
    if length is not None and length > SEALED_PREVIEW_LIMIT:
        if codec.is_sealed(text):
            return PreviewSource(None, message_id=row_id, sealed_length=length)
        return PreviewSource(text[:chars])  # written before encryption was on
    try:
        opened = codec.open_text(conversation_id, position, text)
    except codec.cannot_open as error:
        return PreviewSource(None, unreadable=type(error).__name__, message_id=row_id)
    return PreviewSource(opened[:chars])
