"""A real browser edits a message on the example chat page and follows the fork.

Headless Debian Chromium, never downloaded; skipped without it (as the
admin browser test is).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.test.utils import modify_settings, override_settings

from anvia_django.models import Conversation
from tests.test_admin_browser import CHROMIUM, CHROMIUM_ARGS
from tests.test_admin_browser import pytestmark as browser_marks

pytestmark = browser_marks

# Set to a directory to refresh the documentation's screenshot of the fork.
SCREENSHOT_DIR = os.environ.get("ANVIA_SCREENSHOT_DIR")


@pytest.fixture
def example_project() -> Iterator[None]:
    with (
        modify_settings(INSTALLED_APPS={"append": "example_project.demo"}),
        override_settings(ROOT_URLCONF="example_project.urls"),
    ):
        yield


def edit_in_browser(base_url: str, result: dict[str, Any]) -> None:
    from playwright.sync_api import sync_playwright

    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
            )
            page = browser.new_page(viewport={"width": 900, "height": 800})
            page.goto(f"{base_url}/")
            for text in ("Where is order 1042?", "What did I ask earlier?"):
                answers = page.locator("li.assistant").count()
                page.fill("#prompt", text)
                page.click("button[type=submit]")
                page.locator("li.assistant").nth(answers).wait_for()
            result["original"] = page.inner_text("#session")
            page.once("dialog", lambda dialog: dialog.accept("Where is order 1043?"))
            page.locator("li.user").nth(1).locator("button.edit").click()
            page.locator("#lineage").get_by_text("Edited copy").wait_for()
            page.locator("li.assistant").nth(1).wait_for()
            result["fork"] = page.inner_text("#session")
            result["lineage"] = page.inner_text("#lineage")
            result["user_messages"] = page.locator("li.user").all_inner_texts()
            if SCREENSHOT_DIR:
                page.screenshot(path=str(Path(SCREENSHOT_DIR) / "chat-fork.png"), full_page=True)
            page.get_by_text("open the original").click()
            page.locator("#lineage").get_by_text("Forks of this conversation").wait_for()
            result["back"] = page.inner_text("#session")
            browser.close()
    except BaseException as error:  # reported on the test's thread
        result["error"] = error


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("example_project")
def test_edit_forks_in_the_browser_and_the_original_is_one_click_away(live_server: Any) -> None:
    result: dict[str, Any] = {}
    worker = threading.Thread(target=edit_in_browser, args=(live_server.url, result))
    worker.start()
    worker.join(timeout=180)
    assert not worker.is_alive(), "the browser did not finish in time"
    if "error" in result:
        raise result["error"]
    assert result["fork"] != result["original"]
    assert result["back"] == result["original"]
    assert f"forked from {result['original']} after its first 6 message(s)" in result["lineage"]
    assert [text.split("\n")[-1] for text in result["user_messages"]] == [
        "Where is order 1042?",
        "Where is order 1043?",
    ]
    fork = Conversation.objects.get(session_id=result["fork"])
    assert fork.forked_from is not None
    assert fork.forked_from.session_id == result["original"]
    assert fork.forked_at_position == 6  # 1042 shipped: two tool calls
