"""Appending an ADK event, and reading a session's events back.

An event is one message of its session's conversation, appended as every
message is (``Dialect.append_under_lock``: the row lock, gap-free
positions, the codec, the retried-append check), in one transaction with
what the event changes beside it: its timestamp row, the session's state
and the shared state. The staleness check runs under the same row lock,
inside that transaction, before it commits: an append from a superseded
session writes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.db import transaction

from anvia_django.core.memory.types import MemoryAppendInput, Message
from anvia_django.models import AdkEvent, AdkSession, MemoryMessage
from anvia_django.persistence.adk.errors import SessionNotStored, SessionSuperseded
from anvia_django.persistence.adk.keys import AdkKey, session_scope
from anvia_django.persistence.adk.state import (
    ScopedState,
    session_place,
    session_state,
    write_shared_state,
)
from anvia_django.persistence.codec import codec_for
from anvia_django.persistence.databases import write_alias
from anvia_django.persistence.dialects import dialect_for
from anvia_django.persistence.reconnect import retry_if_connection_lost
from anvia_django.persistence.transcript.append import announce_append, validated_append


@dataclass(frozen=True, slots=True)
class NewEvent:
    """An event to append, in its stored form.

    ``revision``: how many events the appending session had seen stored
    (its marker), ``None`` for a session read elsewhere; then
    ``last_event_id`` and ``last_update_time`` decide, as ADK's own
    services do for such sessions."""

    message: Message
    event_id: str
    invocation_id: str
    timestamp: float
    delta: ScopedState
    revision: int | None
    last_event_id: str | None
    last_update_time: float


@dataclass(frozen=True, slots=True)
class Appended:
    """The session's revision (how many events it has) after an append, and
    whether the append wrote the event (not when it was stored already)."""

    revision: int
    written: bool


@dataclass(frozen=True, slots=True)
class StoredEvent:
    position: int
    message: Message


def moment(timestamp: float) -> datetime:
    return datetime.fromtimestamp(timestamp, UTC)


class _AlreadyStored(Exception):
    """Rolls back a re-delivered event's reservation; never leaves this module."""


@retry_if_connection_lost
def append_event(key: AdkKey, event: NewEvent, *, using: str | None = None) -> Appended:
    """Append ``event`` to ``key``'s session.

    Raises :class:`SessionNotStored`, or :class:`SessionSuperseded` when
    another append moved the session past ``event.revision``. An event
    equal to the one stored last for its invocation (a re-delivery, or a
    retry after a lost answer) writes nothing."""
    alias = write_alias(using)
    input = MemoryAppendInput(key.context, event.invocation_id or "-", 1, [event.message])
    append = validated_append(input, session_scope())
    assert append is not None  # one message
    codec = codec_for(alias)
    try:
        with transaction.atomic(using=alias):
            conversation = dialect_for(alias).append_under_lock(alias, append, codec)
            if conversation is None:
                raise _AlreadyStored
            position = conversation.first_position
            session = (
                AdkSession.objects.using(alias)
                .filter(conversation_id=conversation.id)
                .values_list("pk", "state", "updated_at")
                .first()
            )
            if session is None:
                raise SessionNotStored(key.session_id)
            pk, state, updated_at = session
            if not _is_current(alias, conversation.id, position, updated_at, event):
                raise SessionSuperseded(key.session_id)
            now = moment(event.timestamp)
            # Rows the store's pop or rewind left behind their messages.
            AdkEvent.objects.using(alias).filter(
                conversation_id=conversation.id, position__gte=position
            ).delete()
            AdkEvent.objects.using(alias).create(
                conversation_id=conversation.id,
                position=position,
                event_id=event.event_id,
                timestamp=event.timestamp,
            )
            changes: dict[str, Any] = {"updated_at": now}
            if event.delta.session:
                own = session_state(alias, conversation.id, state)
                place = session_place(key, conversation.id)
                changes["state"] = codec.state_value(place, {**own, **event.delta.session})
            AdkSession.objects.using(alias).filter(pk=pk).update(**changes)
            write_shared_state(alias, key, event.delta, now)
    except _AlreadyStored:
        return Appended(_revision(alias, key), written=False)
    announce_append(alias, input, append, conversation)
    return Appended(position + 1, written=True)


def _is_current(
    alias: str, conversation_id: int, stored: int, updated_at: datetime, event: NewEvent
) -> bool:
    if event.revision is not None:
        return event.revision == stored
    # A session without a marker: current if it ends with the stored last
    # event, or if nothing was stored after its last update.
    last = (
        AdkEvent.objects.using(alias)
        .filter(conversation_id=conversation_id, position=stored - 1)
        .values_list("event_id", flat=True)
        .first()
    )
    if last is None or last == event.last_event_id:
        return True
    return updated_at <= moment(event.last_update_time)


def _revision(alias: str, key: AdkKey) -> int:
    count = (
        AdkSession.objects.using(alias)
        .filter(
            conversation__session_id=key.session_id,
            conversation__scope_key=session_scope().key(key.context),
        )
        .values_list("conversation__message_count", flat=True)
        .first()
    )
    if count is None:
        raise SessionNotStored(key.session_id)
    return int(count)


def load_events(
    alias: str, conversation_id: int, recent: int | None, after: float | None
) -> list[StoredEvent]:
    """The session's events in position order: the newest ``recent`` of those
    at or after the timestamp ``after``; each read by an index."""
    if recent == 0:
        return []
    rows = MemoryMessage.objects.using(alias).filter(conversation_id=conversation_id)
    if after is not None:
        positions = (
            AdkEvent.objects.using(alias)
            .filter(conversation_id=conversation_id, timestamp__gte=after)
            .order_by("-position")
            .values_list("position", flat=True)
        )
        rows = rows.filter(position__in=list(positions[:recent] if recent else positions))
    newest = rows.only("conversation_id", "position", "message").order_by("-position")
    found = list(newest[:recent] if recent else newest)
    return [StoredEvent(row.position, row.message) for row in reversed(found)]
