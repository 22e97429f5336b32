"""A real browser opens a Pydantic AI conversation in the admin: the tool
call with its arguments, the retry prompt, the tool return, thinking
collapsed until opened, and the image as a thumbnail that loads."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User

from anvia_django.models import Conversation
from tests.browser_support import BROWSER_MARKS, run_in_browser

pytest.importorskip("pydantic_ai")

from .pydantic_ai_conversation import label_run

pytestmark = BROWSER_MARKS


def read_conversation(conversation_pk: int) -> Any:
    def walk(browser: Any, base_url: str) -> dict[str, Any]:
        page = browser.new_page()
        page.goto(f"{base_url}/admin/login/?next=/admin/")
        page.fill("#id_username", "librarian")
        page.fill("#id_password", "correct horse")
        page.click("input[type=submit]")
        page.wait_for_url(f"{base_url}/admin/")
        page.goto(f"{base_url}/admin/anvia_django/conversation/{conversation_pk}/change/")
        parts = page.locator(".anvia-part")
        thinking = page.locator(".anvia-part-thinking .anvia-text")
        seen = {
            "labels": page.locator(".anvia-part > .anvia-part-label").all_inner_texts(),
            "texts": page.locator(".anvia-part > .anvia-text").all_inner_texts(),
            "arguments": page.locator(".anvia-part-tool-call pre").all_inner_texts(),
            "parts": parts.count(),
            "thinking_visible_before": thinking.is_visible(),
        }
        page.click(".anvia-part-thinking summary")
        seen["thinking_visible_after"] = thinking.is_visible()
        seen["thinking"] = thinking.inner_text()
        thumbnails = page.locator("img.anvia-thumb")
        thumbnails.first.scroll_into_view_if_needed()
        page.wait_for_function(
            "() => [...document.querySelectorAll('img.anvia-thumb')]"
            ".every(img => img.complete && img.naturalWidth > 0)"
        )
        seen["thumbnail_widths"] = thumbnails.evaluate_all("imgs => imgs.map(i => i.naturalWidth)")
        return seen

    return walk


@pytest.mark.django_db(transaction=True)
def test_a_pydantic_ai_conversation_reads_in_the_admin(live_server: Any) -> None:
    User.objects.create_superuser("librarian", password="correct horse")
    label_run("browser-pydantic-ai")
    conversation = Conversation.objects.get(session_id="browser-pydantic-ai")

    seen = run_in_browser(read_conversation(conversation.pk), live_server.url)

    labels = seen["labels"]
    assert "tool call lookup (call-1)" in labels
    assert "retry prompt for lookup (call-1)" in labels
    assert "tool return lookup (call-2)" in labels
    assert "Give the order number without letters." in seen["texts"]
    assert "Order 42: shipped, tracking 1Z999." in seen["texts"]
    assert any('"order": "A-42"' in arguments for arguments in seen["arguments"])
    assert (seen["thinking_visible_before"], seen["thinking_visible_after"]) == (False, True)
    assert seen["thinking"].startswith("The photo shows a shipping label")
    assert seen["thumbnail_widths"] == [600, 32]
