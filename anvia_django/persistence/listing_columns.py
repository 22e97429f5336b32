"""Columns the admin's conversation list adds to each row, computed in the
list's own query (correlated subqueries), so a page of 50 rows costs the
same queries as a page of 5."""

from __future__ import annotations

from django.db.models import Exists, OuterRef, QuerySet, Subquery, TextField, Value
from django.db.models.functions import Substr

from anvia_django.encryption import encryption_enabled
from anvia_django.models import Conversation, FailedRun, MemoryMessage


def with_preview_columns(
    conversations: QuerySet[Conversation], *, preview_chars: int
) -> QuerySet[Conversation]:
    """Annotate ``first_user_message`` (the first ``preview_chars``
    characters of the JSON text of the first user message, or ``None``) and
    ``has_failed_run``."""
    if encryption_enabled():
        # The column holds ciphertext: no preview (the transcript opens it).
        return conversations.annotate(
            first_user_message=Value(None, output_field=TextField()),
            has_failed_run=Exists(FailedRun.objects.filter(conversation_id=OuterRef("pk"))),
        )
    first_user = (
        MemoryMessage.objects.filter(conversation_id=OuterRef("pk"), role="user")
        .order_by("position")
        .annotate(head=Substr("message", 1, preview_chars))
        .values("head")[:1]
    )
    return conversations.annotate(
        first_user_message=Subquery(first_user, output_field=TextField()),
        has_failed_run=Exists(FailedRun.objects.filter(conversation_id=OuterRef("pk"))),
    )
