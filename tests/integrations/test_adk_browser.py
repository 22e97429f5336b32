"""A real browser opens an ADK session in the admin: its events as the
conversation (the user's text, the tool call, the answer, the state each
changed, the whole event folded until opened) and the session's state."""

from __future__ import annotations

from typing import Any

import pytest

from anvia_django.models import AdkSession
from tests.browser_support import (
    BROWSER_MARKS,
    create_demo_account,
    log_in_as_demo,
    run_in_browser,
)
from tests.helpers import run
from tests.integrations.adk_support import needs_adk

pytestmark = [*BROWSER_MARKS, needs_adk]


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
        seen["page"] = page.locator("ol.anvia-transcript").inner_text()
        seen["event_visible_before"] = event.is_visible()
        page.locator("summary:text-is('ADK event')").first.click()
        seen["event_visible_after"] = event.is_visible()
        seen["event"] = event.inner_text()
        return seen

    return walk


@pytest.mark.django_db(transaction=True)
def test_an_adk_session_reads_in_the_admin(live_server: Any) -> None:
    from tests.integrations.adk_model import one_turn

    create_demo_account()  # staff with the view permissions, ADK sessions' too
    run(one_turn, "shop", "u1", "I like green tea")
    seen = run_in_browser(read_session(AdkSession.objects.get().pk), live_server.url)

    assert '"last_answer": "noted: I like green tea"' in seen["state"]
    assert seen["labels"].count("author") == 4
    assert seen["labels"].count("state delta") == 2
    assert "I like green tea" in seen["page"]
    assert "noted: I like green tea" in seen["page"]
    assert '"user:fact": "I like green tea"' in seen["page"]
    assert (seen["event_visible_before"], seen["event_visible_after"]) == (False, True)
    assert '"invocation_id"' in seen["event"]
