"""Columns the admin's conversation list adds to each row, computed in the
list's own query (correlated subqueries), so a page of 50 rows costs the
same queries as a page of 5."""

from __future__ import annotations

from django.db.models import Exists, OuterRef, QuerySet, Subquery, TextField
from django.db.models.functions import Substr

from anvia_django.models import Conversation, FailedRun, MemoryMessage
from anvia_django.persistence.codec import codec_for


def with_preview_columns(
    conversations: QuerySet[Conversation], *, preview_chars: int
) -> QuerySet[Conversation]:
    """Annotate ``first_user_message`` (the first ``preview_chars``
    characters of the JSON text of the first user message, or ``None``) and
    ``has_failed_run``.

    Where the codec opens what is stored (an envelope opens only whole), the
    whole text is fetched, with ``first_user_position`` to open it by
    (:func:`opened_preview_source`)."""
    first_user = MemoryMessage.objects.filter(conversation_id=OuterRef("pk"), role="user").order_by(
        "position"
    )
    failed = Exists(FailedRun.objects.filter(conversation_id=OuterRef("pk")))
    if codec_for(conversations.db).opens:
        return conversations.annotate(
            first_user_message=Subquery(first_user.values("message")[:1], TextField()),
            first_user_position=Subquery(first_user.values("position")[:1]),
            has_failed_run=failed,
        )
    head = first_user.annotate(head=Substr("message", 1, preview_chars)).values("head")[:1]
    return conversations.annotate(
        first_user_message=Subquery(head, output_field=TextField()), has_failed_run=failed
    )


def opened_preview_source(conversation: Conversation, preview_chars: int) -> str | None:
    """The first ``preview_chars`` characters of the first user message's
    JSON text of a conversation :func:`with_preview_columns` annotated."""
    text: str | None = getattr(conversation, "first_user_message", None)
    position = getattr(conversation, "first_user_position", None)
    if text is None or position is None:
        return text
    codec = codec_for(conversation._state.db or "default")
    return codec.open_text(conversation.pk, position, text)[:preview_chars]
