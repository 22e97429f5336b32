"""A real browser finds a LangGraph thread in the admin and reads a
checkpoint: its messages as a transcript, another channel's value and a
pending write, decoded."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import async_to_sync

from anvia_django.integrations.langgraph import DjangoSaver
from anvia_django.integrations.langgraph.models import LangGraphCheckpoint
from tests.browser_support import (
    BROWSER_MARKS,
    create_demo_account,
    log_in_as_demo,
    run_in_browser,
)

from .langgraph_support import chat_graph, thread

pytestmark = BROWSER_MARKS


def read_thread(thread_id: str) -> Any:
    def walk(browser: Any, base_url: str) -> dict[str, Any]:
        page = browser.new_page()
        log_in_as_demo(page, base_url)  # staff with the app's view permissions
        page.click("text=LangGraph checkpoints")
        page.fill("#searchbar", thread_id)
        page.press("#searchbar", "Enter")
        page.wait_for_url(f"**?q={thread_id}")
        rows = page.locator("#result_list tbody tr")
        seen: dict[str, Any] = {"rows": rows.count()}
        rows.first.locator("th a").click()  # the newest
        page.wait_for_selector(".field-channel_values")
        seen["transcript"] = page.locator(".anvia-transcript p").all_inner_texts()
        seen["page"] = page.locator("#content").inner_text()
        return seen

    return walk


@pytest.mark.django_db(transaction=True)
def test_a_thread_reads_in_the_admin(live_server: Any) -> None:
    create_demo_account()
    graph = chat_graph(DjangoSaver(), review=True)
    async_to_sync(graph.ainvoke)({"messages": [("user", "refund order 42")]}, thread("t-browser"))
    latest = LangGraphCheckpoint.objects.filter(thread_id="t-browser").order_by("-checkpoint_id")[0]

    seen = run_in_browser(read_thread("t-browser"), live_server.url)

    assert seen["rows"] == LangGraphCheckpoint.objects.filter(thread_id="t-browser").count()
    assert seen["transcript"] == ["human refund order 42", "ai reply 1"]
    # The interrupt waiting for a human, a pending write of the newest checkpoint.
    assert "__interrupt__" in seen["page"]
    assert "send this reply?" in seen["page"]
    assert latest.checkpoint_id in seen["page"]
