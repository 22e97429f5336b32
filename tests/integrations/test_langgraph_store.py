"""DjangoStore, LangGraph's long-term memory on Django's connections.

The behaviours of the official Postgres store's tests (langgraph
``libs/checkpoint-postgres/tests/test_store.py``: batch order, batches of
each operation, basic operations, namespace listing, search, TTL), written
for this store, plus operators in filters, TTL on a controlled clock (no
sleeping), the sweep, the async API and sealed values.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.test import override_settings
from langgraph.store.base import GetOp, Item, ListNamespacesOp, MatchCondition, PutOp, SearchOp

from anvia_django.integrations.langgraph import store_items
from anvia_django.integrations.langgraph.models import LangGraphStoreItem
from anvia_django.integrations.langgraph.store import DjangoStore
from tests.encryption.support import encryption

pytestmark = pytest.mark.django_db


class Clock:
    def __init__(self) -> None:
        self.moment = datetime(2026, 12, 6, 9, 0, tzinfo=UTC)

    def now(self) -> datetime:
        return self.moment

    def advance(self, **delta: float) -> None:
        self.moment += timedelta(**delta)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(store_items, "timezone", SimpleNamespace(now=clock.now))
    return clock


@pytest.fixture
def store() -> DjangoStore:
    return DjangoStore()


def test_a_batch_answers_each_operation_in_order(store: DjangoStore) -> None:
    store.put(("test", "foo"), "key1", {"data": "value1"})
    store.put(("test", "bar"), "key2", {"data": "value2"})

    results: list[Any] = store.batch(
        [
            GetOp(("test", "foo"), "key1"),
            PutOp(("test", "bar"), "key2", {"data": "changed"}),
            SearchOp(("test",), filter={"data": "value1"}),
            ListNamespacesOp(),
            GetOp(("test",), "missing"),
            GetOp(("test", "bar"), "key2"),  # sees the put before it
            PutOp(("test", "foo"), "key1", None),  # a delete
            SearchOp(("test",)),
        ]
    )

    assert isinstance(results[0], Item)
    assert results[0].value == {"data": "value1"}
    assert results[1] is None
    assert [item.key for item in results[2]] == ["key1"]
    assert results[3] == [("test", "bar"), ("test", "foo")]
    assert results[4] is None
    assert results[5].value == {"data": "changed"}
    assert results[6] is None
    assert [item.key for item in results[7]] == ["key2"]


def test_put_get_update_and_delete(store: DjangoStore, clock: Clock) -> None:
    namespace = ("test", "documents")
    store.put(namespace, "doc1", {"title": "Test Document", "content": "Hello, World!"})
    first = store.get(namespace, "doc1")
    assert first is not None
    assert (first.namespace, first.key) == (namespace, "doc1")
    assert first.value == {"title": "Test Document", "content": "Hello, World!"}

    clock.advance(seconds=1)
    store.put(namespace, "doc1", {"title": "Updated", "content": "ünïcode ✓"})
    updated = store.get(namespace, "doc1")
    assert updated is not None
    assert updated.value == {"title": "Updated", "content": "ünïcode ✓"}
    assert updated.updated_at > first.updated_at
    assert updated.created_at == first.created_at

    assert store.get(("test", "other_documents"), "doc1") is None
    assert store.get(("test",), "doc1") is None  # a prefix is another namespace
    store.delete(namespace, "doc1")
    assert store.get(namespace, "doc1") is None


def test_list_namespaces(store: DjangoStore) -> None:
    namespaces = [
        ("test", "documents", "public"),
        ("test", "documents", "private"),
        ("test", "images", "public"),
        ("test", "images", "private"),
        ("prod", "documents", "public"),
        ("prod", "documents", "private"),
    ]
    for namespace in namespaces:
        store.put(namespace, "dummy", {"content": "dummy"})

    assert store.list_namespaces() == sorted(namespaces)
    assert store.list_namespaces(prefix=("test",)) == sorted(namespaces[:4])
    assert store.list_namespaces(suffix=("public",)) == sorted(
        ns for ns in namespaces if ns[-1] == "public"
    )
    assert store.list_namespaces(prefix=("*", "documents")) == sorted(
        ns for ns in namespaces if ns[1] == "documents"
    )
    assert store.list_namespaces(max_depth=2) == [
        ("prod", "documents"),
        ("test", "documents"),
        ("test", "images"),
    ]
    assert store.list_namespaces(limit=3) == sorted(namespaces)[:3]
    assert store.list_namespaces(limit=3, offset=4) == sorted(namespaces)[4:]
    results = store.batch(
        [ListNamespacesOp(match_conditions=(MatchCondition("suffix", ("images", "*")),))]
    )
    assert results[0] == [("test", "images", "private"), ("test", "images", "public")]


def test_search_by_namespace_filter_and_page(store: DjangoStore, clock: Clock) -> None:
    data: list[tuple[tuple[str, ...], str, dict[str, Any]]] = [
        (("test", "docs"), "doc1", {"title": "First", "author": "Alice", "score": 3}),
        (("test", "docs"), "doc2", {"title": "Second", "author": "Bob", "score": 5}),
        (("test", "images"), "img1", {"title": "Image", "author": "Alice"}),
        (("tested",), "other", {"author": "Alice"}),  # shares a prefix, not a label
    ]
    for namespace, key, value in data:
        clock.advance(seconds=1)
        store.put(namespace, key, value)

    # Newest first.
    assert [item.key for item in store.search(("test",))] == ["img1", "doc2", "doc1"]
    assert [item.key for item in store.search(("test", "docs"))] == ["doc2", "doc1"]
    assert [item.key for item in store.search(())] == ["other", "img1", "doc2", "doc1"]
    alice = store.search(("test",), filter={"author": "Alice"})
    assert [item.key for item in alice] == ["img1", "doc1"]
    assert [item.key for item in store.search(("test",), limit=2)] == ["img1", "doc2"]
    assert [item.key for item in store.search(("test",), offset=2)] == ["doc1"]
    assert [i.key for i in store.search(("test",), filter={"score": {"$gt": 3}})] == ["doc2"]
    assert [i.key for i in store.search(("test",), filter={"score": {"$lte": 3}})] == ["doc1"]
    # A missing field matches $ne only.
    not_bob = store.search(("test",), filter={"author": {"$ne": "Bob"}})
    assert [item.key for item in not_bob] == ["img1", "doc1"]
    assert [i.key for i in store.search(("test",), filter={"score": {"$ne": 3}})] == [
        "img1",
        "doc2",
    ]


def test_ttl_expires_and_reads_refresh_it(clock: Clock) -> None:
    store = DjangoStore(ttl={"default_ttl": 10, "refresh_on_read": True})
    store.put(("foo",), "item1", {"foo": "bar"})
    store.put(("foo",), "forever", {"foo": "baz"}, ttl=None)

    clock.advance(minutes=8)
    assert store.get(("foo",), "item1") is not None  # refreshed: 10 more minutes
    clock.advance(minutes=8)
    assert len(store.search(("foo",), filter={"foo": "bar"})) == 1  # refreshed again
    clock.advance(minutes=8)
    assert store.get(("foo",), "item1", refresh_ttl=False) is not None  # not refreshed
    clock.advance(minutes=3)

    assert store.get(("foo",), "item1") is None
    assert store.search(("foo",), filter={"foo": "bar"}) == []
    assert store.list_namespaces() == [("foo",)]  # "forever" is still there
    assert store.sweep_ttl() == 1
    assert list(LangGraphStoreItem.objects.values_list("key", flat=True)) == ["forever"]
    clock.advance(days=365)
    assert store.get(("foo",), "forever") is not None


def test_reads_do_not_refresh_when_the_store_says_so(clock: Clock) -> None:
    store = DjangoStore(ttl={"default_ttl": 10, "refresh_on_read": False})
    store.put(("foo",), "item1", {"foo": "bar"})
    clock.advance(minutes=8)
    assert store.get(("foo",), "item1") is not None
    clock.advance(minutes=3)
    assert store.get(("foo",), "item1") is None
    assert store.list_namespaces() == []


def test_the_async_api() -> None:
    store = DjangoStore()

    async def use() -> tuple[Any, Any, Any]:
        await store.aput(("users", "u1"), "prefs", {"theme": "dark"})
        await store.aput(("users", "u2"), "prefs", {"theme": "light"})
        found = await store.aget(("users", "u1"), "prefs")
        dark = await store.asearch(("users",), filter={"theme": "dark"})
        await store.adelete(("users", "u1"), "prefs")
        return found, dark, await store.alist_namespaces()

    found, dark, namespaces = async_to_sync(use)()

    assert found.value == {"theme": "dark"}
    assert [item.namespace for item in dark] == [("users", "u1")]
    assert namespaces == [("users", "u2")]


def test_sealed_values_hold_no_plain_text() -> None:
    with override_settings(ANVIA_DJANGO=encryption()):
        store = DjangoStore()
        store.put(("users", "u1"), "secret", {"text": "the launch code is 0000"})
        store.put(("users", "u2"), "secret", {"text": "nothing"})

        raw = bytes(LangGraphStoreItem.objects.get(namespace="users.u1").value)
        assert b"launch code" not in raw
        item = store.get(("users", "u1"), "secret")
        assert item is not None
        assert item.value == {"text": "the launch code is 0000"}
        assert [i.key for i in store.search(("users",), filter={"text": "nothing"})] == ["secret"]
    # Stored before encryption was on: read as it is.
    DjangoStore().put(("plain",), "k", {"a": 1})
    with override_settings(ANVIA_DJANGO=encryption()):
        item = DjangoStore().get(("plain",), "k")
        assert item is not None
        assert item.value == {"a": 1}
