"""The example project: settings, the demo agent, its chat page, its commands,
and the demo seeding read back through the inspector API."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client
from django.test.utils import modify_settings, override_settings

from anvia_django.core.memory import MemoryContext
from anvia_django.models import Conversation, FailedRun
from anvia_django.persistence import load_messages
from example_project import settings as example_settings
from example_project.demo import agent as demo_agent_module
from example_project.demo import views
from example_project.demo.management.commands import demo_setup, seed_demo
from example_project.demo.offline_model import OfflineSupportModel
from example_project.demo.seeding import SCRIPTS, seed
from tests.helpers import append_input, user

ROOT = Path(__file__).resolve().parent.parent

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.usefixtures("example_project"),
]


@pytest.fixture
def example_project() -> Any:
    with (
        modify_settings(INSTALLED_APPS={"append": "example_project.demo"}),
        override_settings(ROOT_URLCONF="example_project.urls"),
    ):
        yield


def seed_demo_conversations() -> str:
    from io import StringIO

    out = StringIO()
    call_command(seed_demo.Command(), stdout=out)
    return out.getvalue()


def staff_client() -> Client:
    staff = get_user_model().objects.create_user("staff", password="pw", is_staff=True)
    client = Client()
    client.force_login(staff)
    return client


# --- settings ----------------------------------------------------------------


def test_sqlite_by_default_in_the_documented_mode() -> None:
    database = example_settings.databases(None)["default"]
    assert database["ENGINE"] == "django.db.backends.sqlite3"
    assert database["OPTIONS"]["transaction_mode"] == "IMMEDIATE"


def test_database_url_selects_postgresql() -> None:
    database = example_settings.databases("postgres://anvia:secret@db.internal:5433/memory")[
        "default"
    ]
    assert database["ENGINE"] == "django.db.backends.postgresql"
    assert (database["HOST"], database["PORT"], database["NAME"]) == ("db.internal", 5433, "memory")
    assert (database["USER"], database["PASSWORD"]) == ("anvia", "secret")


def test_a_sqlite_database_url_keeps_the_documented_mode(tmp_path: Path) -> None:
    database = example_settings.databases(f"sqlite:///{tmp_path}/demo.sqlite3")["default"]
    assert database["OPTIONS"]["transaction_mode"] == "IMMEDIATE"


def test_the_example_project_passes_its_system_checks(tmp_path: Path) -> None:
    environment = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "example_project.settings",
        "ANVIA_DEMO_SQLITE": str(tmp_path / "check.sqlite3"),
    }
    environment.pop("DATABASE_URL", None)
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "no issues" in result.stdout


def test_wsgi_and_asgi_entry_points_load() -> None:
    from example_project import asgi, wsgi

    assert callable(wsgi.application)
    assert callable(asgi.application)


# --- the demo agent ----------------------------------------------------------


def test_the_offline_model_is_the_default_and_openai_is_used_when_configured(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    assert isinstance(demo_agent_module.chat_model(), OfflineSupportModel)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("OPENAI_MODEL", "local-model")
    model = demo_agent_module.chat_model()
    assert type(model).__name__ == "OpenAICompatibleChatModel"
    assert model.model == "local-model"  # type: ignore[attr-defined]


def test_an_order_question_runs_two_tools_over_three_turns() -> None:
    agent = demo_agent_module.build_agent(OfflineSupportModel())
    response = async_to_sync(
        agent.session("s-1", user_id="u").prompt("Where is order 1042?").send
    )()
    roles = [(m["role"], m.get("name")) for m in response.messages]
    assert roles == [
        ("user", None),
        ("assistant", None),
        ("tool", "lookup_order"),
        ("assistant", None),
        ("tool", "track_shipment"),
        ("assistant", None),
    ]
    assert response.messages[1]["tool_calls"][0]["arguments"] == {"order_id": "1042"}
    assert "Leipzig" in response.output
    stored = load_messages(MemoryContext("s-1"))
    assert stored == response.messages


def test_the_offline_model_answers_from_memory() -> None:
    agent = demo_agent_module.build_agent(OfflineSupportModel())
    session = agent.session("s-1")
    async_to_sync(session.prompt("Has order 1043 shipped?").send)()
    # A new agent object: what it knows comes from the database only.
    again = demo_agent_module.build_agent(OfflineSupportModel()).session("s-1")
    answer = async_to_sync(again.prompt("What did I ask you earlier?").send)()
    assert (
        answer.output == "You asked me 1 question(s) before. The latest: 'Has order 1043 shipped?'."
    )


def test_an_unknown_order_is_a_tool_error_the_model_recovers_from() -> None:
    agent = demo_agent_module.build_agent(OfflineSupportModel())
    response = async_to_sync(agent.session("s-1").prompt("Check order 9999").send)()
    assert response.messages[2]["content"].startswith("Error: UnknownOrderError")
    assert response.output.startswith("Sorry, I couldn't find that")
    assert not FailedRun.objects.exists()


# --- seeding, read back through the API --------------------------------------


def test_seeding_then_reading_the_sessions_through_the_inspector_api() -> None:
    assert seed_demo_conversations().startswith(f"Seeded {len(SCRIPTS)} demo conversation(s)")
    client = staff_client()

    listing = client.get("/anvia/api/conversations/")
    assert listing.status_code == 200
    summaries = listing.json()
    assert {s["sessionId"] for s in summaries} == {script.session_id for script in SCRIPTS}
    alice = next(s for s in summaries if s["sessionId"] == "demo-alice-espresso")
    assert alice["userId"] == "alice"
    assert alice["metadata"] == {"channel": "email", "locale": "en-GB"}
    assert alice["messageCount"] == 10

    detail = client.get(f"/anvia/api/conversations/{alice['ref']}/")
    assert detail.status_code == 200
    messages = [entry["message"] for entry in detail.json()["messages"]]
    assert [m["role"] for m in messages] == [
        "user", "assistant",
        "user", "assistant", "tool", "assistant", "tool", "assistant",
        "user", "assistant",
    ]  # fmt: skip
    assert messages[3]["tool_calls"][0]["name"] == "lookup_order"
    assert messages[4]["name"] == "lookup_order"
    assert messages[9]["content"].startswith("You asked me 2 question(s) before.")
    assert [entry["position"] for entry in detail.json()["messages"]] == list(range(10))

    by_user = client.get("/anvia/api/conversations/", {"userId": "alice"}).json()
    assert {s["sessionId"] for s in by_user} == {"demo-alice-espresso", "demo-alice-followup"}


def test_seeding_twice_adds_nothing() -> None:
    seed_demo_conversations()
    before = list(Conversation.objects.order_by("pk").values_list("session_id", "message_count"))
    assert seed_demo_conversations().startswith(f"Seeded 0 demo conversation(s); {len(SCRIPTS)}")
    after = list(Conversation.objects.order_by("pk").values_list("session_id", "message_count"))
    assert after == before


def test_seeding_leaves_a_session_someone_has_used_alone() -> None:
    agent = demo_agent_module.build_agent(OfflineSupportModel())
    first = SCRIPTS[0]
    async_to_sync(agent.session(first.session_id, user_id=first.user_id).prompt("hello").send)()
    result = async_to_sync(seed)(agent)
    assert result.skipped == [first.session_id]
    assert Conversation.objects.get(session_id=first.session_id).message_count == 2


def test_the_seeded_sessions_are_visible_to_the_memory_command() -> None:
    from io import StringIO

    seed_demo_conversations()
    out = StringIO()
    call_command("anvia_memory", "show", "demo-carol-typo", stdout=out)
    assert "tool lookup_order (call call_2): Error: UnknownOrderError" in out.getvalue()


# --- the staff account ---------------------------------------------------------


def test_demo_setup_creates_then_refreshes_a_view_only_staff_account() -> None:
    from io import StringIO

    out = StringIO()
    call_command(demo_setup.Command(), stdout=out)
    password = out.getvalue().split("password: ")[1].split()[0]
    account = get_user_model().objects.get(username="demo")
    assert account.is_staff
    assert not account.is_superuser
    assert account.check_password(password)
    assert account.has_perm("anvia_django.view_conversation")
    assert not account.has_perm("anvia_django.change_conversation")

    out = StringIO()
    call_command(demo_setup.Command(), "--password", "chosen-password", stdout=out)
    assert out.getvalue().startswith("Refreshed staff account")
    assert get_user_model().objects.filter(username="demo").count() == 1
    client = Client()
    assert client.login(username="demo", password="chosen-password")
    assert client.get("/anvia/api/conversations/").status_code == 200
    seed_demo_conversations()
    changelist = client.get("/admin/anvia_django/conversation/")
    assert changelist.status_code == 200
    assert "demo-alice-espresso" in changelist.content.decode()


# --- the chat page ----------------------------------------------------------------


def web_session() -> str:
    return f"web-{uuid.uuid4()}"


def send(client: Client, session_id: object, message: object) -> Any:
    return client.post(
        "/chat/send/",
        data=json.dumps({"sessionId": session_id, "message": message}),
        content_type="application/json",
    )


def test_the_views_are_async() -> None:
    for view in (views.chat_page, views.chat_history, views.chat_send):
        assert asyncio.iscoroutinefunction(view)


def test_the_chat_page_links_to_the_admin_and_the_api() -> None:
    page = Client().get("/")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'href="/admin/"' in html
    assert 'href="/anvia/api/conversations/"' in html
    assert 'href="/anvia/api/schema/"' in html
    assert "csrftoken" in page.cookies
    assert "localStorage" in html


def test_a_chat_is_kept_and_read_back_after_a_restart() -> None:
    client = Client(enforce_csrf_checks=True)
    token = client.get("/").cookies["csrftoken"].value
    session_id = web_session()
    reply = client.post(
        "/chat/send/",
        data=json.dumps({"sessionId": session_id, "message": "Where is order 1044?"}),
        content_type="application/json",
        headers={"X-CSRFToken": token},
    )
    assert reply.status_code == 200
    body = reply.json()
    assert body["output"] == "Order 1044 (Milk frother) was delivered by QuickShip."
    assert len(body["messages"]) == 4

    demo_agent_module.demo_agent.cache_clear()  # as a restarted server would
    history = client.get("/chat/history/", {"sessionId": session_id})  # same browser
    assert history.json()["messages"] == body["messages"]
    conversation = Conversation.objects.get(session_id=session_id)
    assert conversation.user_id == client.session[views.VISITOR_KEY]
    assert conversation.user_id.startswith(views.VISITOR_PREFIX)
    assert conversation.metadata == {"channel": "web"}


def test_each_visitor_is_a_user_of_their_own() -> None:
    first, second = Client(), Client()
    session_id = web_session()
    assert send(first, session_id, "Where is order 1042?").status_code == 200
    stored = Conversation.objects.get(session_id=session_id).message_count

    # The second visitor, even knowing the session id, gets a 404: neither
    # the history nor a prompt that would show it to the model.
    history = second.get("/chat/history/", {"sessionId": session_id})
    assert history.status_code == 404
    assert "1042" not in history.content.decode()
    refused = send(second, session_id, "What did I ask earlier?")
    assert refused.status_code == 404
    assert "1042" not in refused.content.decode()
    assert Conversation.objects.get(session_id=session_id).message_count == stored

    # Their own conversations work, under another user id.
    other = web_session()
    assert send(second, other, "hi").status_code == 200
    owners = set(Conversation.objects.values_list("user_id", flat=True))
    assert owners == {first.session[views.VISITOR_KEY], second.session[views.VISITOR_KEY]}
    assert len(owners) == 2


def test_the_chat_endpoint_needs_the_csrf_token() -> None:
    client = Client(enforce_csrf_checks=True)
    assert send(client, web_session(), "hi").status_code == 403
    assert not Conversation.objects.exists()


@pytest.mark.parametrize(
    ("session_id", "message", "error"),
    [
        ("demo-alice-espresso", "hi", "sessionId"),
        ("", "hi", "sessionId"),
        (None, "hi", "sessionId"),
        ("web-not-a-uuid", "hi", "sessionId"),
        (f"web-{uuid.UUID(int=1)}", "   ", "message"),
        (f"web-{uuid.UUID(int=1)}", 42, "message"),
        (f"web-{uuid.UUID(int=1)}", "x" * 4001, "message"),
    ],
)
def test_the_chat_endpoint_refuses_bad_input(session_id: Any, message: Any, error: str) -> None:
    response = send(Client(), session_id, message)
    assert response.status_code == 400
    assert error in response.json()["error"]
    assert not Conversation.objects.exists()


def test_the_chat_endpoint_refuses_a_body_that_is_not_a_json_object() -> None:
    for body in ("not json", "[1, 2]"):
        response = Client().post("/chat/send/", data=body, content_type="application/json")
        assert response.status_code == 400
    assert Client().get("/chat/send/").status_code == 405


def test_a_session_of_another_user_is_refused() -> None:
    session_id = web_session()
    from anvia_django.persistence import append_messages

    append_messages(append_input(session_id, [user("private")], user_id="someone-else"))
    assert send(Client(), session_id, "hi").status_code == 404
    history = Client().get("/chat/history/", {"sessionId": session_id})
    assert history.status_code == 404
    assert "private" not in history.content.decode()


def test_a_failing_model_is_a_502_without_chat_content(monkeypatch: pytest.MonkeyPatch) -> None:
    class Broken:
        async def complete(self, messages: Any, tools: Any) -> Any:
            raise ConnectionError("secret order details")

    monkeypatch.setattr(
        demo_agent_module, "demo_agent", lambda: demo_agent_module.build_agent(Broken())
    )
    monkeypatch.setattr(views, "demo_agent", demo_agent_module.demo_agent)
    response = send(Client(), web_session(), "Where is order 1042?")
    assert response.status_code == 502
    assert response.json() == {"error": "The agent failed (ConnectionError); please try again."}
    assert FailedRun.objects.get().error_type == "ConnectionError"
