"""An ADK ``Runner`` on ``DjangoSessionService``: multi-turn runs with a
tool call and state changes in every scope, stored as they happened, and a
new service (as after a restart) that resumes the session exactly."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from anvia_django.integrations import adk
from tests.helpers import run, stored
from tests.integrations.adk_support import needs_adk

if TYPE_CHECKING:
    from google.adk.events.event import Event
    from google.adk.runners import Runner

pytestmark = [pytest.mark.django_db, needs_adk]

APP = "shop"


async def turn(runner: Runner, session_id: str, text: str) -> list[Event]:
    from tests.integrations.adk_model import user_says

    return [
        event
        async for event in runner.run_async(
            user_id="u1", session_id=session_id, new_message=user_says(text)
        )
    ]


def test_a_runner_keeps_its_sessions_and_a_new_service_resumes_them_exactly() -> None:
    from google.adk.runners import Runner

    from tests.integrations.adk_model import ScriptedModel, make_agent

    model = ScriptedModel(model="scripted")
    model.seen = []

    async def first_process() -> tuple[str, list[Event]]:
        service = adk.DjangoSessionService()
        runner = Runner(agent=make_agent(model), app_name=APP, session_service=service)
        session = await service.create_session(app_name=APP, user_id="u1", state={"plan": "free"})
        events = await turn(runner, session.id, "I like tea")
        events += await turn(runner, session.id, "I live in Oslo")
        return session.id, events

    session_id, events = run(first_process)
    # Each turn: the user's message, the call, its result, the answer.
    assert [e.author for e in events] == ["helper", "helper", "helper"] * 2
    assert model.seen == [1, 3, 5, 7]  # the model saw the whole history every time

    async def reread() -> tuple[object, object]:
        service = adk.DjangoSessionService()  # nothing shared with the first one
        session = await service.get_session(app_name=APP, user_id="u1", session_id=session_id)
        return session, await service.get_user_state(app_name=APP, user_id="u1")

    session, user_state = run(reread)
    assert session is not None
    stored_events = session.events  # type: ignore[attr-defined]
    assert [e.author for e in stored_events] == ["user", "helper", "helper", "helper"] * 2
    assert [e for e in stored_events if e.author != "user"] == events
    assert session.state == {  # type: ignore[attr-defined]
        "plan": "free",
        "remembered": 2,
        "last_answer": "noted: I live in Oslo",
        "user:fact": "I live in Oslo",
        "app:remembered": 2,
    }
    assert user_state == {"fact": "I live in Oslo"}
    # The conversation holds the events at positions 0..7 as readable messages.
    rows = stored(session_id)
    assert [position for position, *_ in rows] == list(range(8))
    assert [message["role"] for *_, message in rows] == [
        "user",
        "assistant",
        "tool",
        "assistant",
    ] * 2
    assert rows[1][3]["tool_calls"][0]["name"] == "remember"
    assert rows[3][3]["content"] == "noted: I like tea"

    async def after_restart() -> list[Event]:
        service = adk.DjangoSessionService()
        runner = Runner(agent=make_agent(model), app_name=APP, session_service=service)
        return await turn(runner, session_id, "I have a cat")

    model.seen = []
    run(after_restart)
    assert model.seen == [9, 11]  # the history as the first process left it

    async def final() -> object:
        return await adk.DjangoSessionService().get_session(
            app_name=APP, user_id="u1", session_id=session_id
        )

    resumed = run(final)
    assert len(resumed.events) == 12  # type: ignore[attr-defined]
    assert resumed.events[:8] == stored_events  # type: ignore[attr-defined]
    assert resumed.state["remembered"] == 3  # type: ignore[attr-defined]
    assert resumed.state["app:remembered"] == 3  # type: ignore[attr-defined]
    assert not any(key.startswith("temp:") for key in resumed.state)  # type: ignore[attr-defined]
