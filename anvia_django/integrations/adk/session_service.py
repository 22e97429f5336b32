"""``DjangoSessionService``: ADK's ``BaseSessionService`` on the store.

Every call runs the synchronous query code of
``anvia_django.persistence.adk`` on a store thread
(``persistence/threads/dispatch.py``), on Django's connection there.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from google.adk.errors import StaleSessionError
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError
from google.adk.events.event import Event
from google.adk.sessions.base_session_service import (
    BaseSessionService,
    GetSessionConfig,
    ListSessionsResponse,
)
from google.adk.sessions.session import Session
from pydantic_core import to_jsonable_python

from anvia_django.core.memory.types import JsonObject
from anvia_django.persistence import adk as queries
from anvia_django.persistence.inspector.keyset import KeysetPage, RowKey
from anvia_django.persistence.threads.dispatch import run_in_db_thread

from .stored_form import event_message, stored_event

STALE_MESSAGE = (
    "The session was appended to since it was read: read it again "
    "(get_session) before appending more events."
)


class DjangoSessionService(BaseSessionService):
    """ADK sessions in the Django database: events as the messages of a
    conversation, state in its three scopes beside it.

    ``using``: a database alias (``None`` follows the routers).
    ``metadata``: the tenant values of ``ANVIA_DJANGO["SCOPE"]``'s
    metadata keys (``{"tenant_id": "acme"}``) for every session of this
    service; the app name is added to them as ``adk_app``.
    """

    def __init__(self, *, using: str | None = None, metadata: JsonObject | None = None) -> None:
        self.using = using
        self.metadata = metadata

    def _key(self, app_name: str, user_id: str, session_id: str) -> queries.AdkKey:
        return queries.AdkKey(app_name, user_id, session_id.strip(), self.metadata)

    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session:
        session_id = (session_id or "").strip() or str(uuid.uuid4())
        key = self._key(app_name, user_id, session_id)
        scoped = queries.split_state(_json_safe(state or {}))
        try:
            stored = await run_in_db_thread(
                queries.create_session, key, scoped, time.time(), using=self.using
            )
        except queries.SessionAlreadyExists:
            raise AlreadyExistsError(f"Session with id {session_id} already exists.") from None
        return _session(stored)

    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: GetSessionConfig | None = None,
    ) -> Session | None:
        stored = await run_in_db_thread(
            queries.load_session,
            self._key(app_name, user_id, session_id),
            recent=config.num_recent_events if config else None,
            after=config.after_timestamp if config else None,
            using=self.using,
        )
        return None if stored is None else _session(stored)

    async def list_sessions(
        self, *, app_name: str, user_id: str | None = None
    ) -> ListSessionsResponse:
        """Every session of the app (of ``user_id``), oldest update first,
        without events. :meth:`list_sessions_page` pages them instead."""
        rows = await run_in_db_thread(
            queries.list_sessions, app_name, user_id, self.metadata, using=self.using
        )
        return ListSessionsResponse(sessions=[_listed(app_name, row) for row in rows])

    async def list_sessions_page(
        self,
        *,
        app_name: str,
        user_id: str | None = None,
        limit: int = 50,
        after: RowKey | None = None,
    ) -> KeysetPage[Session]:
        """A page of the app's sessions, the most recently updated first,
        without events; the page's ``next_key``, passed as ``after``, gives
        the next page (``None`` on the last)."""
        page = await run_in_db_thread(
            queries.list_session_page,
            app_name,
            user_id,
            self.metadata,
            limit=limit,
            after=after,
            using=self.using,
        )
        return KeysetPage([_listed(app_name, row) for row in page.items], page.next_key)

    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        await run_in_db_thread(
            queries.delete_session, self._key(app_name, user_id, session_id), using=self.using
        )

    async def get_user_state(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        return await run_in_db_thread(
            queries.load_user_state, app_name, user_id, self.metadata, using=self.using
        )

    async def append_event(self, session: Session, event: Event) -> Event:
        if event.partial:
            return event
        self._apply_temp_state(session, event)
        event = self._trim_temp_delta_state(event)
        form = json.loads(event.model_dump_json(exclude_none=True))
        marker = getattr(session, "_storage_update_marker", None)
        new = queries.NewEvent(
            message=event_message(form),
            event_id=event.id,
            invocation_id=event.invocation_id,
            timestamp=event.timestamp,
            delta=queries.split_state(_json_safe(event.actions.state_delta or {})),
            revision=int(marker) if marker is not None else None,
            last_event_id=session.events[-1].id if session.events else None,
            last_update_time=session.last_update_time,
        )
        key = queries.AdkKey(session.app_name, session.user_id, session.id, self.metadata)
        try:
            appended = await run_in_db_thread(queries.append_event, key, new, using=self.using)
        except queries.SessionSuperseded:
            raise StaleSessionError(STALE_MESSAGE) from None
        except queries.SessionNotStored:
            raise SessionNotFoundError(f"Session {session.id} not found.") from None
        session._storage_update_marker = str(appended.revision)
        if not appended.written:
            return event  # a re-delivery: stored and applied already
        session.last_update_time = queries.moment(event.timestamp).timestamp()
        return self._commit_event_to_session(session, event)


def _json_safe(state: dict[str, Any]) -> dict[str, Any]:
    safe: dict[str, Any] = to_jsonable_python(state, fallback=repr)
    return safe


def _session(stored: queries.StoredSession) -> Session:
    key = stored.key
    session = Session(
        id=key.session_id,
        app_name=key.app_name,
        user_id=key.user_id,
        state=stored.state,
        events=[
            Event.model_validate_json(json.dumps(stored_event(e.message))) for e in stored.events
        ],
        last_update_time=stored.updated_at.timestamp(),
    )
    session._storage_update_marker = str(stored.revision)
    return session


def _listed(app_name: str, row: queries.SessionRow) -> Session:
    session = Session(
        id=row.session_id,
        app_name=app_name,
        user_id=row.user_id,
        state=row.state,
        last_update_time=row.updated_at.timestamp(),
    )
    session._storage_update_marker = str(row.revision)
    return session
