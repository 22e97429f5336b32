"""Workers of ``test_adk_concurrency``: appends racing on one ADK session."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.workers import START_TIMEOUT, setup_django

APP = "race"


def append_rounds(
    database_name: str | None, worker: int, session_id: str, rounds: int, gate: Any
) -> list[tuple[int, str, str]]:
    """``rounds`` rounds of: read the session, wait for the other workers at
    ``gate`` (all have read the same revision now), append one event. Returns
    ``(round, event id, "landed" or "stale")`` for each append."""
    if database_name is not None:
        setup_django(database_name)
    from google.adk.errors import StaleSessionError
    from google.adk.events.event import Event
    from google.adk.events.event_actions import EventActions
    from google.genai import types

    from anvia_django.integrations.adk import DjangoSessionService
    from anvia_django.store import close_db_threads

    async def race() -> list[tuple[int, str, str]]:
        service = DjangoSessionService()
        outcomes = []
        for round in range(rounds):
            session = await service.get_session(app_name=APP, user_id="u", session_id=session_id)
            assert session is not None
            await asyncio.to_thread(gate.wait, START_TIMEOUT)
            event = Event(
                invocation_id=f"w{worker}-r{round}",
                author="user",
                content=types.Content(role="user", parts=[types.Part(text=f"{worker}:{round}")]),
                actions=EventActions(
                    state_delta={f"w{worker}": round, "app:last": worker, "user:last": worker}
                ),
            )
            try:
                await service.append_event(session, event)
                outcomes.append((round, event.id, "landed"))
            except StaleSessionError:
                outcomes.append((round, event.id, "stale"))
        return outcomes

    try:
        return asyncio.run(race())
    finally:
        close_db_threads()
