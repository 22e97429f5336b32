"""An ADK session in the admin and the inspector API: its events are the
conversation's messages, readable with their author, function calls and
results, and the state each changed."""

from __future__ import annotations

import pytest

pytest.importorskip("google.adk")

from google.adk.runners import Runner

from anvia_django.integrations.adk import DjangoSessionService
from anvia_django.models import AdkSession, Conversation
from tests.helpers import run
from tests.integrations.adk_model import ScriptedModel, make_agent, user_says
from tests.test_admin_pages import every_view, html, staff_with, transcript

pytestmark = pytest.mark.django_db


def test_an_adk_session_reads_as_a_conversation_in_the_admin() -> None:
    async def one_turn() -> str:
        service = DjangoSessionService()
        runner = Runner(
            agent=make_agent(ScriptedModel(model="scripted")),
            app_name="shop",
            session_service=service,
        )
        session = await service.create_session(app_name="shop", user_id="u1")
        async for _ in runner.run_async(
            user_id="u1", session_id=session.id, new_message=user_says("I like green tea")
        ):
            pass
        return session.id

    session_id = run(one_turn)
    conversation = Conversation.objects.get(session_id=session_id)
    assert conversation.user_id == "u1"
    assert conversation.metadata == {"adk_app": "shop"}
    page = html(every_view(), transcript(conversation))
    assert page.count('class="anvia-block-label">author<') == 4
    assert page.count('class="anvia-block-label">ADK event<') == 4
    assert page.count('class="anvia-block-label">tool calls<') == 1
    assert page.count('class="anvia-block-label">state delta<') == 2  # the tool's, the answer's
    assert "&quot;user:fact&quot;: &quot;I like green tea&quot;" in page
    assert "noted: I like green tea" in page
    assert "temp:scratch" not in page

    # The session's own page: its state, linked to the conversation.
    adk_session = AdkSession.objects.get(conversation=conversation)
    page = html(
        staff_with("adksession", "conversation"),
        f"/admin/anvia_django/adksession/{adk_session.pk}/change/",
    )
    assert "&quot;last_answer&quot;: &quot;noted: I like green tea&quot;" in page
    assert f'href="{transcript(conversation)}"' in page
    listing = html(staff_with("adksession"), "/admin/anvia_django/adksession/", q="u1")
    assert "shop" in listing
