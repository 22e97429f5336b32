"""A real browser opens an ADK session in the admin: its events as the
conversation (the user's text, the tool call, the answer, the state each
changed, the whole event folded until opened) and the session's state."""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser_support import (
    BROWSER_MARKS,
    create_demo_account,
    log_in_as_demo,
    run_in_browser,
)
from tests.helpers import run

pytest.importorskip("google.adk")

from google.adk.runners import Runner

from anvia_django.integrations.adk import DjangoSessionService
from anvia_django.models import AdkSession
from tests.integrations.adk_model import ScriptedModel, make_agent, user_says

pytestmark = BROWSER_MARKS


def read_session(adk_session_pk: int) -> Any:
    def walk(browser: Any, base_url: str) -> dict[str, Any]:
        page = browser.new_page()
        log_in_as_demo(page, base_url)
        page.goto(f"{base_url}/admin/anvia_django/adksession/{adk_session_pk}/change/")
        seen: dict[str, Any] = {"state": page.locator(".field-session_state").inner_text()}
        page.locator(".field-conversation_link a").click()
        page.wait_for_url("**/conversation/**")
        event = page.locator("details:has(summary:text-is('ADK event')) pre").first
        seen["labels"] = page.locator(".anvia-block-label").all_inner_texts()
        seen["page"] = page.locator("ol").first.inner_text()
        seen["event_visible_before"] = event.is_visible()
        page.locator("summary:text-is('ADK event')").first.click()
        seen["event_visible_after"] = event.is_visible()
        seen["event"] = event.inner_text()
        return seen

    return walk


@pytest.mark.django_db(transaction=True)
def test_an_adk_session_reads_in_the_admin(live_server: Any) -> None:
    create_demo_account()  # staff with the view permissions, ADK sessions' too

    async def one_turn() -> None:
        service = DjangoSessionService()
        runner = Runner(
            agent=make_agent(ScriptedModel(model="scripted")),
            app_name="shop",
            session_service=service,
        )
        session = await service.create_session(app_name="shop", user_id="u1", session_id="tea")
        async for _ in runner.run_async(
            user_id="u1", session_id=session.id, new_message=user_says("I like green tea")
        ):
            pass

    run(one_turn)
    seen = run_in_browser(read_session(AdkSession.objects.get().pk), live_server.url)

    assert '"last_answer": "noted: I like green tea"' in seen["state"]
    assert seen["labels"].count("author") == 4
    assert seen["labels"].count("state delta") == 2
    assert "I like green tea" in seen["page"]
    assert "noted: I like green tea" in seen["page"]
    assert '"user:fact": "I like green tea"' in seen["page"]
    assert (seen["event_visible_before"], seen["event_visible_after"]) == (False, True)
    assert '"invocation_id"' in seen["event"]
