"""The admin as a support tool: previews, failure markers, titles, links
between pages, anchors per message, and the summaries list."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.db import connection
from django.test import Client, override_settings
from django.test.utils import CaptureQueriesContext

from anvia_django.admin.previews import preview
from anvia_django.core.memory import MemoryContext, MemoryErrorInput
from anvia_django.core.memory.validation import dumps
from anvia_django.models import AgentRun, Conversation, MemoryMessage, MemorySummary
from anvia_django.persistence import append_messages, record_failed_run

from .helpers import append_input, assistant, user
from .inspector_data import make_conversations, make_messages
from .inspector_records import make_forks, make_runs, make_summaries

pytestmark = pytest.mark.django_db

CONVERSATIONS = "/admin/anvia_django/conversation/"
MESSAGES = "/admin/anvia_django/memorymessage/"
SUMMARIES = "/admin/anvia_django/memorysummary/"


def staff_with(*models: str) -> Client:
    """A staff member holding the view permission of ``models`` only."""
    staff, _ = User.objects.get_or_create(
        username=f"staff-{'-'.join(models) or 'none'}", defaults={"is_staff": True}
    )
    staff.user_permissions.set(
        Permission.objects.filter(
            content_type__app_label="anvia_django",
            codename__in=[f"view_{model}" for model in models],
        )
    )
    client = Client()
    client.force_login(staff)
    return client


def every_view() -> Client:
    return staff_with("conversation", "memorymessage", "failedrun", "agentrun", "memorysummary")


def transcript(conversation: Conversation) -> str:
    return f"{CONVERSATIONS}{conversation.pk}/change/"


def html(client: Client, url: str, **params: Any) -> str:
    response = client.get(url, params)
    assert response.status_code == 200, response.status_code
    return response.content.decode()


# --- the conversation list ---------------------------------------------------


def test_the_list_previews_the_first_user_message_and_marks_failed_runs() -> None:
    append_messages(
        append_input(
            "order-thread",
            [{"role": "system", "content": "Be brief."}, user("Where is\n order 1042?")],
        )
    )
    append_messages(append_input("calm-thread", [user("Hello there")]))
    append_messages(append_input("silent-thread", [assistant("Nobody asked.")]))
    record_failed_run(
        MemoryErrorInput(MemoryContext("order-thread"), "run-x", RuntimeError("down"), [])
    )
    page = html(every_view(), CONVERSATIONS)
    assert "Where is order 1042?" in page  # the user message, not the system one, on one line
    assert "Hello there" in page
    assert page.count("⚠ failed") == 1
    failed_only = html(every_view(), CONVERSATIONS, failed="yes")
    assert "order-thread" in failed_only
    assert "calm-thread" not in failed_only
    assert "order-thread" not in html(every_view(), CONVERSATIONS, failed="no")


def test_a_long_first_message_is_shortened() -> None:
    append_messages(append_input("long-thread", [user("word " * 5_000)]))
    page = html(every_view(), CONVERSATIONS)
    assert ("word " * 15).strip() in page
    assert "word " * 100 not in page
    assert "…" in page


def test_the_list_costs_the_same_queries_for_50_rows_as_for_3(
    django_assert_num_queries: Any,
) -> None:
    client = every_view()
    few = make_conversations(3, prefix="few")
    for conversation in few:
        make_messages(conversation, 4)
        record_failed_run(
            MemoryErrorInput(MemoryContext(conversation.session_id), "r", RuntimeError("x"), [])
        )
    client.get(CONVERSATIONS)  # warm the content type and permission caches
    with CaptureQueriesContext(connection) as captured:
        assert client.get(CONVERSATIONS).status_code == 200
    queries = len(captured.captured_queries)
    for conversation in make_conversations(47, prefix="many"):
        make_messages(conversation, 4)
    with django_assert_num_queries(queries):
        page = client.get(CONVERSATIONS)
    assert page.content.decode().count("message number 0") == 50


@pytest.mark.parametrize(
    ("stored", "shown"),
    [
        ({"role": "user", "content": "Plain text"}, "Plain text"),
        ({"role": "user", "content": [{"type": "text", "text": "A part"}]}, "A part"),
        ({"role": "user", "content": None}, ""),
        ({"role": "user", "content": 'é\u2028😀 "quoted"\n\tnext'}, 'é 😀 "quoted" next'),
    ],
)
def test_previews_read_the_message_text(stored: dict[str, Any], shown: str) -> None:
    assert preview(dumps(stored)) == shown


@pytest.mark.parametrize("cut", range(20, 60))
def test_a_preview_of_a_cut_json_text_never_fails(cut: int) -> None:
    text = dumps({"role": "user", "content": 'Ünïcode \\ "escapes" 😀\u0001 and more text here'})
    shown = preview(text[:cut])
    assert shown == shown.encode("utf-8").decode("utf-8")  # no lone surrogate halves
    assert 'Ünïcode \\ "escapes" 😀\u0001 and more text here'.startswith(shown.rstrip("…"))


# --- the message list and page -----------------------------------------------


@override_settings(ANVIA_DJANGO={"ADMIN_TRANSCRIPT_PAGE_SIZE": 10})
def test_messages_are_titled_by_session_and_link_to_their_place() -> None:
    (conversation,) = make_conversations(1, prefix="titled")
    make_messages(conversation, 30)
    message = MemoryMessage.objects.select_related("conversation").get(position=23)
    assert str(message) == "titled-0 · #23 assistant"
    listing = html(every_view(), MESSAGES)
    # The first column links to the message and says so.
    change = f"{MESSAGES}{message.pk}/change/"
    assert f'<a href="{change}">titled-0 · #23 assistant</a>' in listing
    assert f'href="{transcript(conversation)}"' in listing
    page = html(every_view(), change)
    assert "titled-0 · #23 assistant" in page
    assert f'href="{transcript(conversation)}?page=3#m-23"' in page


def test_a_message_without_its_conversation_loaded_names_it_without_a_query(
    django_assert_num_queries: Any,
) -> None:
    (conversation,) = make_conversations(1, prefix="bare")
    make_messages(conversation, 1)
    message = MemoryMessage.objects.get()
    with django_assert_num_queries(0):
        assert str(message) == f"conversation {conversation.pk} · #0 user"


def test_the_role_filter_lists_one_role() -> None:
    append_messages(append_input("roles", [user("question?"), assistant("answer!")]))
    client = every_view()
    users = html(client, MESSAGES, role="user")
    assert "#0 user" in users
    assert "#1 assistant" not in users
    assistants = html(client, MESSAGES, role="assistant")
    assert "#1 assistant" in assistants
    assert "#0 user" not in assistants


# --- the transcript page -----------------------------------------------------


@override_settings(ANVIA_DJANGO={"ADMIN_TRANSCRIPT_PAGE_SIZE": 10})
def test_every_message_has_an_anchor_on_its_page() -> None:
    (conversation,) = make_conversations(1, prefix="anchors")
    make_messages(conversation, 25)
    page = html(every_view(), transcript(conversation), page=3)
    for position in range(20, 25):
        assert f'id="m-{position}"' in page
        assert f'href="#m-{position}"' in page
    assert 'id="m-19"' not in page


def test_run_ids_link_to_their_run_records() -> None:
    append_messages(append_input("ran", [user("Hi")], run_id="run-0"))
    conversation = Conversation.objects.get()
    make_runs(conversation, 1)
    run = AgentRun.objects.get()
    link = f'href="/admin/anvia_django/agentrun/{run.pk}/change/"'
    page = html(every_view(), transcript(conversation))
    assert page.count(link) == 2  # the run marker in the transcript and the runs table
    # Without the runs' view permission there is nothing to link to.
    assert link not in html(staff_with("conversation"), transcript(conversation))


def test_a_fork_links_to_the_conversation_it_came_from_and_back() -> None:
    (source,) = make_conversations(1, prefix="origin")
    make_forks(source, 2)
    fork = Conversation.objects.get(session_id="origin-0-fork-1")
    page = html(every_view(), transcript(fork))
    assert f'<a href="{transcript(source)}">origin-0</a>' in page
    assert "after its first 1 message." in page
    back = html(every_view(), transcript(source))
    assert f'<a href="{transcript(fork)}">origin-0-fork-1</a>' in back


def test_a_fork_of_a_deleted_conversation_says_so() -> None:
    (source,) = make_conversations(1, prefix="gone")
    make_forks(source, 1)
    fork = Conversation.objects.get(session_id="gone-0-fork-0")
    Conversation.objects.filter(pk=source.pk).delete()
    page = html(every_view(), transcript(fork))
    assert "a deleted conversation" in page
    assert "before its first message" in page


# --- summaries ---------------------------------------------------------------


def test_every_summary_is_listed_page_by_page() -> None:
    (conversation,) = make_conversations(1, prefix="compacted")
    covered = make_summaries(conversation, 120)
    client = every_view()
    page = html(client, transcript(conversation))
    assert f'href="{SUMMARIES}?conversation__id__exact={conversation.pk}"' in page
    first = html(client, SUMMARIES, conversation__id__exact=conversation.pk)
    second = html(client, SUMMARIES, conversation__id__exact=conversation.pk, p=2)
    shown = [k for k in covered if f"covers #0 to #{k}<" in first + second]
    assert shown == covered
    assert "Summary through 1190." in first  # newest first


def test_the_summaries_list_needs_its_view_permission() -> None:
    (conversation,) = make_conversations(1, prefix="private")
    make_summaries(conversation, 1)
    client = staff_with("conversation")
    assert client.get(SUMMARIES).status_code == 403
    page = html(client, transcript(conversation))
    assert "Summary through 0." in page  # shown on the transcript page itself
    assert SUMMARIES not in page
    assert MemorySummary.objects.count() == 1


@pytest.mark.parametrize(
    ("url", "make"),
    [
        (SUMMARIES, make_summaries),
        ("/admin/anvia_django/agentrun/", make_runs),
        (MESSAGES, make_messages),
    ],
)
def test_record_lists_cost_the_same_queries_for_many_rows_as_for_few(
    django_assert_num_queries: Any, url: str, make: Any
) -> None:
    client = every_view()
    few, many = make_conversations(2, prefix="rows")
    make(few, 3)
    client.get(url)  # warm the content type and permission caches
    with CaptureQueriesContext(connection) as captured:
        assert client.get(url).status_code == 200
    make(many, 90)
    with django_assert_num_queries(len(captured.captured_queries)):
        page = client.get(url)
    assert page.content.decode().count("rows-1") >= 90  # the rows are on the page
