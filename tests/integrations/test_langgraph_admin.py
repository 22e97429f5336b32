"""LangGraph's checkpoints in the admin: newest first, searchable by
thread, a checkpoint's channel values decoded (the messages as a
transcript) with its pending writes, a list whose queries do not grow with
its rows, and for staff whom the tenant restriction limits, the threads
whose ids carry their tenants alone. The store's items likewise: newest
first, by exact namespace, values decoded (opened when sealed), their
tenants' namespaces alone for tenant-limited staff."""

from __future__ import annotations

import re
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import Permission, User
from django.test import Client, override_settings

from anvia_django.integrations.langgraph import DjangoSaver
from anvia_django.integrations.langgraph.models import LangGraphCheckpoint, LangGraphStoreItem
from anvia_django.integrations.langgraph.scopes import scoped_namespace, scoped_thread_id
from anvia_django.integrations.langgraph.store import DjangoStore
from tests.encryption.support import encryption

from .langgraph_support import chat_graph, thread

pytestmark = pytest.mark.django_db

CHECKPOINTS = "/admin/anvia_django/langgraphcheckpoint/"
ITEMS = "/admin/anvia_django/langgraphstoreitem/"
RESTRICTED = {
    "SCOPE": {"user_id": True, "metadata_keys": ["tenant_id"]},
    "STAFF_TENANTS": "tests.test_staff_tenants.tenants_for",
}


@pytest.fixture
def viewer() -> Client:
    staff = User.objects.create(username="acme-staff", is_staff=True)
    staff.user_permissions.set(
        Permission.objects.filter(
            codename__in=["view_langgraphcheckpoint", "view_langgraphstoreitem"]
        )
    )
    client = Client()
    client.force_login(staff)
    return client


def chat(thread_id: str, *texts: str) -> None:
    graph = chat_graph(DjangoSaver())
    for text in texts:
        async_to_sync(graph.ainvoke)({"messages": [("user", text)]}, thread(thread_id))


def test_a_checkpoint_shows_its_values_decoded_and_its_writes(viewer: Client) -> None:
    chat("t1", "where is <b>order 42</b>?")
    latest = LangGraphCheckpoint.objects.filter(thread_id="t1").order_by("-checkpoint_id")[0]
    DjangoSaver().put_writes(
        thread(latest.thread_id, checkpoint_id=latest.checkpoint_id, checkpoint_ns=""),
        [("approved", "yes, by Ana")],
        "task-7",
    )

    page = viewer.get(f"{CHECKPOINTS}{latest.pk}/change/")

    assert page.status_code == 200
    html = page.content.decode()
    assert "<strong>human</strong> where is &lt;b&gt;order 42&lt;/b&gt;?" in html  # escaped
    assert "<strong>ai</strong> reply 1" in html
    assert "task-7 → approved" in html
    assert "yes, by Ana" in html
    assert latest.parent_checkpoint_id in html


def test_the_list_is_newest_first_searchable_and_its_queries_constant(
    viewer: Client, django_assert_max_num_queries: Any
) -> None:
    chat("t1", "one")
    chat("t2", "two")
    ids = list(
        LangGraphCheckpoint.objects.filter(thread_id="t1")
        .order_by("-checkpoint_id")
        .values_list("checkpoint_id", flat=True)
    )

    html = viewer.get(CHECKPOINTS, {"q": "t1"}).content.decode()
    positions = [html.index(checkpoint_id) for checkpoint_id in ids]
    assert positions == sorted(positions)
    other = LangGraphCheckpoint.objects.filter(thread_id="t2").values_list(
        "checkpoint_id", flat=True
    )
    assert not any(checkpoint_id in html for checkpoint_id in other)
    upper = viewer.get(CHECKPOINTS, {"q": "T1"}).content.decode()  # another thread
    assert not any(checkpoint_id in upper for checkpoint_id in ids)

    with django_assert_max_num_queries(12) as few:
        viewer.get(CHECKPOINTS)
    chat("t3", "three", "four", "five")
    with django_assert_max_num_queries(len(few)):
        viewer.get(CHECKPOINTS)


@override_settings(ANVIA_DJANGO=RESTRICTED)
def test_staff_limited_to_tenants_see_their_tenants_threads(viewer: Client) -> None:
    acme = scoped_thread_id("chat", user_id="u1", tenant="acme")
    others = [scoped_thread_id("chat", user_id="u1", tenant=tenant) for tenant in ("Acme", "acme2")]
    # Starts as acme's ids do, but thread_scope reads no tenant in it.
    others.append("anvia:t=acme:x:y")
    for thread_id in (acme, *others, "plain"):
        chat(thread_id, "hello")
    superuser = Client()
    superuser.force_login(User.objects.create(username="root", is_staff=True, is_superuser=True))
    every = superuser.get(CHECKPOINTS).content.decode()
    assert all(thread_id in every for thread_id in (acme, *others, "plain"))

    page = viewer.get(CHECKPOINTS)  # acme's staff
    assert page.status_code == 200
    shown = page.content.decode()
    assert acme in shown
    assert not any(thread_id in shown for thread_id in (*others, "plain"))
    plain = LangGraphCheckpoint.objects.filter(thread_id="plain").values_list("pk", flat=True)[0]
    assert viewer.get(f"{CHECKPOINTS}{plain}/change/").status_code in (302, 404)


def test_store_items_newest_first_by_namespace_with_constant_queries(
    viewer: Client, django_assert_max_num_queries: Any
) -> None:
    store = DjangoStore()
    store.put(("users", "u1"), "key-older", {"text": "older"})
    store.put(("users", "u2"), "key-newer", {"text": "newer"})

    html = viewer.get(ITEMS).content.decode()
    assert html.index("key-newer") < html.index("key-older")
    found = viewer.get(ITEMS, {"q": "users.u1"}).content.decode()
    assert "key-older" in found
    assert "key-newer" not in found
    assert "users.u1" not in viewer.get(ITEMS, {"q": "users"}).content.decode()  # exact
    assert "key-older" not in viewer.get(ITEMS, {"q": "USERS.u1"}).content.decode()  # case too

    with django_assert_max_num_queries(12) as few:
        viewer.get(ITEMS)
    store.put(("users", "u3"), "key-third", {"text": "x" * 10_000}, ttl=5)
    with django_assert_max_num_queries(len(few)) as after:
        viewer.get(ITEMS)
    value_read = [query["sql"] for query in after if re.search(r'["`]value["`]', query["sql"])]
    assert value_read == [], "the list reads no value"


def test_a_store_item_shows_its_value_opened_when_sealed(viewer: Client) -> None:
    with override_settings(ANVIA_DJANGO=encryption()):
        DjangoStore().put(("users", "u1"), "prefs", {"note": "the <b>launch</b> code"})
        item = LangGraphStoreItem.objects.get(key="prefs")
        assert b"launch" not in bytes(item.value)  # sealed

        html = viewer.get(f"{ITEMS}{item.pk}/change/").content.decode()

    assert "the &lt;b&gt;launch&lt;/b&gt; code" in html  # opened, escaped
    assert "users.u1" in html


@override_settings(ANVIA_DJANGO=RESTRICTED)
def test_staff_limited_to_tenants_see_their_tenants_store_items(viewer: Client) -> None:
    store = DjangoStore()
    store.put(scoped_namespace("memories", user_id="u1", tenant="acme"), "key-acme", {"n": 1})
    store.put(scoped_namespace("memories", user_id="u1", tenant="acme2"), "key-other", {"n": 2})
    store.put(("users", "u1"), "key-plain", {"n": 3})
    store.put(("anvia:t=acme:x", "memories"), "key-not-scoped", {"n": 4})  # not of the form
    plain = LangGraphStoreItem.objects.get(key="key-plain")

    shown = viewer.get(ITEMS).content.decode()  # acme's staff

    assert "key-acme" in shown
    assert "key-other" not in shown
    assert "key-not-scoped" not in shown
    assert "key-plain" not in shown
    assert viewer.get(f"{ITEMS}{plain.pk}/change/").status_code == 302  # "does not exist"
