"""Google ADK sessions in the store: the synchronous query code behind
``anvia_django.integrations.adk`` (which alone imports ``google.adk``).

An ADK session is a conversation whose scope key carries the app name
(:mod:`.keys`); its events are that conversation's messages, its state
lives beside it (:mod:`.state`)."""

from anvia_django.persistence.adk.errors import (
    SessionAlreadyExists,
    SessionNotStored,
    SessionSuperseded,
)
from anvia_django.persistence.adk.events import (
    Appended,
    NewEvent,
    StoredEvent,
    append_event,
    moment,
)
from anvia_django.persistence.adk.keys import APP_KEY, AdkKey, app_scope_of
from anvia_django.persistence.adk.listing import (
    SessionRow,
    list_session_page,
    list_sessions,
)
from anvia_django.persistence.adk.sessions import (
    StoredSession,
    create_session,
    delete_session,
    load_session,
    load_user_state,
)
from anvia_django.persistence.adk.state import ScopedState, split_state

__all__ = [
    "APP_KEY",
    "AdkKey",
    "Appended",
    "NewEvent",
    "ScopedState",
    "SessionAlreadyExists",
    "SessionNotStored",
    "SessionRow",
    "SessionSuperseded",
    "StoredEvent",
    "StoredSession",
    "app_scope_of",
    "append_event",
    "create_session",
    "delete_session",
    "list_session_page",
    "list_sessions",
    "load_session",
    "load_user_state",
    "moment",
    "split_state",
]
