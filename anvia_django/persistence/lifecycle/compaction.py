"""Compaction summaries: planning one, writing it safely, and loading through it.

Two workers may plan the same compaction; the write re-checks, under the
conversation's row lock, that the newest summary is still the one planned
on and that the last folded message is still the same row (a rewind
replaces rows), so only the first writer's summary is kept. The
(conversation, covers_through) constraint backs that up.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from anvia_django import signals
from anvia_django.conf import app_settings
from anvia_django.core.memory.compaction import (
    CompactionPlan,
    SummaryRecord,
    kept_from,
    summary_message,
    summary_text,
    window_after_summary,
)
from anvia_django.core.memory.scope import ConversationScope
from anvia_django.core.memory.types import MemoryContext, Message
from anvia_django.core.memory.validation import validate_context, validate_message
from anvia_django.models import MemoryMessage, MemorySummary
from anvia_django.persistence.codec import codec_for
from anvia_django.persistence.databases import read_alias, write_alias
from anvia_django.persistence.inspector.conversations import validate_limit
from anvia_django.persistence.inspector.rows import as_utc
from anvia_django.persistence.notify import send_after_commit
from anvia_django.persistence.reconnect import (
    retry_if_connection_lost,
    retry_read_if_connection_lost,
)
from anvia_django.persistence.scope import check_scope, find_conversation_id, scope_key
from anvia_django.persistence.transcript.load import load_messages
from anvia_django.persistence.transcript.locking import lock_existing_conversation


@retry_if_connection_lost
def load_through_summary(
    context: MemoryContext,
    *,
    using: str | None = None,
    limit: int | None = None,
    scope: ConversationScope | None = None,
) -> list[Message]:
    """What an agent with compaction loads: the newest summary followed by
    the messages after it, or the plain (windowed) transcript without one.

    One more query than :func:`load_messages`, so only compacting agents
    pay for it.
    """
    validate_context(context, app_settings.input_limits)
    compacted = load_compacted(context, using=using, limit=limit, scope=scope)
    if compacted is not None:
        return compacted
    return load_messages(context, using=using, limit=limit, scope=scope)


def load_compacted(
    context: MemoryContext,
    *,
    using: str | None = None,
    limit: int | None = None,
    scope: ConversationScope | None = None,
) -> list[Message] | None:
    """The newest summary followed by the messages after it, or ``None``
    when the session has no summary (or it is not the caller's: the plain
    load then answers, refusing another user's conversation)."""
    alias = write_alias(using)
    summaries = MemorySummary.objects.using(alias).filter(
        conversation__session_id=context.session_id,
        conversation__scope_key=scope_key(context, scope),
    )
    if context.user_id:
        # Another user's summary never leaves the database.
        summaries = summaries.filter(conversation__user_id=context.user_id)
    newest = (
        summaries.order_by("-covers_through")
        .values_list("conversation_id", "covers_through", "message")
        .first()
    )
    if newest is None:
        return None
    conversation_id, covers_through, summary = newest
    codec = codec_for(alias)
    summary = codec.open_summary(conversation_id, covers_through, summary)
    after_summary = (
        MemoryMessage.objects.using(alias)
        .filter(conversation_id=conversation_id, position__gt=covers_through)
        .order_by("position")
        .values_list("position", "run_id", "message")
    )
    opened = codec.open_rows(conversation_id, after_summary, position=0, message=2)
    tail = [(run_id, message) for _, run_id, message in opened]
    return window_after_summary(summary, tail, limit)


@retry_if_connection_lost
def plan_compaction(
    context: MemoryContext,
    *,
    keep_messages: int,
    keep_tokens: int | None,
    using: str | None = None,
    scope: ConversationScope | None = None,
) -> CompactionPlan | None:
    """What a compaction would fold in now; ``None`` when the part after
    the newest summary already fits the budget."""
    validate_context(context, app_settings.input_limits)
    alias = write_alias(using)
    conversation_id = find_conversation_id(alias, context, scope)
    if conversation_id is None:
        return None
    newest = newest_summary(alias, conversation_id)
    previous_through, previous = newest if newest is not None else (None, None)
    codec = codec_for(alias)
    rows = list(
        MemoryMessage.objects.using(alias)
        .filter(conversation_id=conversation_id, position__gt=_after(previous_through))
        .order_by("position")
        .values_list("pk", "position", "run_id", "message")
    )
    rows = codec.open_rows(conversation_id, rows, position=1, message=3)
    messages = [row[3] for row in rows]
    start = kept_from(
        messages,
        [row[2] for row in rows],
        keep_messages=keep_messages,
        keep_tokens=keep_tokens,
    )
    if start == 0:
        return None
    last_pk, covers_through = rows[start - 1][0], rows[start - 1][1]
    return CompactionPlan(
        context=context,
        previous_summary=summary_text(previous),
        previous_covers_through=previous_through,
        messages=messages[:start],
        covers_through=covers_through,
        anchor=str(last_pk),
    )


@retry_if_connection_lost(idempotent=False)
def write_summary(
    plan: CompactionPlan,
    text: str,
    *,
    using: str | None = None,
    scope: ConversationScope | None = None,
) -> bool:
    """Keep ``text`` as the summary ``plan`` describes; ``False`` (and
    nothing written) when the conversation changed since it was planned."""
    message = summary_message(text)
    validate_message(message, "summary", app_settings.input_limits)
    key = scope_key(plan.context, scope)
    alias = write_alias(using)
    with transaction.atomic(using=alias):
        row = lock_existing_conversation(alias, plan.context.session_id, key)
        if row is None:
            return False
        conversation_id, ref, owner = row
        check_scope(owner, plan.context.user_id)
        summaries = MemorySummary.objects.using(alias).filter(conversation_id=conversation_id)
        if summaries.aggregate(newest=Max("covers_through"))["newest"] != (
            plan.previous_covers_through
        ):
            return False  # another worker compacted first
        unchanged = (
            MemoryMessage.objects.using(alias)
            .filter(
                conversation_id=conversation_id,
                position=plan.covers_through,
                pk=int(plan.anchor),
            )
            .exists()
        )
        if not unchanged:
            return False  # rewound (and perhaps refilled) meanwhile
        stored = codec_for(alias).summary_value(
            (owner, ref, key), conversation_id, plan.covers_through, message
        )
        MemorySummary.objects.using(alias).create(
            conversation_id=conversation_id,
            covers_through=plan.covers_through,
            message=stored,
            created_at=timezone.now(),
        )
        send_after_commit(
            signals.conversation_compacted,
            using=alias,
            session_id=plan.context.session_id,
            ref=ref,
            user_id=owner,
            covers_through=plan.covers_through,
        )
    return True


def list_summaries(
    conversation_id: int, *, limit: int, using: str | None = None
) -> list[SummaryRecord]:
    """The conversation's ``limit`` newest summaries, newest first."""
    return list_summary_page(conversation_id, limit=limit, using=using).items


@dataclass(frozen=True, slots=True)
class SummaryPage:
    items: list[SummaryRecord]
    has_more: bool

    @property
    def next_before(self) -> int | None:
        """Pass as ``before`` for the next page; ``None`` on the last page."""
        return self.items[-1].covers_through if self.has_more and self.items else None


@retry_read_if_connection_lost
def list_summary_page(
    conversation_id: int, *, limit: int, before: int | None = None, using: str | None = None
) -> SummaryPage:
    """The ``limit`` newest summaries covering less than ``before`` (their
    ``covers_through`` is unique in a conversation, so it is the key)."""
    validate_limit(limit)
    alias = read_alias(using)
    summaries = MemorySummary.objects.using(alias).filter(conversation_id=conversation_id)
    if before is not None:
        summaries = summaries.filter(covers_through__lt=before)
    rows = list(
        summaries.order_by("-covers_through").values_list(
            "covers_through", "message", "created_at"
        )[: limit + 1]
    )
    codec = codec_for(alias)
    items = [
        SummaryRecord(k, codec.open_summary(conversation_id, k, message), as_utc(created))
        for k, message, created in rows[:limit]
    ]
    return SummaryPage(items, len(rows) > limit)


def newest_summary(alias: str, conversation_id: int) -> tuple[int, Any] | None:
    """The conversation's newest summary: what it covers through, and its
    message (opened); ``None`` without one."""
    newest = (
        MemorySummary.objects.using(alias)
        .filter(conversation_id=conversation_id)
        .order_by("-covers_through")
        .values_list("covers_through", "message")
        .first()
    )
    if newest is None:
        return None
    covers_through, message = newest
    return covers_through, codec_for(alias).open_summary(conversation_id, covers_through, message)


def _after(covers_through: int | None) -> int:
    return -1 if covers_through is None else covers_through
