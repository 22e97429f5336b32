"""The inspector in a real browser, as a new user meets it after ``make
demo``: the demo's staff account sees Runs in the admin, browses the API
from its root to a second page, opens Swagger UI, and an anonymous visitor
following the schema link reads a refusal instead of a browser error.

On the way it answers the first support question in the admin: a search
for "1042" ends at the message that mentions order 1042, in its transcript.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.test import override_settings

from anvia_django.persistence import append_messages

from .browser_support import BROWSER_MARKS, create_demo_account, log_in_as_demo, run_in_browser
from .helpers import append_input, assistant, user
from .inspector_data import make_conversations

pytestmark = BROWSER_MARKS

DEMO_RULES = {
    # As in the example project: the admin's rule for the API too.
    "INSPECTOR_PERMISSION_CLASSES": ["anvia_django.api.permissions.AdminViewPermission"],
    # Small pages, so a few rows make a second one.
    "INSPECTOR_DEFAULT_LIMIT": 2,
}


def walk_the_inspector(browser: Any, base_url: str) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    page = browser.new_page()

    log_in_as_demo(page, base_url)
    runs = page.locator('#content-main a[href="/admin/anvia_django/agentrun/"]')
    seen["runs_in_index"] = runs.all_inner_texts()
    runs.first.click()
    seen["runs_title"] = page.title()

    page.goto(f"{base_url}/admin/anvia_django/conversation/")
    page.fill("#searchbar", "1042")
    page.press("#searchbar", "Enter")
    page.wait_for_load_state()
    seen["hits"] = page.locator("#result_list tbody tr").count()
    page.locator("#result_list tbody tr th a").first.click()
    page.wait_for_load_state()
    seen["hit_url"] = page.url
    anchor = page.evaluate("location.hash.slice(1)")
    seen["hit_text"] = page.locator(f"[id='{anchor}']").inner_text()

    page.goto(f"{base_url}/anvia/api/")
    seen["root_type"] = page.evaluate("document.contentType")
    # The root page has a .response-info too: wait for the new page's address
    # before reading it, or a loaded machine reads the old one.
    page.click(f'a[href="{base_url}/anvia/api/conversations/"]')
    page.wait_for_url(f"{base_url}/anvia/api/conversations/")
    seen["first_page"] = page.locator(".response-info").inner_text()
    page.click('a[rel="next"]')
    page.wait_for_url("**cursor=**")
    seen["second_url"] = page.url
    seen["second_page"] = page.locator(".response-info").inner_text()

    page.goto(f"{base_url}/anvia/api/docs/")
    page.wait_for_selector(".opblock-summary-path", timeout=30_000)
    seen["operations"] = page.locator(".opblock-summary-path").all_inner_texts()

    anonymous = browser.new_context().new_page()
    response = anonymous.goto(f"{base_url}/anvia/api/schema/")
    seen["anonymous_status"] = response.status
    seen["anonymous_type"] = response.headers["content-type"]
    seen["anonymous_text"] = anonymous.locator("body").inner_text()
    return seen


@pytest.mark.django_db(transaction=True)
def test_the_demo_account_walks_the_admin_and_the_api(live_server: Any) -> None:
    pytest.importorskip("drf_spectacular_sidecar")  # Swagger UI offline
    create_demo_account()
    make_conversations(5, prefix="walk")
    asking = [user("Hello"), assistant("Hi, how can I help?"), user("Where is my order 1042?")]
    append_messages(append_input("support-thread", asking))
    with override_settings(ANVIA_DJANGO=DEMO_RULES):
        seen = run_in_browser(walk_the_inspector, live_server.url)

    assert "Runs" in seen["runs_in_index"]
    assert seen["runs_title"].startswith("Select run to view")
    assert seen["hits"] == 1
    assert seen["hit_url"].endswith("#m-2")
    assert "Where is my order 1042?" in seen["hit_text"]
    assert seen["root_type"] == "text/html"
    assert "walk-4" in seen["first_page"]
    assert "walk-2" not in seen["first_page"]
    assert "cursor=" in seen["second_url"]
    assert "walk-2" in seen["second_page"]
    assert "walk-4" not in seen["second_page"]
    assert "/anvia/api/conversations/{ref}/runs/" in seen["operations"]
    # The conversations' seven; LangGraph's three (thread list, history,
    # checkpoint) where LangGraph is installed, as in the test environment.
    assert "/anvia/api/langgraph/threads/" in seen["operations"]
    assert len(seen["operations"]) == 10
    assert seen["anonymous_status"] == 403
    assert seen["anonymous_type"].startswith("text/html")
    assert "Authentication credentials were not provided." in seen["anonymous_text"]
