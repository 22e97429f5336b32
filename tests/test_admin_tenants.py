"""The conversation changelist's filter per scope metadata key, and the
scope key on the list and the conversation page."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.db import connection
from django.test import Client, override_settings
from django.test.utils import CaptureQueriesContext

from anvia_django.admin import scope_filters
from anvia_django.models import Conversation

from .inspector_data import make_conversations
from .tenant_data import TENANT_SCOPE, make_tenant_conversations

pytestmark = pytest.mark.django_db

TENANTS = {"SCOPE": TENANT_SCOPE}
CHANGELIST = "/admin/anvia_django/conversation/"


@pytest.fixture
def viewer() -> Client:
    staff = User.objects.create_user("viewer", is_staff=True)
    staff.user_permissions.set(
        Permission.objects.filter(
            content_type__app_label="anvia_django", codename__startswith="view_"
        )
    )
    client = Client()
    client.force_login(staff)
    return client


def listed(client: Client, **params: str) -> set[str]:
    response = client.get(CHANGELIST, params)
    assert response.status_code == 200
    rows = response.context["cl"].result_list
    return {conversation.session_id for conversation in rows}


def choices(client: Client, title: str, **params: str) -> list[str]:
    response = client.get(CHANGELIST, params)
    [spec] = [spec for spec in response.context["cl"].filter_specs if spec.title == title]
    return [choice["display"] for choice in spec.choices(response.context["cl"])][1:]


@override_settings(ANVIA_DJANGO=TENANTS)
def test_the_list_filters_by_each_metadata_key(viewer: Client) -> None:
    make_tenant_conversations(2, tenant="acme", org="o1", prefix="acme")
    make_tenant_conversations(1, tenant="zed", org="o2", prefix="zed")
    make_conversations(1, prefix="plain")
    assert listed(viewer, scope_tenant_id="acme") == {"acme-0", "acme-1"}
    assert listed(viewer, **{"scope_org.id": "o2"}) == {"zed-0"}
    assert listed(viewer, scope_tenant_id="acme", **{"scope_org.id": "o2"}) == set()
    assert listed(viewer) == {"acme-0", "acme-1", "zed-0", "plain-0"}
    assert choices(viewer, "tenant_id") == ["acme", "zed"]
    assert choices(viewer, "org.id") == ["o1", "o2"]


@override_settings(ANVIA_DJANGO=TENANTS)
def test_choices_are_bounded_and_the_chosen_one_is_listed(
    viewer: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scope_filters, "CHOICES_SHOWN", 3)
    monkeypatch.setattr(scope_filters, "SAMPLED_CONVERSATIONS", 5)
    make_tenant_conversations(1, tenant="old", prefix="old")
    for index in range(6):
        make_tenant_conversations(1, tenant=f"t{index}", prefix=f"t{index}")
    Conversation.objects.filter(session_id="old-0").update(
        updated_at=Conversation.objects.get(session_id="t0-0").updated_at.replace(year=2000)
    )
    assert choices(viewer, "tenant_id") == ["t1", "t2", "t3"]
    # A tenant outside the sample is still filtered by, and shown chosen.
    assert choices(viewer, "tenant_id", scope_tenant_id="old") == ["t1", "t2", "t3", "old"]
    assert listed(viewer, scope_tenant_id="old") == {"old-0"}


@override_settings(ANVIA_DJANGO=TENANTS)
def test_a_value_no_backend_compares_is_an_invalid_lookup(viewer: Client) -> None:
    response = viewer.get(CHANGELIST, {"scope_tenant_id": "a\x00b"})
    assert response.status_code == 302
    assert response["Location"].endswith("?e=1")


def test_without_metadata_keys_there_is_no_tenant_filter(viewer: Client) -> None:
    response = viewer.get(CHANGELIST)
    titles = {spec.title for spec in response.context["cl"].filter_specs}
    assert "tenant_id" not in titles
    assert "failed runs" in titles


@override_settings(ANVIA_DJANGO=TENANTS)
def test_the_scope_key_is_a_column_and_a_read_only_field(viewer: Client) -> None:
    [conversation] = make_tenant_conversations(1, tenant="acme", prefix="acme")
    listing = viewer.get(CHANGELIST).content.decode()
    assert "column-scope_key" in listing
    assert "[&quot;u1&quot;,&quot;acme&quot;,&quot;o1&quot;]" in listing
    page = viewer.get(f"{CHANGELIST}{conversation.pk}/change/").content.decode()
    assert "field-scope_key" in page
    assert 'name="scope_key"' not in page


@override_settings(ANVIA_DJANGO=TENANTS)
def test_filtered_list_queries_do_not_grow_with_rows(
    viewer: Client, django_assert_num_queries: Any
) -> None:
    make_tenant_conversations(3, tenant="acme", prefix="acme")
    make_tenant_conversations(2, tenant="zed", org="o2", prefix="zed")
    filtered = {"scope_tenant_id": "acme", "scope_org.id": "o1"}
    viewer.get(CHANGELIST, filtered)  # warm caches (content types, permissions)

    def queries(params: dict[str, str]) -> int:
        with CaptureQueriesContext(connection) as captured:
            assert viewer.get(CHANGELIST, params).status_code == 200
        return len(captured.captured_queries)

    before = {"filtered": queries(filtered), "unfiltered": queries({})}
    # A query per metadata key for its choices, none per row; the filtered
    # list counts exactly where the unfiltered one may ask for an estimate.
    assert before["filtered"] <= before["unfiltered"]
    for index in range(40):
        make_tenant_conversations(5, tenant=f"t{index}", org=f"o{index}", prefix=f"many{index}")
    make_tenant_conversations(120, tenant="acme", prefix="more")
    with django_assert_num_queries(before["filtered"]):
        assert len(listed(viewer, **filtered)) == 50
    with django_assert_num_queries(before["unfiltered"]):
        viewer.get(CHANGELIST)
