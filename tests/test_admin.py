"""The read-only admin: who may see what, and a transcript page that scales."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib import admin
from django.contrib.admin.utils import get_deleted_objects
from django.contrib.auth.models import Permission, User
from django.db import connection
from django.test import Client, RequestFactory, override_settings
from django.test.utils import CaptureQueriesContext
from django.urls import resolve
from django.utils import timezone

from anvia_django.core.memory import MemoryContext, MemoryErrorInput
from anvia_django.models import Conversation, FailedRun, MemoryMessage
from anvia_django.persistence import append_messages, record_failed_run

from .helpers import append_input
from .inspector_data import make_conversations, make_messages

pytestmark = pytest.mark.django_db

TOOL_TURN: list[dict[str, Any]] = [
    {"role": "user", "content": "Where is order <42>?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "call_1", "name": "lookup_order", "arguments": {"order_id": 42}}],
    },
    {
        "role": "tool",
        "tool_call_id": "call_1",
        "name": "lookup_order",
        "content": {"status": "shipped", "carrier": "Ça Va Vite"},
    },
    {"role": "assistant", "content": [{"type": "text", "text": "It shipped."}]},
]

MODELS = {"conversation": Conversation, "memorymessage": MemoryMessage, "failedrun": FailedRun}


def viewer() -> Client:
    """A staff member with view permission only."""
    staff = User.objects.create_user("viewer", password="pw", is_staff=True)
    staff.user_permissions.set(
        Permission.objects.filter(
            content_type__app_label="anvia_django", codename__startswith="view_"
        )
    )
    client = Client()
    client.force_login(staff)
    return client


def superuser() -> Client:
    client = Client()
    client.force_login(User.objects.create_superuser("root", password="pw"))
    return client


@pytest.fixture
def conversation() -> Conversation:
    append_messages(append_input("thread-1", TOOL_TURN[:2], user_id="u1", metadata={"a": 1}))
    append_messages(append_input("thread-1", TOOL_TURN[2:], turn=2, user_id="u1"))
    record_failed_run(
        MemoryErrorInput(MemoryContext("thread-1"), "run-9", RuntimeError("model down"), [])
    )
    return Conversation.objects.get()


def urls(conversation: Conversation) -> dict[str, str]:
    message = MemoryMessage.objects.filter(conversation=conversation).first()
    failed = FailedRun.objects.get()
    assert message is not None
    return {
        "index": "/admin/anvia_django/",
        "conversations": "/admin/anvia_django/conversation/",
        "conversation": f"/admin/anvia_django/conversation/{conversation.pk}/change/",
        "messages": "/admin/anvia_django/memorymessage/",
        "message": f"/admin/anvia_django/memorymessage/{message.pk}/change/",
        "failed_runs": "/admin/anvia_django/failedrun/",
        "failed_run": f"/admin/anvia_django/failedrun/{failed.pk}/change/",
    }


@pytest.mark.parametrize("make_client", [viewer, superuser])
def test_staff_with_view_permission_browse_every_page(
    conversation: Conversation, make_client: Any
) -> None:
    client = make_client()
    for name, url in urls(conversation).items():
        response = client.get(url)
        assert response.status_code == 200, name
    assert b"thread-1" in client.get(urls(conversation)["conversations"]).content


def test_staff_without_view_permission_and_non_staff_are_refused(
    conversation: Conversation,
) -> None:
    bare_staff = Client()
    bare_staff.force_login(User.objects.create_user("bare", is_staff=True))
    plain = Client()
    plain.force_login(User.objects.create_user("plain"))
    for url in urls(conversation).values():
        assert bare_staff.get(url).status_code in (403, 404)
        assert plain.get(url).status_code == 302  # to the admin login
        assert b"thread-1" not in plain.get(url).content


@pytest.mark.parametrize("make_client", [viewer, superuser])
def test_nobody_adds_changes_or_deletes(conversation: Conversation, make_client: Any) -> None:
    client = make_client()
    objects = {
        "conversation": conversation,
        "memorymessage": MemoryMessage.objects.first(),
        "failedrun": FailedRun.objects.first(),
    }
    for name, obj in objects.items():
        assert obj is not None
        base = f"/admin/anvia_django/{name}/"
        assert client.get(f"{base}add/").status_code == 403
        assert client.post(f"{base}add/", {}).status_code == 403
        assert client.get(f"{base}{obj.pk}/delete/").status_code == 403
        assert client.post(f"{base}{obj.pk}/delete/", {"post": "yes"}).status_code == 403
        change = client.post(f"{base}{obj.pk}/change/", {"session_id": "hijacked"})
        assert change.status_code == 403
        bulk = client.post(base, {"action": "delete_selected", "_selected_action": [obj.pk]})
        assert bulk.status_code in (200, 302)
        assert b"delete_selected" not in client.get(base).content
    assert Conversation.objects.get().session_id == "thread-1"
    assert MemoryMessage.objects.count() == 4
    assert FailedRun.objects.count() == 1


def test_cascades_from_elsewhere_are_not_blocked(conversation: Conversation) -> None:
    root = User.objects.create_superuser("root2")
    # A delete page of another app: our rows may go with its objects.
    elsewhere = RequestFactory().post(f"/admin/auth/user/{root.pk}/delete/")
    elsewhere.user = root
    elsewhere.resolver_match = resolve(f"/admin/auth/user/{root.pk}/delete/")
    _, _, perms_needed, _ = get_deleted_objects([conversation], elsewhere, admin.site)
    assert perms_needed == set()
    own = RequestFactory().post(f"/admin/anvia_django/conversation/{conversation.pk}/delete/")
    own.user = root
    own.resolver_match = resolve(own.path)
    _, _, perms_needed, _ = get_deleted_objects([conversation], own, admin.site)
    assert "conversation" in perms_needed
    conversation.delete()
    assert MemoryMessage.objects.count() == FailedRun.objects.count() == 0


def test_the_changelist_shows_the_stored_columns(conversation: Conversation) -> None:
    content = viewer().get("/admin/anvia_django/conversation/").content.decode()
    for column in ("column-session_id", "column-user_id", "column-message_count"):
        assert column in content
    assert "column-created_at" in content
    assert "column-updated_at" in content
    assert '<td class="field-message_count">4</td>' in content


def test_the_changelist_searches_and_filters(conversation: Conversation) -> None:
    make_conversations(3, user_id="zed", prefix="other")
    client = viewer()
    by_session = client.get("/admin/anvia_django/conversation/", {"q": "thread"}).content
    assert b"thread-1" in by_session
    assert b"other-0" not in by_session
    by_user = client.get("/admin/anvia_django/conversation/", {"q": "zed"}).content
    assert b"other-0" in by_user
    assert b"thread-1" not in by_user
    # The "Today" choice of the date filter, as DateFieldListFilter links it.
    today = timezone.localtime().replace(hour=0, minute=0, second=0, microsecond=0)
    dated = client.get(
        "/admin/anvia_django/conversation/",
        {"updated_at__gte": str(today), "updated_at__lt": str(today + timedelta(days=1))},
    ).content
    assert b"thread-1" in dated
    assert b"other-0" not in dated


def test_the_conversation_page_reads_like_a_transcript(conversation: Conversation) -> None:
    content = viewer().get(urls(conversation)["conversation"]).content.decode()
    assert "Transcript" in content
    # Text as text (escaped), in position order, with role, turn and run.
    assert "Where is order &lt;42&gt;?" in content
    assert "<42>" not in content
    assert (
        content.index("Where is order")
        < content.index("lookup_order")
        < content.index("It shipped.")
    )
    assert "Run run-1" in content
    assert "turn 2" in content
    for position in range(4):
        assert f'id="message-{position}"' in content
    # Tool calls and structured tool results as indented JSON.
    assert "tool calls" in content
    assert "&quot;order_id&quot;: 42" in content
    assert "&quot;carrier&quot;: &quot;Ça Va Vite&quot;" in content
    # Its failed runs.
    assert "Failed runs" in content
    assert "model down" in content
    assert "RuntimeError" in content


@override_settings(ANVIA_DJANGO={"ADMIN_TRANSCRIPT_PAGE_SIZE": 10})
def test_long_transcripts_are_paged() -> None:
    [conversation] = make_conversations(1)
    make_messages(conversation, 25)
    client = viewer()
    url = f"/admin/anvia_django/conversation/{conversation.pk}/change/"
    first = client.get(url).content.decode()
    assert "message number 0<" in first
    assert "message number 9<" in first
    assert "message number 10<" not in first
    assert "page 1 of 3" in first
    last = client.get(url, {"page": "3"}).content.decode()
    assert "message number 20<" in last
    assert "message number 24<" in last
    assert "message number 19<" not in last
    assert "Messages 21\u201325 of 25" in last
    for junk in ("0", "-1", "x", "99"):
        assert client.get(url, {"page": junk}).status_code == 200


def test_page_query_counts_do_not_grow_with_rows() -> None:
    client = viewer()
    small, big = make_conversations(2, prefix="size")
    make_messages(small, 5)
    make_messages(big, 2_000)
    for failed in range(30):
        FailedRun.objects.create(
            conversation=big, run_id=f"f{failed}", error_type="E", created_at=big.updated_at
        )

    def count(url: str) -> int:
        client.get(url)  # warm caches (content types, permissions)
        with CaptureQueriesContext(connection) as captured:
            assert client.get(url).status_code == 200
        return len(captured.captured_queries)

    transcript = "/admin/anvia_django/conversation/{}/change/"
    assert count(transcript.format(small.pk)) == count(transcript.format(big.pk))
    assert count(transcript.format(big.pk) + "?page=20") == count(transcript.format(small.pk))
    listing = count("/admin/anvia_django/conversation/")
    messages = count("/admin/anvia_django/memorymessage/")
    failed = count("/admin/anvia_django/failedrun/")
    make_conversations(500, prefix="more")
    make_messages(Conversation.objects.get(session_id="more-0"), 500)
    assert count("/admin/anvia_django/conversation/") == listing
    assert count("/admin/anvia_django/memorymessage/") == messages
    assert count("/admin/anvia_django/failedrun/") == failed


def test_message_and_failed_run_pages_show_pretty_json(conversation: Conversation) -> None:
    client = viewer()
    page = client.get(urls(conversation)["message"]).content.decode()
    assert "&quot;role&quot;: &quot;user&quot;" in page
    failed = client.get(urls(conversation)["failed_run"]).content.decode()
    assert "Traceback" in failed
    assert "model down" in failed


def test_failed_runs_of_a_conversation_can_be_listed(conversation: Conversation) -> None:
    response = viewer().get(
        "/admin/anvia_django/failedrun/", {"conversation__id__exact": conversation.pk}
    )
    assert response.status_code == 200
    assert b"run-9" in response.content


def test_failed_runs_on_the_transcript_need_their_own_view_permission(
    conversation: Conversation,
) -> None:
    from django.contrib.auth.models import Permission

    staff = User.objects.create_user("transcripts-only", is_staff=True)
    staff.user_permissions.add(Permission.objects.get(codename="view_conversation"))
    client = Client()
    client.force_login(staff)
    page = client.get(urls(conversation)["conversation"])
    assert page.status_code == 200
    assert b"model down" not in page.content
    staff.user_permissions.add(Permission.objects.get(codename="view_failedrun"))
    client.force_login(User.objects.get(pk=staff.pk))
    assert b"model down" in client.get(urls(conversation)["conversation"]).content


@pytest.mark.postgres
def test_unfiltered_lists_of_huge_tables_use_the_planner_estimate(
    conversation: Conversation, monkeypatch: pytest.MonkeyPatch
) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from anvia_django.admin import counting

    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {MemoryMessage._meta.db_table}")
    monkeypatch.setattr(counting, "ESTIMATE_ABOVE", -1)
    client = viewer()
    with CaptureQueriesContext(connection) as queries:
        assert client.get(urls(conversation)["messages"]).status_code == 200
    counts = [q["sql"] for q in queries if "COUNT(" in q["sql"].upper()]
    assert not any(MemoryMessage._meta.db_table in sql for sql in counts)
    # A search is filtered, so it is counted exactly.
    with CaptureQueriesContext(connection) as queries:
        client.get(urls(conversation)["messages"], {"q": "run-1"})
    assert any("COUNT(" in q["sql"].upper() for q in queries)
