"""One real browser: headless Debian Chromium logs into the admin and reads
a transcript. Never downloads a browser; skipped without one."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User

from anvia_django.models import Conversation
from anvia_django.persistence import append_messages

from .browser_support import BROWSER_MARKS, run_in_browser
from .helpers import append_input, assistant, user

pytestmark = BROWSER_MARKS


def read_transcript(conversation_pk: int) -> Any:
    def walk(browser: Any, base_url: str) -> dict[str, Any]:
        page = browser.new_page()
        page.goto(f"{base_url}/admin/login/?next=/admin/")
        page.fill("#id_username", "librarian")
        page.fill("#id_password", "correct horse")
        page.click("input[type=submit]")
        page.wait_for_url(f"{base_url}/admin/")
        page.click("text=Conversations")
        page.click("text=browser-thread")
        page.wait_for_url(f"**/conversation/{conversation_pk}/change/")
        return {
            "messages": page.locator(".anvia-message .anvia-text").all_inner_texts(),
            "title": page.title(),
        }

    return walk


@pytest.mark.django_db(transaction=True)
def test_a_staff_member_reads_a_conversation_in_the_admin(live_server: Any) -> None:
    User.objects.create_superuser("librarian", password="correct horse")
    append_messages(append_input("browser-thread", [user("Is the café open on Sunday?")]))
    append_messages(append_input("browser-thread", [assistant("Yes, from 9 to 17.")], turn=2))
    conversation = Conversation.objects.get()

    result = run_in_browser(read_transcript(conversation.pk), live_server.url)
    assert result["messages"] == ["Is the café open on Sunday?", "Yes, from 9 to 17."]
    assert "browser-thread" in result["title"]
