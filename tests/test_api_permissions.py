"""``AdminViewPermission``: the API grants what the admin grants, by the
model view permissions; and the demo account holds all of them."""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.core.management import call_command
from django.test import Client, override_settings
from rest_framework.test import APIClient

from anvia_django.models import Conversation
from example_project.demo.management.commands import demo_setup

from .api_client import LIST_URL, detail_url, messages_url
from .inspector_data import make_conversations, make_messages
from .inspector_records import make_runs

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.usefixtures("admin_rule"),
]

ALL_VIEWS = ("conversation", "memorymessage", "failedrun", "agentrun", "memorysummary")


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
    assert held == {f"view_{model}" for model in ALL_VIEWS}
    browser = Client()
    assert browser.login(username="demo", password="demo-pw")
    index = browser.get("/admin/").content.decode()
    assert 'href="/admin/anvia_django/agentrun/"' in index
    assert browser.get("/admin/anvia_django/agentrun/").status_code == 200
    assert browser.get(f"{detail_url(conversation.ref)}runs/").status_code == 200
