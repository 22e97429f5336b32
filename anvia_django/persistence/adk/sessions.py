"""Creating, reading and deleting ADK sessions."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction

from anvia_django.conf import app_settings
from anvia_django.core.memory.validation import validate_context
from anvia_django.models import AdkSession
from anvia_django.persistence.adk.errors import SessionAlreadyExists
from anvia_django.persistence.adk.events import StoredEvent, load_events, moment
from anvia_django.persistence.adk.keys import AdkKey, session_scope
from anvia_django.persistence.adk.state import (
    ScopedState,
    merged_state,
    session_place,
    session_state,
    shared_state,
    user_states,
    write_shared_state,
)
from anvia_django.persistence.codec import codec_for
from anvia_django.persistence.databases import write_alias
from anvia_django.persistence.dialects import ConversationLock
from anvia_django.persistence.reconnect import retry_if_connection_lost
from anvia_django.persistence.transcript.locking import lock_conversation
from anvia_django.persistence.transcript.writes import clear_conversation


@dataclass(frozen=True, slots=True)
class StoredSession:
    """A session as stored: its merged state (prefixed shared keys), the time
    of its last update, its revision (how many events it has) and events."""

    key: AdkKey
    state: dict[str, Any]
    updated_at: datetime
    revision: int
    events: list[StoredEvent]


@retry_if_connection_lost
def create_session(
    key: AdkKey, state: ScopedState, now: float, *, using: str | None = None
) -> StoredSession:
    """Store a new session with ``state``; raises :class:`SessionAlreadyExists`."""
    alias = write_alias(using)
    context = validate_context(key.context, app_settings.input_limits)
    at = moment(now)
    with transaction.atomic(using=alias):
        conversation = lock_conversation(
            alias,
            ConversationLock(
                key.session_id,
                session_scope().key(context),
                key.user_id,
                context.metadata,
                at,
            ),
        )
        taken = AdkSession.objects.using(alias).filter(conversation_id=conversation.id).exists()
        if taken or conversation.first_position:
            raise SessionAlreadyExists(key.session_id)
        AdkSession.objects.using(alias).create(
            conversation_id=conversation.id,
            app_scope=key.app_scope,
            app_name=key.app_name,
            user_id=key.user_id,
            state=codec_for(alias).state_value(session_place(key, conversation.id), state.session),
            created_at=at,
            updated_at=at,
        )
        write_shared_state(alias, key, state, at)
        app, user = shared_state(alias, key.app_scope, key.user_id)
    return StoredSession(key, merged_state(app, user, state.session), at, 0, [])


def load_session(
    key: AdkKey,
    *,
    recent: int | None = None,
    after: float | None = None,
    using: str | None = None,
) -> StoredSession | None:
    """The stored session with its events (see :func:`.events.load_events`),
    ``None`` when none is stored."""
    alias = write_alias(using)
    context = validate_context(key.context, app_settings.input_limits)
    found = (
        AdkSession.objects.using(alias)
        .filter(
            conversation__session_id=key.session_id,
            conversation__scope_key=session_scope().key(context),
        )
        .values_list("conversation_id", "state", "updated_at", "conversation__message_count")
        .first()
    )
    if found is None:
        return None
    conversation_id, state, updated_at, revision = found
    events = load_events(alias, conversation_id, recent, after)
    app, user = shared_state(alias, key.app_scope, key.user_id)
    own = session_state(alias, conversation_id, state)
    return StoredSession(key, merged_state(app, user, own), updated_at, revision, events)


def delete_session(key: AdkKey, *, using: str | None = None) -> None:
    """Delete the session with its events (as ``clear`` deletes a
    conversation); the app's and the user's state stay."""
    clear_conversation(key.context, using=using, scope=session_scope())


def load_user_state(
    app_name: str, user_id: str, metadata: dict[str, Any] | None, *, using: str | None = None
) -> dict[str, Any]:
    """The user's state in the app, keys without their prefix."""
    app_scope = AdkKey(app_name, user_id, "-", metadata).app_scope
    return user_states(write_alias(using), app_scope, {user_id}).get(user_id, {})
