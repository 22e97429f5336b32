"""The ``STAFF_TENANTS`` hook restricts a reader to their tenants, in the
admin and in the API alike (issue 35)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.core import checks
from django.db.models import Model
from django.test import Client, override_settings
from rest_framework.test import APIClient

from anvia_django.core.memory import MemoryContext, MemoryErrorInput, MemoryForkInput
from anvia_django.core.memory.run_records import MemoryRunInput
from anvia_django.models import AgentRun, Conversation, FailedRun, MemoryMessage, MemorySummary
from anvia_django.persistence import (
    append_messages,
    fork_conversation,
    plan_compaction,
    record_failed_run,
    record_run,
    write_summary,
)

from .api_client import LIST_URL, detail_url, messages_url
from .helpers import append_input, assistant, user

pytestmark = pytest.mark.django_db

SCOPE = {"user_id": True, "metadata_keys": ["tenant_id"]}
HOOK = "tests.test_staff_tenants.tenants_for"
RESTRICTED = {"SCOPE": SCOPE, "STAFF_TENANTS": HOOK}


def tenants_for(request: Any) -> list[str] | None:
    """acme's staff see acme; superusers everything; anyone else nothing."""
    user = request.user
    if user.is_superuser:
        return None
    return ["acme"] if user.username == "acme-staff" else []


def context(tenant: str, session_id: str = "chat") -> MemoryContext:
    return MemoryContext(session_id, user_id="u1", metadata={"tenant_id": tenant})


@pytest.fixture
def rows() -> dict[str, Conversation]:
    """The same session id in acme and globex, each with a run, a failed
    run and a summary; acme's conversation forked into globex."""
    moment = datetime(2026, 1, 1, tzinfo=UTC)
    with override_settings(ANVIA_DJANGO={"SCOPE": SCOPE}):
        for tenant in ("acme", "globex"):
            ctx = context(tenant)
            append_messages(
                append_input(
                    "chat",
                    [user(f"secret of {tenant}"), assistant("noted")],
                    user_id="u1",
                    metadata={"tenant_id": tenant},
                )
            )
            record_run(MemoryRunInput(ctx, "run-1", "succeeded", moment, moment, message_count=2))
            record_failed_run(MemoryErrorInput(ctx, "run-2", RuntimeError("boom"), []))
            plan = plan_compaction(ctx, keep_messages=1, keep_tokens=None)
            assert plan is not None
            write_summary(plan, f"summary of {tenant}")
        fork_conversation(
            MemoryForkInput(
                context("acme"), "moved", 1, metadata={"tenant_id": "globex"}, cross_scope=True
            )
        )
    by_tenant = {c.metadata["tenant_id"]: c for c in Conversation.objects.filter(session_id="chat")}
    by_tenant["moved"] = Conversation.objects.get(session_id="moved")
    return by_tenant


def staff_member(username: str, *, is_superuser: bool = False) -> User:
    member = User.objects.create_user(username, is_staff=True, is_superuser=is_superuser)
    member.user_permissions.set(
        Permission.objects.filter(
            content_type__app_label="anvia_django", codename__startswith="view_"
        )
    )
    return member


def admin_client(username: str, *, is_superuser: bool = False) -> Client:
    client = Client()
    client.force_login(staff_member(username, is_superuser=is_superuser))
    return client


def api_client(username: str, *, is_superuser: bool = False) -> APIClient:
    client = APIClient()
    client.force_authenticate(staff_member(username, is_superuser=is_superuser))
    return client


def admin_url(model: type[Model], pk: int | None = None) -> str:
    base = f"/admin/anvia_django/{model._meta.model_name}/"
    return base if pk is None else f"{base}{pk}/change/"


def listed_conversations(client: Client, model: type[Model], **params: str) -> set[int]:
    response = client.get(admin_url(model), params)
    assert response.status_code == 200, model
    rows = response.context["cl"].result_list
    return {row.pk if model is Conversation else row.conversation_id for row in rows}


@pytest.mark.transactional_on("mysql")  # InnoDB's FULLTEXT index: committed rows
@override_settings(ANVIA_DJANGO=RESTRICTED)
def test_the_admin_shows_a_staff_member_their_tenants_alone(rows: dict[str, Conversation]) -> None:
    acme, globex, moved = rows["acme"], rows["globex"], rows["moved"]
    client = admin_client("acme-staff")
    for model in (Conversation, MemoryMessage, AgentRun, FailedRun, MemorySummary):
        assert listed_conversations(client, model) == {acme.pk}, model
    # Search, the tenant filter and its choices stay within acme.
    assert listed_conversations(client, Conversation, q="secret") == {acme.pk}
    assert listed_conversations(client, Conversation, q="chat") == {acme.pk}
    assert listed_conversations(client, Conversation, scope_tenant_id="globex") == set()
    page = client.get(admin_url(Conversation)).content.decode()
    assert "globex" not in page
    # Another tenant's pages answer as missing ones do.
    for model, row in (
        (Conversation, globex),
        (Conversation, moved),
        (MemoryMessage, MemoryMessage.objects.filter(conversation=globex).first()),
        (AgentRun, AgentRun.objects.get(conversation=globex)),
        (FailedRun, FailedRun.objects.get(conversation=globex)),
        (MemorySummary, MemorySummary.objects.get(conversation=globex)),
    ):
        assert row is not None
        assert client.get(admin_url(model, row.pk)).status_code == 404, model
    assert client.get(f"{admin_url(Conversation)}{globex.pk}/history/").status_code == 404
    assert client.get(f"{admin_url(Conversation)}{globex.pk}/media/0/0/").status_code == 404
    # Its own page: the transcript, without a link to the fork in globex.
    own = client.get(admin_url(Conversation, acme.pk))
    assert own.status_code == 200
    assert "secret of acme" in own.content.decode()
    assert own.context["forks"] == []


@override_settings(ANVIA_DJANGO=RESTRICTED)
def test_the_admin_shows_nothing_to_a_member_of_no_tenant_and_all_to_none(
    rows: dict[str, Conversation],
) -> None:
    nobody = admin_client("nobody")
    assert listed_conversations(nobody, Conversation) == set()
    assert nobody.get(admin_url(Conversation, rows["acme"].pk)).status_code == 404
    everyone = admin_client("root", is_superuser=True)
    assert listed_conversations(everyone, Conversation) == {c.pk for c in rows.values()}


@pytest.mark.transactional_on("mysql")  # InnoDB's FULLTEXT index: committed rows
@override_settings(ANVIA_DJANGO=RESTRICTED)
def test_the_api_shows_a_staff_member_their_tenants_alone(rows: dict[str, Conversation]) -> None:
    acme, globex, moved = rows["acme"], rows["globex"], rows["moved"]
    client = api_client("acme-staff")
    refs = {item["ref"] for item in client.get(LIST_URL).json()}
    assert refs == {acme.ref}
    assert [c["ref"] for c in client.get(LIST_URL, {"q": "secret"}).json()] == [acme.ref]
    assert client.get(LIST_URL, {"tenantId": "globex"}).json() == []
    for hidden in (globex, moved):
        for url in (
            detail_url(hidden.ref),
            messages_url(hidden.ref),
            f"{detail_url(hidden.ref)}runs/",
            f"{detail_url(hidden.ref)}lineage/",
            f"{detail_url(hidden.ref)}summaries/",
            f"{messages_url(hidden.ref)}0/media/0/",
        ):
            response = client.get(url)
            assert response.status_code == 404, url
            assert response.json() == {"detail": "No such conversation."}, url
    detail = client.get(detail_url(acme.ref)).json()
    assert detail["messages"][0]["message"]["content"] == "secret of acme"
    assert client.get(f"{detail_url(acme.ref)}lineage/").json()["forks"] == []
    # A superuser sees every tenant, and the fork's source.
    root = api_client("root", is_superuser=True)
    assert len(root.get(LIST_URL).json()) == 3
    lineage = root.get(f"{detail_url(moved.ref)}lineage/").json()
    assert lineage["forkedFrom"]["ref"] == acme.ref


@override_settings(ANVIA_DJANGO=RESTRICTED)
def test_a_member_of_no_tenant_reads_nothing_from_the_api(rows: dict[str, Conversation]) -> None:
    client = api_client("nobody")
    assert client.get(LIST_URL).json() == []
    assert client.get(detail_url(rows["acme"].ref)).status_code == 404


def hook_errors(**settings: Any) -> list[str]:
    with override_settings(ANVIA_DJANGO=settings):
        found = checks.run_checks(tags=[checks.Tags.security])
    return [
        message.id for message in found if message.id in ("anvia_django.E110", "anvia_django.E111")
    ]


def test_the_checks_name_a_hook_that_cannot_work() -> None:
    assert hook_errors(SCOPE=SCOPE, STAFF_TENANTS=HOOK) == []
    assert hook_errors(SCOPE=SCOPE) == []
    assert hook_errors(SCOPE=SCOPE, STAFF_TENANTS="tests.test_staff_tenants.missing") == [
        "anvia_django.E110"
    ]
    assert hook_errors(SCOPE=SCOPE, STAFF_TENANTS="no.such.module.hook") == ["anvia_django.E110"]
    assert hook_errors(SCOPE=SCOPE, STAFF_TENANTS=42) == ["anvia_django.E110"]
    assert hook_errors(SCOPE={"user_id": True}, STAFF_TENANTS=HOOK) == ["anvia_django.E111"]


@override_settings(ANVIA_DJANGO={**RESTRICTED, "STAFF_TENANTS": lambda request: "acme"})
def test_a_hook_returning_one_string_is_refused_not_read_letter_by_letter(
    rows: dict[str, Conversation],
) -> None:
    client = api_client("acme-staff")
    client.raise_request_exception = True
    with pytest.raises(TypeError, match="must return tenant ids"):
        client.get(LIST_URL)
