"""A real browser on the example chat page: edits a message and follows the
fork; sees its message at once while the reply is pending; keeps its text when
sending fails; and has every control on screen at a phone's 390 px.

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
from tests.browser_support import BROWSER_MARKS as browser_marks
from tests.browser_support import CHROMIUM, CHROMIUM_ARGS

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
    assert f"forked from {result['original']} after its first 6 messages." in result["lineage"]
    assert [text.split("\n")[-1] for text in result["user_messages"]] == [
        "Where is order 1042?",
        "Where is order 1043?",
    ]
    fork = Conversation.objects.get(session_id=result["fork"])
    assert fork.forked_from is not None
    assert fork.forked_from.session_id == result["original"]
    assert fork.forked_at_position == 6  # 1042 shipped: two tool calls


def in_browser(base_url: str, result: dict[str, Any], steps: Any, width: int = 900) -> None:
    """Run ``steps(page, result)`` in headless Chromium; errors go to ``result``."""
    from playwright.sync_api import sync_playwright

    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
            )
            page = browser.new_page(viewport={"width": width, "height": 844})
            page.goto(f"{base_url}/")
            steps(page, result)
            browser.close()
    except BaseException as error:  # reported on the test's thread
        result["error"] = error


def run_in_browser(live_server: Any, steps: Any, width: int = 900) -> dict[str, Any]:
    result: dict[str, Any] = {}
    worker = threading.Thread(target=in_browser, args=(live_server.url, result, steps, width))
    worker.start()
    worker.join(timeout=180)
    assert not worker.is_alive(), "the browser did not finish in time"
    if "error" in result:
        raise result["error"]
    return result


def pending_then_failed(page: Any, result: dict[str, Any]) -> None:
    held: list[Any] = []
    # Hold the first send in the browser, so the page is seen while it waits.
    page.route("**/chat/send/", lambda route: held.append(route))
    page.fill("#prompt", "Where is order 1044?")
    page.click("#send")
    page.locator("li.user.pending").wait_for()
    result["pending"] = page.locator("li.user.pending").inner_text()
    result["thinking"] = page.locator("li.thinking").count()
    result["send_disabled"] = page.is_disabled("#send")
    held[0].continue_()
    page.unroute("**/chat/send/")
    page.locator("li.assistant:not(.thinking)").first.wait_for()
    result["after_reply"] = page.locator("li.pending, li.thinking").count()
    result["input_after_reply"] = page.input_value("#prompt")

    too_long = "x" * 4001  # the server refuses it: a failed send
    page.fill("#prompt", too_long)
    page.click("#send")
    page.locator("#error").get_by_text("at most 4000").wait_for()
    result["kept"] = page.input_value("#prompt") == too_long
    result["error_in_form"] = page.locator("form #error").inner_text()
    result["invalid"] = page.get_attribute("#prompt", "aria-invalid")
    result["left_over"] = page.locator("li.pending, li.thinking").count()
    error_box, input_box = (
        page.locator("#error").bounding_box(),
        page.locator("#prompt").bounding_box(),
    )
    result["error_gap"] = input_box["y"] - (error_box["y"] + error_box["height"])


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("example_project")
def test_a_message_shows_at_once_and_a_failed_send_keeps_the_text(live_server: Any) -> None:
    result = run_in_browser(live_server, pending_then_failed)
    assert result["pending"].endswith("Where is order 1044?")
    assert "sending" in result["pending"].lower()
    assert result["thinking"] == 1
    assert result["send_disabled"] is True
    assert result["after_reply"] == 0
    assert result["input_after_reply"] == ""
    assert result["kept"] is True
    assert "at most 4000 characters" in result["error_in_form"]
    assert result["invalid"] == "true"
    assert result["left_over"] == 0
    assert 0 <= result["error_gap"] < 40  # right above the input, not far away
    assert Conversation.objects.get().message_count == 4  # only the message that was sent


def phone_layout(page: Any, result: dict[str, Any]) -> None:
    page.fill("#prompt", "Where is order 1042?")
    page.click("#send")
    page.locator("li.assistant:not(.thinking)").first.wait_for()
    result["scroll_width"] = page.evaluate("document.documentElement.scrollWidth")
    result["boxes"] = {
        name: page.locator(selector).bounding_box()
        for name, selector in {
            "new": "#new",
            "send": "#send",
            "prompt": "#prompt",
            "schema": "header nav a >> nth=-1",
            "title": "header h1",
        }.items()
    }
    result["new_text"] = page.inner_text("#new")
    # Editing the very first message forks before anything: worded as such.
    page.once("dialog", lambda dialog: dialog.accept("Where is order 1043?"))
    page.locator("li.user").first.locator("button.edit").click()
    page.locator("#lineage").get_by_text("Edited copy").wait_for()
    result["lineage"] = page.inner_text("#lineage")
    result["scroll_width_with_lineage"] = page.evaluate("document.documentElement.scrollWidth")


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("example_project")
def test_the_page_fits_a_390_px_phone(live_server: Any) -> None:
    result = run_in_browser(live_server, phone_layout, width=390)
    assert result["scroll_width"] <= 390  # no sideways scrolling
    assert result["new_text"] == "New conversation"
    for name, box in result["boxes"].items():
        assert box is not None, name
        assert box["x"] >= 0, name
        assert box["x"] + box["width"] <= 390, (name, box)
    assert result["boxes"]["prompt"]["width"] >= 200  # room to type
    assert "before its first message." in result["lineage"]
    assert "message(s)" not in result["lineage"]
    assert result["scroll_width_with_lineage"] <= 390
