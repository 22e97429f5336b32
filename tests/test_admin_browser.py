"""One real browser: headless Debian Chromium logs into the admin and reads
a transcript. Never downloads a browser; skipped without one."""

from __future__ import annotations

import importlib.util
import os
import threading
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User

from anvia_django.models import Conversation
from anvia_django.persistence import append_messages

from .helpers import append_input, assistant, user

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]

# CI sets this so a missing browser fails the run instead of skipping silently.
REQUIRED = os.environ.get("ANVIA_REQUIRE_BROWSER") == "1"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not REQUIRED and not CHROMIUM.exists(),
        reason=f"no Chromium at {CHROMIUM} (apt-get install chromium)",
    ),
    pytest.mark.skipif(
        not REQUIRED and importlib.util.find_spec("playwright") is None,
        reason="the playwright package is not installed (pip install playwright)",
    ),
]


def read_transcript(base_url: str, conversation_pk: int, result: dict[str, Any]) -> None:
    # Playwright's sync API runs an event loop in its thread; keeping it off
    # the test's thread keeps Django's ORM there free of SynchronousOnlyOperation.
    from playwright.sync_api import sync_playwright

    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
            )
            page = browser.new_page()
            page.goto(f"{base_url}/admin/login/?next=/admin/")
            page.fill("#id_username", "librarian")
            page.fill("#id_password", "correct horse")
            page.click("input[type=submit]")
            page.wait_for_url(f"{base_url}/admin/")
            page.click("text=Conversations")
            page.click("text=browser-thread")
            page.wait_for_url(f"**/conversation/{conversation_pk}/change/")
            result["messages"] = page.locator(".anvia-message .anvia-text").all_inner_texts()
            result["title"] = page.title()
            browser.close()
    except BaseException as error:  # reported on the test's thread
        result["error"] = error


@pytest.mark.django_db(transaction=True)
def test_a_staff_member_reads_a_conversation_in_the_admin(live_server: Any) -> None:
    User.objects.create_superuser("librarian", password="correct horse")
    append_messages(append_input("browser-thread", [user("Is the café open on Sunday?")]))
    append_messages(append_input("browser-thread", [assistant("Yes, from 9 to 17.")], turn=2))
    conversation = Conversation.objects.get()

    result: dict[str, Any] = {}
    worker = threading.Thread(
        target=read_transcript, args=(live_server.url, conversation.pk, result)
    )
    worker.start()
    worker.join(timeout=120)
    assert not worker.is_alive(), "the browser did not finish in time"
    if "error" in result:
        raise result["error"]
    assert result["messages"] == ["Is the café open on Sunday?", "Yes, from 9 to 17."]
    assert "browser-thread" in result["title"]
