"""The inspector API's filters per scope metadata key (``?tenantId=``,
``?orgId=``), the scope key in its summaries, and owner mode with them."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import override_settings
from rest_framework.test import APIClient

from anvia_django.api.params import metadata_param_name
from anvia_django.persistence import append_messages

from .api_client import LIST_URL, detail_url, next_url
from .helpers import append_input, assistant, user
from .inspector_data import make_conversations, make_messages
from .tenant_data import TENANT_SCOPE, make_tenant_conversations, tenant_metadata

pytestmark = pytest.mark.django_db

TENANTS = {"SCOPE": TENANT_SCOPE}
OWNER_MODE = {
    **TENANTS,
    "INSPECTOR_OWNER_MODE": True,
    "INSPECTOR_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
}


def sessions(client: APIClient, **params: str) -> list[str]:
    response = client.get(LIST_URL, params)
    assert response.status_code == 200, response.content
    return sorted(item["sessionId"] for item in response.json())


def test_param_names_are_the_paths_in_camel_case() -> None:
    assert metadata_param_name("tenant_id") == "tenantId"
    assert metadata_param_name("org.id") == "orgId"
    assert metadata_param_name("org.billing_account.id") == "orgBillingAccountId"


@override_settings(ANVIA_DJANGO=TENANTS)
def test_one_session_id_in_two_tenants_is_told_apart(staff: APIClient) -> None:
    for tenant, org in (("acme", "o1"), ("zed", "o2")):
        metadata = tenant_metadata(tenant, org)
        append_messages(append_input("chat", [user("Hi")], user_id="u1", metadata=metadata))
        append_messages(
            append_input("chat", [assistant(tenant)], turn=2, user_id="u1", metadata=metadata)
        )
    both = staff.get(LIST_URL).json()
    assert len(both) == 2
    [acme] = staff.get(LIST_URL, {"tenantId": "acme"}).json()
    assert acme["metadata"] == tenant_metadata("acme", "o1")
    assert acme["scopeKey"] == '["u1","acme","o1"]'
    assert acme["messageCount"] == 2
    [zed] = staff.get(LIST_URL, {"orgId": "o2"}).json()
    assert zed["scopeKey"] == '["u1","zed","o2"]'
    assert staff.get(LIST_URL, {"tenantId": "acme", "orgId": "o2"}).json() == []
    assert staff.get(LIST_URL, {"tenantId": "acme", "userId": "u2"}).json() == []
    assert [s["ref"] for s in staff.get(LIST_URL, {"tenantId": "zed", "userId": "u1"}).json()] == [
        zed["ref"]
    ]
    # The detail shows the scope key too.
    detail = staff.get(detail_url(zed["ref"])).json()
    assert detail["scopeKey"] == zed["scopeKey"]
    assert [m["message"]["content"] for m in detail["messages"]] == ["Hi", "zed"]


@override_settings(ANVIA_DJANGO=TENANTS)
def test_values_match_exactly_and_only_as_strings(staff: APIClient) -> None:
    make_tenant_conversations(1, tenant="acme", prefix="acme")
    make_tenant_conversations(1, tenant="ACME", prefix="upper")
    make_tenant_conversations(1, tenant="acme ", prefix="spaced")
    make_tenant_conversations(1, tenant="5", prefix="text")
    make_conversations(1, prefix="number")  # metadata {"index": 0}: no tenant at all
    numbered = make_conversations(1, prefix="numeric")
    numbered[0].metadata = {"tenant_id": 5, "org": {"id": 5}}
    numbered[0].save()
    nested = make_conversations(1, prefix="nested")
    nested[0].metadata = {"tenant_id": {"id": "acme"}, "org.id": "o1"}
    nested[0].save()
    assert sessions(staff, tenantId="acme") == ["acme-0"]
    assert sessions(staff, tenantId="ACME") == ["upper-0"]
    assert sessions(staff, tenantId="5") == ["text-0"]
    # "org.id" is a path: a key named "org.id" is not it.
    assert sessions(staff, orgId="o1") == ["acme-0", "spaced-0", "text-0", "upper-0"]
    assert sessions(staff, tenantId="nobody") == []


@override_settings(ANVIA_DJANGO=TENANTS)
def test_bad_values_are_a_400_naming_the_parameter(staff: APIClient) -> None:
    for value in ("", "a\x00b", "x" * 1000):
        response = staff.get(LIST_URL, {"tenantId": value})
        assert response.status_code == 400
        assert set(response.json()) == {"tenantId"}


def test_without_metadata_keys_the_params_are_refused(staff: APIClient) -> None:
    make_tenant_conversations(2, tenant="acme", prefix="acme")
    make_tenant_conversations(1, tenant="zed", prefix="zed")
    # Not ignored: that would list every tenant to a client that meant one.
    response = staff.get(LIST_URL, {"tenantId": "acme"})
    assert response.status_code == 400
    assert list(response.json()) == ["tenantId"]


@override_settings(ANVIA_DJANGO=TENANTS)
def test_a_misspelt_filter_is_a_400_naming_it(staff: APIClient) -> None:
    make_tenant_conversations(1, tenant="acme", prefix="acme")
    make_tenant_conversations(1, tenant="zed", prefix="zed")
    response = staff.get(LIST_URL, {"regionId": "eu", "tenant_id": "acme"})
    assert response.status_code == 400
    errors = response.json()
    assert set(errors) == {"regionId", "tenant_id"}
    assert errors["tenant_id"] == [
        "tenant_id: not a parameter of this endpoint "
        "(it takes cursor, format, limit, orgId, q, tenantId, userId)"
    ]
    assert sessions(staff, tenantId="acme") == ["acme-0"]


@override_settings(ANVIA_DJANGO={**TENANTS, "INSPECTOR_DEFAULT_LIMIT": 3})
def test_pages_of_a_tenant_keep_the_filter(staff: APIClient) -> None:
    make_tenant_conversations(7, tenant="acme", prefix="acme")
    make_tenant_conversations(7, tenant="zed", prefix="zed")
    seen: list[str] = []
    url: str | None = f"{LIST_URL}?tenantId=acme"
    while url is not None:
        response = staff.get(url)
        seen.extend(item["sessionId"] for item in response.json())
        url = next_url(response)
    assert seen == [f"acme-{index}" for index in reversed(range(7))]


@pytest.mark.django_db(transaction=True)  # InnoDB's FULLTEXT index sees committed rows only
@override_settings(ANVIA_DJANGO=TENANTS)
def test_search_is_filtered_by_tenant(staff: APIClient) -> None:
    for tenant in ("acme", "zed"):
        metadata = tenant_metadata(tenant, "o1")
        append_messages(
            append_input("chat", [user("where is my parcel")], user_id="u1", metadata=metadata)
        )
    found = staff.get(LIST_URL, {"q": "parcel", "tenantId": "zed"}).json()
    assert [item["metadata"]["tenant_id"] for item in found] == ["zed"]
    assert len(staff.get(LIST_URL, {"q": "parcel"}).json()) == 2


@override_settings(ANVIA_DJANGO=TENANTS)
def test_a_tenant_list_costs_the_same_queries_whatever_the_rows(
    staff: APIClient, django_assert_num_queries: Any
) -> None:
    make_tenant_conversations(3, tenant="acme", prefix="acme")
    staff.get(LIST_URL, {"tenantId": "acme"})  # warm the compiled queries
    # One query for the page however many rows (force_authenticate: no
    # session or user query).
    with django_assert_num_queries(1) as captured:
        assert sessions(staff, tenantId="acme", orgId="o1") == ["acme-0", "acme-1", "acme-2"]
    listing = captured.captured_queries[-1]["sql"]
    make_tenant_conversations(300, tenant="zed", prefix="zed")
    for conversation in make_tenant_conversations(60, tenant="acme", prefix="more"):
        make_messages(conversation, 2)
    with django_assert_num_queries(1) as captured:
        assert len(sessions(staff, tenantId="acme", orgId="o1")) == 50
    assert captured.captured_queries[-1]["sql"] == listing


@override_settings(ANVIA_DJANGO=TENANTS)
def test_the_schema_documents_a_param_per_metadata_key(staff: APIClient) -> None:
    pytest.importorskip("drf_spectacular", reason="the openapi extra is not installed")
    schema = staff.get("/anvia/api/schema/", {"format": "json"}).json()
    listing = schema["paths"]["/anvia/api/conversations/"]["get"]
    names = {p["name"]: p for p in listing["parameters"]}
    assert {"tenantId", "orgId", "userId", "q", "limit", "cursor"} <= set(names)
    assert "`org.id`" in names["orgId"]["description"]
    assert names["tenantId"]["schema"] == {"type": "string"}
    summary = schema["components"]["schemas"]["ConversationSummary"]["properties"]
    assert summary["scopeKey"]["type"] == "string"


def test_without_metadata_keys_the_schema_has_no_tenant_param(staff: APIClient) -> None:
    pytest.importorskip("drf_spectacular", reason="the openapi extra is not installed")
    schema = staff.get("/anvia/api/schema/", {"format": "json"}).json()
    listing = schema["paths"]["/anvia/api/conversations/"]["get"]
    assert "tenantId" not in {p["name"] for p in listing["parameters"]}


# Owner mode: a tenant filter narrows what the owner sees, never widens it.


@pytest.fixture
def alice() -> User:
    return User.objects.create_user("alice")


def as_user(person: User) -> APIClient:
    client = APIClient()
    client.force_login(person)
    return client


@pytest.fixture
def owned(alice: User) -> None:
    mine = str(alice.pk)
    make_tenant_conversations(2, tenant="acme", user_id=mine, prefix="mine-acme")
    make_tenant_conversations(1, tenant="zed", user_id=mine, prefix="mine-zed")
    make_tenant_conversations(2, tenant="acme", user_id="someone-else", prefix="theirs-acme")
    make_tenant_conversations(1, tenant="acme", user_id=None, prefix="unowned-acme")


@override_settings(ANVIA_DJANGO=OWNER_MODE)
def test_owner_mode_with_a_tenant_shows_the_owners_rows_of_it(alice: User, owned: None) -> None:
    client = as_user(alice)
    assert sessions(client, tenantId="acme") == ["mine-acme-0", "mine-acme-1"]
    assert sessions(client, tenantId="zed") == ["mine-zed-0"]
    assert sessions(client, tenantId="nobody") == []
    assert sessions(client) == ["mine-acme-0", "mine-acme-1", "mine-zed-0"]


@override_settings(ANVIA_DJANGO=OWNER_MODE)
def test_owner_mode_with_a_tenant_and_another_user_shows_nothing(alice: User, owned: None) -> None:
    client = as_user(alice)
    assert sessions(client, tenantId="acme", userId="someone-else") == []
    assert sessions(client, tenantId="acme", userId=str(alice.pk)) == [
        "mine-acme-0",
        "mine-acme-1",
    ]


@override_settings(
    ANVIA_DJANGO={**OWNER_MODE, "INSPECTOR_USER_RESOLVER": "tests.test_api_owner.nobody_resolver"}
)
def test_owner_mode_without_an_owner_shows_no_tenant(alice: User, owned: None) -> None:
    client = as_user(alice)
    assert sessions(client, tenantId="acme") == []
    assert sessions(client, orgId="o1") == []
