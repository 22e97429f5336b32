"""``AdminViewPermission``: the API grants what the admin grants, by the
model view permissions; and the demo account holds all of them."""

from __future__ import annotations

import base64
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.core.management import call_command
from django.test import Client, override_settings
from rest_framework.test import APIClient

from anvia_django.core.memory import MemoryContext, MemoryErrorInput
from anvia_django.core.memory.run_records import MemoryRunInput
from anvia_django.models import Conversation
from anvia_django.persistence import record_failed_run, record_run
from example_project.demo.management.commands import demo_setup

from .api_client import LIST_URL, detail_url, messages_url
from .helpers import user
from .inspector_data import EPOCH, make_conversations, make_messages
from .inspector_records import make_runs

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.usefixtures("admin_rule"),
]

ALL_VIEWS = ("conversation", "memorymessage", "failedrun", "agentrun", "memorysummary")
# The demo account may view every model of the app, the integrations' tables included.
INTEGRATION_VIEWS = (
    *("langgraphcheckpoint", "langgraphblob", "langgraphwrite", "langgraphstoreitem"),
    *("adksession", "adkevent", "adkappstate", "adkuserstate"),
)


@pytest.fixture
def admin_rule() -> Any:
    rule = {"INSPECTOR_PERMISSION_CLASSES": ["anvia_django.api.permissions.AdminViewPermission"]}
    with override_settings(ANVIA_DJANGO=rule):
        yield


@pytest.fixture
def conversation() -> Conversation:
    (made,) = make_conversations(1, prefix="guarded")
    make_messages(made, 3)
    make_runs(made, 2)
    return made


def user_with(*models: str, is_staff: bool = True, is_active: bool = True) -> User:
    user = User.objects.create_user(
        f"u-{'-'.join(models)}-{is_staff}-{is_active}", is_staff=is_staff, is_active=is_active
    )
    user.user_permissions.set(
        Permission.objects.filter(
            content_type__app_label="anvia_django",
            codename__in=[f"view_{model}" for model in models],
        )
    )
    return user


def api(user: User | None) -> APIClient:
    client = APIClient()
    if user is not None:
        client.force_authenticate(user)
    return client


def conversation_urls(ref: str) -> list[str]:
    detail = detail_url(ref)
    return [
        "/anvia/api/",
        LIST_URL,
        detail,
        messages_url(ref),
        f"{detail}lineage/",
        f"{detail}summaries/",
    ]


def test_staff_with_the_conversation_view_permission_read_conversations(
    conversation: Conversation,
) -> None:
    client = api(user_with("conversation"))
    for url in conversation_urls(conversation.ref):
        assert client.get(url).status_code == 200, url
    # Run records need their own permission, as on the admin's pages.
    assert client.get(f"{detail_url(conversation.ref)}runs/").status_code == 403


def test_runs_need_the_run_view_permission_too(conversation: Conversation) -> None:
    assert api(user_with("agentrun")).get(LIST_URL).status_code == 403
    client = api(user_with("conversation", "agentrun"))
    response = client.get(f"{detail_url(conversation.ref)}runs/")
    assert response.status_code == 200
    assert len(response.json()["runs"]) == 2


@pytest.mark.parametrize(
    "make",
    [
        lambda: user_with(),  # staff, no permission
        lambda: user_with(*ALL_VIEWS, is_staff=False),
        lambda: user_with(*ALL_VIEWS, is_active=False),
        lambda: None,  # anonymous
    ],
)
def test_everyone_else_is_refused_with_no_data(conversation: Conversation, make: Any) -> None:
    client = api(make())
    for url in [*conversation_urls(conversation.ref), f"{detail_url(conversation.ref)}runs/"]:
        response = client.get(url)
        assert response.status_code in (401, 403), url
        assert conversation.ref.encode() not in response.content


def test_superusers_see_everything(conversation: Conversation) -> None:
    client = api(User.objects.create_superuser("all-seeing"))
    # What a staff member granted every view permission sees, to the byte.
    granted = api(user_with(*ALL_VIEWS))
    for url in [*conversation_urls(conversation.ref), f"{detail_url(conversation.ref)}runs/"]:
        response = client.get(url)
        assert response.status_code == 200, url
        assert response.content == granted.get(url).content, url
    # ... which is all of it.
    assert [listed["ref"] for listed in client.get(LIST_URL).json()] == [conversation.ref]
    messages = client.get(messages_url(conversation.ref)).json()
    assert [message["position"] for message in messages] == [0, 1, 2]
    assert len(client.get(f"{detail_url(conversation.ref)}runs/").json()["runs"]) == 2


@pytest.mark.parametrize(
    "models",
    [(), ("conversation",), ("agentrun",), ("conversation", "agentrun"), ALL_VIEWS],
)
def test_the_api_and_the_admin_agree(conversation: Conversation, models: tuple[str, ...]) -> None:
    user = user_with(*models)
    browser = Client()
    browser.force_login(user)
    client = api(user)
    pairs = [
        (LIST_URL, "/admin/anvia_django/conversation/"),
        (
            detail_url(conversation.ref),
            f"/admin/anvia_django/conversation/{conversation.pk}/change/",
        ),
        (f"{detail_url(conversation.ref)}runs/", "/admin/anvia_django/agentrun/"),
    ]
    for api_url, admin_url in pairs:
        api_allowed = client.get(api_url).status_code == 200
        admin_allowed = browser.get(admin_url).status_code == 200
        if api_url.endswith("runs/"):  # the API's runs are a conversation's runs
            admin_allowed = admin_allowed and "conversation" in models
        assert api_allowed == admin_allowed, (models, api_url)


def test_the_schema_and_docs_answer_to_the_same_rule() -> None:
    pytest.importorskip("drf_spectacular")
    allowed, refused = api(user_with("conversation")), api(user_with())
    for path in ("schema/", "docs/", "redoc/"):
        assert allowed.get(f"/anvia/api/{path}").status_code == 200
        assert refused.get(f"/anvia/api/{path}").status_code == 403


def test_the_demo_account_sees_runs_in_the_admin_and_the_api(conversation: Conversation) -> None:
    call_command(demo_setup.Command(), "--password", "demo-pw", stdout=StringIO())
    demo = User.objects.get(username="demo")
    held = {p.codename for p in demo.user_permissions.all()}
    assert held == {f"view_{model}" for model in (*ALL_VIEWS, *INTEGRATION_VIEWS)}
    browser = Client()
    assert browser.login(username="demo", password="demo-pw")
    index = browser.get("/admin/").content.decode()
    assert 'href="/admin/anvia_django/agentrun/"' in index
    assert browser.get("/admin/anvia_django/agentrun/").status_code == 200
    assert browser.get(f"{detail_url(conversation.ref)}runs/").status_code == 200


def basic(username: str, password: str) -> dict[str, str]:
    token = base64.b64encode(f"{username}:{password}".encode()).decode()
    return {"HTTP_AUTHORIZATION": f"Basic {token}"}


def test_basic_credentials_are_refused_unless_the_project_names_basic_authentication(
    conversation: Conversation,
) -> None:
    User.objects.create_superuser("ops", password="right horse")
    credentials = basic("ops", "right horse")
    # The default: the admin's session only, whatever REST_FRAMEWORK says
    # (DRF's default authentication includes Basic).
    response = Client().get(LIST_URL, **credentials)  # type: ignore[arg-type]
    assert response.status_code == 403
    assert conversation.ref.encode() not in response.content
    named = {
        "INSPECTOR_PERMISSION_CLASSES": ["anvia_django.api.permissions.AdminViewPermission"],
        "INSPECTOR_AUTHENTICATION_CLASSES": ["rest_framework.authentication.BasicAuthentication"],
    }
    with override_settings(ANVIA_DJANGO=named):
        response = Client().get(LIST_URL, **credentials)  # type: ignore[arg-type]
    assert response.status_code == 200
    assert [item["ref"] for item in response.json()] == [conversation.ref]


def test_the_throttle_answers_429_past_its_rate(conversation: Conversation) -> None:
    client = api(User.objects.create_superuser("busy"))
    other = api(User.objects.create_superuser("calm"))
    rule = {"INSPECTOR_THROTTLE_RATE": "3/minute"}
    with override_settings(ANVIA_DJANGO=rule):
        urls = [LIST_URL, detail_url(conversation.ref), "/anvia/api/"]
        assert [client.get(url).status_code for url in urls] == [200, 200, 200]
        refused = client.get(messages_url(conversation.ref))
        assert refused.status_code == 429
        assert int(refused["Retry-After"]) > 0
        assert conversation.ref.encode() not in refused.content
        # Each caller has its own count.
        assert other.get(LIST_URL).status_code == 200
    # The default rate lets the same caller on again.
    assert client.get(LIST_URL).status_code == 200


def test_a_failed_runs_error_message_needs_the_failed_run_view_permission(
    conversation: Conversation,
) -> None:
    context = MemoryContext(conversation.session_id)
    error = RuntimeError("card 4242 declined for alice@example.com")
    record_failed_run(MemoryErrorInput(context, "run-1", error, [user("pay")]))
    record_run(MemoryRunInput(context, "run-1", "failed", EPOCH, EPOCH))
    url = f"{detail_url(conversation.ref)}runs/?runId=run-1"

    def shown(*models: str) -> dict[str, Any]:
        response = api(user_with(*models)).get(url)
        assert response.status_code == 200
        (run,) = response.json()["runs"]
        return {key: run[key] for key in ("errorType", "errorMessage")}

    assert shown("conversation", "agentrun") == {"errorType": "RuntimeError", "errorMessage": None}
    assert shown("conversation", "agentrun", "failedrun") == {
        "errorType": "RuntimeError",
        "errorMessage": "card 4242 declined for alice@example.com",
    }
