"""Rows whose stored value does not open, shown as such.

One altered byte in one sealed message, or a message of an erased owner
restored from a backup, must not take down every page that lists it: the
inspector's reads open row by row and give such a row its place, its row
id and the class of the error, never any of its content. The store's own
reads (``load``) keep raising: an agent must not run on a transcript with
a hole in it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import ExpressionWrapper, F, QuerySet, TextField

from anvia_django.core.memory.types import MemoryConversationMessage
from anvia_django.core.memory.validation import loads
from anvia_django.models import FailedRun, MemoryMessage, MemorySummary
from anvia_django.persistence.codec import Codec, codec_for
from anvia_django.persistence.databases import read_alias
from anvia_django.persistence.inspector.rows import as_utc, message_from_row


@dataclass(frozen=True, slots=True)
class UnreadableMessage:
    """A stored message that does not open."""

    id: int | None
    """The message's row id (its admin page); ``None`` if it went meanwhile."""
    position: int
    run_id: str
    turn: int
    created_at: datetime
    error_type: str
    """The class of the error opening it raised (``DecryptionError``)."""


class UnreadableRecordError(Exception):
    """A read that shows whole records met one that does not open. Names
    the record and the error's class, never content."""

    def __init__(self, record: str, row_id: int | None, position: int, error_type: str) -> None:
        self.record = record
        self.row_id = row_id
        self.position = position
        self.error_type = error_type
        super().__init__(f"{record} {row_id} (position {position}) cannot be opened: {error_type}")

    @classmethod
    def of(cls, message: UnreadableMessage) -> UnreadableRecordError:
        return cls("message", message.id, message.position, message.error_type)


def opened_messages(
    codec: Codec, alias: str, conversation_id: int, rows: Sequence[Sequence[Any]]
) -> list[MemoryConversationMessage | UnreadableMessage]:
    """``rows`` of ``MESSAGE_FIELDS`` opened one by one; a row that does not
    open is an :class:`UnreadableMessage` (its row id: one more query, only
    then)."""
    messages: dict[int, Any] = {}
    errors: dict[int, str] = {}
    for position, _, _, _, value in rows:
        try:
            messages[position] = codec.open_message(conversation_id, position, value)
        except codec.cannot_open as error:
            errors[position] = type(error).__name__
    ids = _row_ids(alias, conversation_id, list(errors)) if errors else {}
    return [
        UnreadableMessage(
            ids.get(position), position, run_id, turn, as_utc(created), errors[position]
        )
        if position in errors
        else message_from_row((position, run_id, turn, created, messages[position]))
        for position, run_id, turn, created, _ in rows
    ]


def all_readable(
    items: list[MemoryConversationMessage | UnreadableMessage],
) -> list[MemoryConversationMessage]:
    """``items``; raises :class:`UnreadableRecordError` naming the first that
    does not open (a read that answers whole records or nothing)."""
    readable = []
    for item in items:
        if isinstance(item, UnreadableMessage):
            raise UnreadableRecordError.of(item)
        readable.append(item)
    return readable


def opened_record_message(message: MemoryMessage) -> Any:
    """The message of a row loaded with its ``message`` deferred (the
    admin's record page), opened; an :class:`UnreadableMessage` when it does
    not open. One query."""
    alias = message._state.db or "default"
    value = (
        MemoryMessage.objects.using(alias)
        .filter(pk=message.pk)
        .values_list("message", flat=True)
        .first()
    )
    codec = codec_for(alias)
    try:
        return codec.open_message(message.conversation_id, message.position, value)
    except codec.cannot_open as error:
        return UnreadableMessage(
            message.pk,
            message.position,
            message.run_id,
            message.turn,
            as_utc(message.created_at),
            type(error).__name__,
        )


@dataclass(frozen=True, slots=True)
class UnreadableSummary:
    """A stored compaction summary that does not open."""

    id: int
    covers_through: int
    error_type: str


def with_summary_text(summaries: QuerySet[MemorySummary]) -> QuerySet[MemorySummary]:
    """Summaries with ``message`` deferred, so that loading them opens
    nothing, and its stored text annotated for :func:`opened_summary`."""
    text = ExpressionWrapper(F("message"), output_field=TextField())
    return summaries.defer("message").annotate(summary_text=text)


def opened_summary(summary: MemorySummary) -> Any:
    """The message of a summary :func:`with_summary_text` annotated, opened;
    an :class:`UnreadableSummary` when it does not open."""
    text: str | None = getattr(summary, "summary_text", None)
    if text is None:
        return None
    codec = codec_for(summary._state.db or "default")
    try:
        return codec.open_summary(summary.conversation_id, summary.covers_through, loads(text))
    except codec.cannot_open as error:
        return UnreadableSummary(summary.pk, summary.covers_through, type(error).__name__)


@dataclass(frozen=True, slots=True)
class OpenedFailedRun:
    error_message: str
    traceback: str
    messages: Any


def opened_failed_run(run: FailedRun) -> OpenedFailedRun | str:
    """The payload of a failed run loaded with it deferred (the admin's
    record page), opened; the class of the error opening it raised when it
    does not open. One query."""
    alias = run._state.db or "default"
    payload = (
        FailedRun.objects.using(alias)
        .filter(pk=run.pk)
        .values_list("error_message", "traceback", "messages")
        .first()
    )
    if payload is None:
        return OpenedFailedRun("", "", [])
    codec = codec_for(alias)
    try:
        opened = codec.open_failed_run(run.conversation_id, run.run_id, *payload)
    except codec.cannot_open as error:
        return type(error).__name__
    return OpenedFailedRun(*opened)


def unopenable_errors(using: str | None = None) -> tuple[type[Exception], ...]:
    """What opening a stored value of the inspector's database raises when
    it does not open: for a read that shows several records at once (a
    page's summaries, its failed runs), to mark the section instead of
    failing the page."""
    return codec_for(read_alias(using)).cannot_open


def _row_ids(alias: str, conversation_id: int, positions: list[int]) -> dict[int, int]:
    found = MemoryMessage.objects.using(alias).filter(
        conversation_id=conversation_id, position__in=positions
    )
    return dict(found.values_list("position", "id"))
