"""``DjangoMemoryService``: ADK's ``BaseMemoryService`` over the store's
content search (``anvia_django.persistence.adk.memory``).

The events of every session a :class:`~.session_service.DjangoSessionService`
stores are in the store already, searchable as any message is: a session
added to memory is one whose events are stored. ``add_session_to_memory``
stores a session from another service (with its events) under its app,
user and id, and does nothing for one stored already.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.events.event import Event
from google.adk.memory.base_memory_service import BaseMemoryService, SearchMemoryResponse
from google.adk.memory.memory_entry import MemoryEntry
from google.adk.sessions.session import Session

from anvia_django.core.memory.types import JsonObject
from anvia_django.persistence.adk.memory import search_events
from anvia_django.persistence.threads.dispatch import run_in_db_thread

from .session_service import DjangoSessionService
from .stored_form import stored_event

DEFAULT_LIMIT = 20
"""Memories a search returns at most."""


class DjangoMemoryService(BaseMemoryService):
    """Search an app's sessions of one user in the Django database.

    ``using`` and ``metadata`` (tenant values) as for
    :class:`~.session_service.DjangoSessionService`; ``limit``: how many
    memories a search returns at most.
    """

    def __init__(
        self,
        *,
        using: str | None = None,
        metadata: JsonObject | None = None,
        limit: int = DEFAULT_LIMIT,
    ) -> None:
        self.using = using
        self.metadata = metadata
        self.limit = limit
        self._sessions = DjangoSessionService(using=using, metadata=metadata)

    async def add_session_to_memory(self, session: Session) -> None:
        stored = await self._sessions.get_session(
            app_name=session.app_name, user_id=session.user_id, session_id=session.id
        )
        if stored is not None:
            return
        try:
            copy = await self._sessions.create_session(
                app_name=session.app_name, user_id=session.user_id, session_id=session.id
            )
        except AlreadyExistsError:
            return  # stored meanwhile, by another caller
        for event in session.events:
            await self._sessions.append_event(copy, event.model_copy(deep=True))

    async def search_memory(
        self, *, app_name: str, user_id: str, query: str
    ) -> SearchMemoryResponse:
        if not query.strip():
            return SearchMemoryResponse()
        found = await run_in_db_thread(
            search_events,
            app_name,
            user_id,
            self.metadata,
            query,
            limit=self.limit,
            using=self.using,
        )
        memories = []
        for hit in found:
            event = Event.model_validate_json(json.dumps(stored_event(hit.message)))
            if event.content is None:
                continue
            memories.append(
                MemoryEntry(
                    id=event.id,
                    content=event.content,
                    author=event.author,
                    timestamp=datetime.fromtimestamp(event.timestamp, UTC).isoformat(),
                    custom_metadata={"session_id": hit.session_id, "position": hit.position},
                )
            )
        return SearchMemoryResponse(memories=memories)
