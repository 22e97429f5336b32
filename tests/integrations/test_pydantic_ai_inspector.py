"""Pydantic AI conversations in the admin and the API: parts rendered
readably, binary content as thumbnails and links, never inline."""

from __future__ import annotations

import base64
import re

import pytest
from django.contrib.auth.models import User
from django.test import Client
from rest_framework.test import APIClient

from anvia_django.core.memory.types import MemoryAppendInput, MemoryContext, MemoryErrorInput
from anvia_django.integrations.pydantic_ai.display import shown_parts
from anvia_django.models import Conversation, FailedRun, MemoryMessage
from anvia_django.persistence import append_messages, record_failed_run

pytest.importorskip("pydantic_ai")

from pydantic_ai.messages import BinaryContent, ModelRequest, UserPromptPart

from anvia_django.integrations.pydantic_ai import messages_to_stored

from .pydantic_ai_conversation import LABEL, PHOTO, label_run

pytestmark = pytest.mark.django_db

PHOTO_BASE64 = base64.urlsafe_b64encode(PHOTO).decode()[:200]


@pytest.fixture
def admin_client() -> Client:
    client = Client()
    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
    return client


def test_the_admin_transcript_shows_each_part_readably(admin_client: Client) -> None:
    label_run("s")
    conversation = Conversation.objects.get(session_id="s")

    page = admin_client.get(f"/admin/anvia_django/conversation/{conversation.pk}/change/")

    html = page.content.decode()
    assert page.status_code == 200
    assert "tool call lookup (call-1)" in html
    assert "&quot;order&quot;: &quot;A-42&quot;" in html  # the arguments, as JSON
    assert "retry prompt for lookup (call-1)" in html
    assert "Give the order number without letters." in html
    assert "tool return lookup (call-2)" in html
    assert "Order 42: shipped, tracking 1Z999." in html
    thinking = re.search(r"<details><summary[^>]*>thinking</summary>\s*<div[^>]*>([^<]*)", html)
    assert thinking is not None
    assert thinking.group(1) == "The photo shows a shipping label; look the order up."
    thumbnails = re.findall(r'<img class="anvia-thumb" src="([^"]+)"', html)
    base = f"/admin/anvia_django/conversation/{conversation.pk}/media/0/0/"
    assert thumbnails == [f"{base}?item=1", f"{base}?item=2"]
    assert PHOTO_BASE64 not in html
    assert len(page.content) < 100_000


def test_the_admin_serves_an_image_as_itself_and_anything_else_as_a_download(
    admin_client: Client,
) -> None:
    label_run("s")
    pk = Conversation.objects.get(session_id="s").pk
    svg = b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>'
    request = ModelRequest(
        parts=[UserPromptPart([BinaryContent(data=svg, media_type="image/svg+xml"), "x"])]
    )
    context = MemoryContext("s", user_id="u1")
    append_messages(MemoryAppendInput(context, "r2", 1, messages_to_stored([request])))
    position = Conversation.objects.get(pk=pk).message_count - 1
    base = f"/admin/anvia_django/conversation/{pk}/media"

    image = admin_client.get(f"{base}/0/0/?item=2")
    assert (image.status_code, image["Content-Type"]) == (200, "image/png")
    assert image.content == LABEL
    assert image["X-Content-Type-Options"] == "nosniff"

    script = admin_client.get(f"{base}/{position}/0/?item=0")
    assert script["Content-Type"] == "application/octet-stream"
    assert script["Content-Disposition"].startswith("attachment")
    assert script.content == svg

    for missing in (f"{base}/0/0/?item=0", f"{base}/0/5/", f"{base}/99/0/", f"{base}/0/0/?item=x"):
        assert admin_client.get(missing).status_code == 404

    staff = Client()
    staff.force_login(User.objects.create_user("nobody", is_staff=True))
    assert staff.get(f"{base}/0/0/?item=2").status_code in (302, 403, 404)


def test_the_message_and_failed_run_pages_give_the_size_of_binary_data(
    admin_client: Client,
) -> None:
    label_run("s")
    message = MemoryMessage.objects.get(conversation__session_id="s", position=0)
    context = MemoryContext("s", user_id="u1")
    # The same image, among a failed run's messages.
    record_failed_run(
        MemoryErrorInput(context, "failed-1", RuntimeError("boom"), [message.message])
    )
    failed = FailedRun.objects.get()

    for url in (
        f"/admin/anvia_django/memorymessage/{message.pk}/change/",
        f"/admin/anvia_django/failedrun/{failed.pk}/change/",
        f"/admin/anvia_django/conversation/{message.conversation_id}/change/",
    ):
        html = admin_client.get(url).content.decode()
        assert PHOTO_BASE64 not in html, url
        assert f"&lt;{len(PHOTO)} bytes&gt;" in html or "anvia-thumb" in html, url


def api_client() -> APIClient:
    client = APIClient()
    client.force_authenticate(User.objects.create_user("staff", is_staff=True))
    return client


def test_the_api_links_binary_data_instead_of_inlining_it() -> None:
    label_run("s")
    ref = Conversation.objects.get(session_id="s").ref
    client = api_client()

    response = client.get(f"/anvia/api/conversations/{ref}/messages/")

    assert len(response.content) < 20_000
    prompt = response.json()[0]["message"]["pydantic_ai"]["message"]["parts"][0]["content"]
    photo, label = prompt[1], prompt[2]
    assert (photo["data"], photo["dataOmitted"]) == (None, len(PHOTO))
    assert photo["dataUrl"].endswith(f"/anvia/api/conversations/{ref}/messages/0/media/0/?item=1")
    # Small enough to stay inline.
    assert base64.urlsafe_b64decode(label["data"]) == LABEL
    assert "dataUrl" not in label

    image = client.get(photo["dataUrl"], HTTP_ACCEPT="image/avif,image/webp,image/*,*/*;q=0.8")
    assert (image.status_code, image["Content-Type"]) == (200, "image/png")
    assert image.content == PHOTO
    # The conversation's own page does the same.
    whole = client.get(f"/anvia/api/conversations/{ref}/").json()
    assert whole["messages"][0]["message"] == response.json()[0]["message"]


def test_the_api_media_answers_404_in_json_and_only_to_the_owner(default_scope: None) -> None:
    label_run("s", user_id="alice")
    ref = Conversation.objects.get(session_id="s").ref
    client = api_client()

    missing = client.get(f"/anvia/api/conversations/{ref}/messages/0/media/9/")
    assert missing.status_code == 404
    assert missing["Content-Type"] == "application/json"

    anonymous = APIClient().get(f"/anvia/api/conversations/{ref}/messages/0/media/0/?item=1")
    assert anonymous.status_code in (401, 403)
    assert anonymous.content != PHOTO


def test_every_part_kind_has_a_readable_form() -> None:
    from .test_pydantic_ai_stored_form import FORMAT_1_MESSAGES

    shown = [
        (part.kind, part.label)
        for stored in messages_to_stored(FORMAT_1_MESSAGES)
        for part in shown_parts(stored) or []
    ]

    assert shown == [
        ("system", "system prompt"),
        ("text", "user prompt"),
        ("media", "user prompt: image/png"),
        ("link", "image-url"),
        ("link", "document-url"),
        ("media", "user prompt: application/pdf"),
        ("thinking", "thinking"),
        ("text", "text"),
        ("tool-call", "tool call lookup (call-1)"),
        ("tool-call", "built-in tool call web_search (web-1)"),
        ("tool-return", "built-in tool return web_search (web-1)"),
        ("tool-return", "tool return lookup (call-1)"),
        ("retry", "retry prompt for lookup (call-2)"),
        ("retry", "retry prompt"),
        ("other", "tool-availability-delta"),
        ("text", "speech"),
        ("media", "file: image/png"),
        ("compaction", "compaction summary"),
        ("text", "text"),
    ]
    assert shown_parts({"role": "user", "content": "Hi"}) is None
