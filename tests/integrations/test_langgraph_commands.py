"""LangGraph's threads and store items in ``anvia_memory`` (issue 39): a
thread id carries its user and tenant (``scoped_thread_id``, one parser),
and ``clear``, ``erase``, ``prune``, ``export`` and ``sweep`` reach them."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable
from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.core.management.base import OutputWrapper
from django.db import DEFAULT_DB_ALIAS, connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from hypothesis import example, given
from hypothesis import strategies as st
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.base import empty_checkpoint

from anvia_django.core.memory import InvalidMemoryInputError
from anvia_django.encryption.keys import owner_of_namespace, owner_of_thread
from anvia_django.integrations.langgraph import DjangoSaver, export, removal
from anvia_django.integrations.langgraph.maintenance import (
    ScopeSelection,
    leftover_thread_ids,
    thread_ids_of,
)
from anvia_django.integrations.langgraph.models import (
    LangGraphBlob,
    LangGraphCheckpoint,
    LangGraphStoreItem,
    LangGraphWrite,
)
from anvia_django.integrations.langgraph.scopes import (
    ThreadScope,
    escape,
    namespace_scope,
    scope_prefix,
    scoped_namespace,
    scoped_thread_id,
    tenant_pattern,
    thread_scope,
    user_threads,
)
from anvia_django.integrations.langgraph.store import DjangoStore
from anvia_django.management import key_ops, memory_ops
from anvia_django.models import DataKey
from tests.encryption.support import encryption

TENANTS = {"SCOPE": {"user_id": True, "metadata_keys": ["tenant_id"]}}


@pytest.mark.parametrize(
    ("thread", "user_id", "tenant"),
    [
        ("chat-1", "u1", "acme"),
        ("a:b.c%3A%", "ana@example.com", "t:1.%"),
        ("anvia:t=x:u=y:z", None, "acme"),
        ("t=x", "u=1:", None),
        ("ünï 😀", None, None),
    ],
)
def test_a_thread_id_carries_its_user_and_tenant_back(
    thread: str, user_id: str | None, tenant: str | None
) -> None:
    built = scoped_thread_id(thread, user_id=user_id, tenant=tenant)
    assert thread_scope(built) == ThreadScope(thread, user_id, tenant)
    if user_id is not None or tenant is not None:
        namespace = scoped_namespace("memories", user_id=user_id, tenant=tenant)
        assert not any("." in label for label in namespace)  # LangGraph refuses dots
        assert namespace_scope(".".join(namespace)) == ThreadScope("", user_id, tenant)


def test_ids_not_made_by_the_helper_carry_nothing_and_bad_parts_are_refused() -> None:
    for plain in ("t1", "anvia:t=acme:", "anvia:t=a%ZZ:x", "anvia:t=a:b:c"):
        assert thread_scope(plain) == ThreadScope(plain)
    assert namespace_scope(("u1", "memories")) is None
    for bad in ({"thread": ""}, {"thread": "x", "user_id": " "}, {"thread": "x", "tenant": "a\0"}):
        with pytest.raises(InvalidMemoryInputError):
            scoped_thread_id(**bad)
    with pytest.raises(InvalidMemoryInputError, match="thread_id: is 261 characters"):
        scoped_thread_id("x" * 250, user_id="u1")
    with pytest.raises(InvalidMemoryInputError, match="namespace"):
        scoped_namespace("memories")


USERS = ("b.o+(b)", "B.O+(B)")
"""Users differing in case alone, with a dot to escape and regular expression syntax."""
ID_PARTS = ("anvia:", "t=", "u=", ":", "%3A", "%3a", "%2E", "%25", "%", ".", "x", *USERS)
PARTS = st.lists(st.sampled_from(ID_PARTS), max_size=3).map("".join)
"""Text of the id form's parts, escaped or not."""


@given(
    st.sampled_from(USERS),
    st.sampled_from(USERS),
    st.just("") | PARTS.map("t={}:".format),
    PARTS,
    st.lists(st.sampled_from(ID_PARTS), max_size=8).map("".join),
)
@example(USERS[0], USERS[0], "", "x", "")  # the user's punctuation, escaped
@example(USERS[0], USERS[1], "t=x:", "x", "")  # another user, in case alone
@example(USERS[0], USERS[0], "t=a.b:", "x", "anvia:t=a:b:u=b%2Eo+(b):x")  # tenants not escaped
@example(USERS[0], USERS[0], "t=x:", "a.b", "anvia:u=b%2Eo+(b):x:y")  # threads not escaped
def test_a_users_thread_pattern_matches_the_ids_thread_scope_reads_them_in(
    user_id: str, named: str, tenant: str, thread: str, other: str
) -> None:
    for thread_id in (
        f"anvia:{tenant}u={escape(named)}:{thread}",
        f"anvia:{tenant}{thread}",
        other,
    ):
        theirs = thread_scope(thread_id).user_id == user_id
        find = user_threads(user_id)
        alone = thread_id.startswith(find.alone) and re.search(find.alone_pattern, thread_id)
        in_a_tenant = (
            thread_id.startswith(find.in_a_tenant)
            and find.named in thread_id
            and re.search(find.in_a_tenant_pattern, thread_id)
        )
        assert bool(alone or in_a_tenant) == theirs, thread_id


TENANTS_ALIKE = ("a.c+(e)", "A.C+(E)")
"""Tenants differing in case alone, with a dot to escape and regular expression syntax."""


@given(
    st.sampled_from(TENANTS_ALIKE),
    st.sampled_from(TENANTS_ALIKE),
    st.just("") | PARTS.map("u={}:".format),
    PARTS,
    st.lists(st.sampled_from(ID_PARTS), max_size=8).map("".join),
)
@example(TENANTS_ALIKE[0], TENANTS_ALIKE[0], "", "x", "")
@example(TENANTS_ALIKE[0], TENANTS_ALIKE[0], "", "x:y", "anvia:t=a%2Ec+(e):x:y")  # no tenant
def test_a_tenants_pattern_matches_the_ids_and_namespaces_scope_reads_them_in(
    tenant: str, named: str, user: str, rest: str, other: str
) -> None:
    for text in (f"anvia:t={escape(named)}:{user}{rest}", other):
        prefix = scope_prefix(tenant=tenant)
        as_thread = bool(text.startswith(prefix) and re.search(tenant_pattern(tenant), text))
        assert as_thread == (thread_scope(text).tenant == tenant), text
        pattern = tenant_pattern(tenant, namespace=True)
        as_namespace = bool(text.startswith(prefix) and re.search(pattern, text))
        found = namespace_scope(text)
        assert as_namespace == (found is not None and found.tenant == tenant), text


def put(thread_id: str, *texts: str, steps: int = 1) -> None:
    """``steps`` checkpoints of ``thread_id`` holding ``texts`` as messages."""
    saver = DjangoSaver()
    config: Any = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    for step in range(1, steps + 1):
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {"messages": [HumanMessage(text) for text in texts]}
        checkpoint["channel_versions"] = {"messages": step}
        config = saver.put(config, checkpoint, {"step": step}, {"messages": step})
    saver.put_writes(config, [("approved", "yes")], "task-1")


def memory(*args: str) -> str:
    out, err = StringIO(), StringIO()
    call_command("anvia_memory", *args, stdout=out, stderr=err)
    return out.getvalue() + err.getvalue()


def threads() -> set[str]:
    return set(LangGraphCheckpoint.objects.values_list("thread_id", flat=True))


ACME_U1 = scoped_thread_id("chat", user_id="u1", tenant="acme")
UPPER_U1 = scoped_thread_id("chat", user_id="u1", tenant="Acme")
ACME_U10 = scoped_thread_id("chat", user_id="u10", tenant="acme")
U1 = scoped_thread_id("chat", user_id="u1")


@pytest.mark.django_db
def test_a_users_or_tenants_threads_are_matched_exactly() -> None:
    for thread_id in (ACME_U1, UPPER_U1, ACME_U10, U1, "u1"):
        put(thread_id, "hi")

    assert thread_ids_of(ScopeSelection(tenant="acme")) == sorted([ACME_U1, ACME_U10])
    assert thread_ids_of(ScopeSelection(user_id="u1", tenant="acme")) == [ACME_U1]
    assert thread_ids_of(ScopeSelection(user_id="u1")) == sorted([ACME_U1, UPPER_U1, U1])


@pytest.mark.django_db
def test_clear_deletes_the_users_threads_and_items_and_nothing_else() -> None:
    put(U1, "mine")
    put(ACME_U10, "theirs")
    store = DjangoStore()
    store.put(scoped_namespace("memories", user_id="u1"), "food", {"likes": "pizza"})
    store.put(scoped_namespace("memories", user_id="u10"), "food", {"likes": "soup"})

    dry = memory("clear", "--user", "u1", "--dry-run")
    assert "1 LangGraph thread (1 checkpoint) and 1 store item" in dry
    assert threads() == {U1, ACME_U10}

    said = memory("clear", "--user", "u1", "--yes")

    assert "Deleted 0 conversations (0 messages), 1 LangGraph thread" in said
    assert threads() == {ACME_U10}
    assert not LangGraphWrite.objects.filter(thread_id=U1).exists()
    assert not LangGraphBlob.objects.filter(thread_id=U1).exists()
    assert list(LangGraphStoreItem.objects.values_list("namespace", flat=True)) == [
        "anvia:u=u10:.memories"
    ]


@pytest.mark.django_db
@override_settings(ANVIA_DJANGO=encryption())
def test_clear_forgets_the_keys_of_the_namespaces_it_empties(
    django_capture_on_commit_callbacks: Any,
) -> None:
    store = DjangoStore()
    mine = scoped_namespace("memories", user_id="u1")
    theirs = scoped_namespace("memories", user_id="u10")
    for key in ("food", "drink", "town"):
        store.put(mine, key, {"likes": key})
    store.put(theirs, "food", {"likes": "soup"})
    owners = {ns: owner_of_namespace(".".join(ns)) for ns in (mine, theirs)}
    assert set(owners.values()) <= set(DataKey.objects.values_list("owner", flat=True))

    with django_capture_on_commit_callbacks(execute=True):
        said = memory("clear", "--user", "u1", "--yes")

    assert "3 store items" in said
    left = set(DataKey.objects.values_list("owner", flat=True))
    assert owners[mine] not in left
    assert owners[theirs] in left
    assert store.get(theirs, "food") is not None


@pytest.mark.django_db
@override_settings(ANVIA_DJANGO=TENANTS)
def test_a_user_in_several_tenants_needs_one_named() -> None:
    put(ACME_U1, "acme")
    put(UPPER_U1, "other")

    with pytest.raises(CommandError) as refused:
        memory("clear", "--user", "u1", "--yes")
    assert str(refused.value).endswith(
        " are in 2 tenants (tenant_id 'Acme', tenant_id 'acme'): name one with --tenant-id, "
        "or pass --all-tenants to delete those of every tenant. Nothing was done."
    )
    assert threads() == {ACME_U1, UPPER_U1}

    memory("clear", "--user", "u1", "--tenant-id", "acme", "--yes")
    assert threads() == {UPPER_U1}


@pytest.mark.django_db
def test_erase_destroys_the_threads_and_namespaces_keys_then_deletes() -> None:
    with override_settings(ANVIA_DJANGO={**encryption(), **TENANTS}):
        put(ACME_U1, "my secret")
        put(ACME_U10, "not mine")
        namespace = scoped_namespace("memories", user_id="u1", tenant="acme")
        DjangoStore().put(namespace, "food", {"likes": "pizza"})
        mine = {owner_of_thread(ACME_U1), owner_of_namespace(".".join(namespace))}
        assert mine <= set(DataKey.objects.values_list("owner", flat=True))

        said = memory("erase", "--user", "u1", "--tenant-id", "acme", "--yes")

        assert "1 LangGraph thread (1 checkpoint) and 1 store item" in said
        assert "2 data key(s) destroyed." in said
        left = set(DataKey.objects.values_list("owner", flat=True))
        assert not mine & left
        assert owner_of_thread(ACME_U10) in left
        assert threads() == {ACME_U10}
        assert not LangGraphStoreItem.objects.exists()


def writing_while_asked(thread_id: str, asked: list[str]) -> Callable[[str], bool]:
    """A confirmation that notes its question, writes ``thread_id`` (a
    thread the user makes while the prompt waits) and says yes."""

    def confirm(question: str) -> bool:
        asked.append(question)
        put(thread_id, "written while the prompt waited")
        return True

    return confirm


@pytest.mark.django_db
def test_erase_takes_the_threads_made_while_it_asked() -> None:
    late = scoped_thread_id("late", user_id="u1")
    asked: list[str] = []
    confirm = writing_while_asked(late, asked)

    with override_settings(ANVIA_DJANGO=encryption()):
        put(U1, "mine")
        said = StringIO()
        key_ops.erase_user(OutputWrapper(said), user_id="u1", interactive=True, confirm=confirm)

        assert "1 LangGraph thread (1 checkpoint)" in asked[0]
        assert "2 LangGraph threads (2 checkpoints)" in said.getvalue()
        assert threads() == set()
        assert not DataKey.objects.filter(owner=owner_of_thread(late)).exists()


@pytest.mark.django_db
def test_clear_takes_the_threads_made_while_it_asked() -> None:
    late = scoped_thread_id("late", user_id="u1")
    asked: list[str] = []
    confirm = writing_while_asked(late, asked)

    put(U1, "mine")
    said = StringIO()
    memory_ops.clear_conversations(
        OutputWrapper(said),
        session=None,
        user_id="u1",
        interactive=True,
        confirm=confirm,
        dry_run=False,
    )

    assert "1 LangGraph thread (1 checkpoint)" in asked[0]
    assert "2 LangGraph threads (2 checkpoints)" in said.getvalue()
    assert threads() == set()


@pytest.mark.django_db
def test_prune_deletes_threads_whose_latest_checkpoint_is_old_in_batches() -> None:
    put("old", "bye", steps=3)
    put("new", "hi")
    long_ago = timezone.now() - timedelta(days=40)
    LangGraphCheckpoint.objects.filter(thread_id="old").update(created_at=long_ago)

    assert "1 LangGraph thread (3 checkpoints)" in memory(
        "prune", "--older-than", "30d", "--dry-run"
    )
    with CaptureQueriesContext(connection) as queries:
        said = memory("prune", "--older-than", "30d", "--batch-size", "2", "--yes")

    assert "Deleted 1 LangGraph thread (3 checkpoints) last written before" in said
    assert threads() == {"new"}
    assert not LangGraphBlob.objects.filter(thread_id="old").exists()
    assert not LangGraphWrite.objects.filter(thread_id="old").exists()
    table = LangGraphCheckpoint._meta.db_table
    deletes = [q["sql"] for q in queries.captured_queries if q["sql"].startswith("DELETE")]
    assert len([sql for sql in deletes if table in sql.split("WHERE")[0]]) == 2  # 3 rows, 2 a batch


def resume(thread_id: str, text: str) -> None:
    """A new checkpoint of ``thread_id`` after its latest that changes its
    messages alone: its other channels keep their versions (and values)."""
    saver = DjangoSaver()
    latest = saver.get_tuple({"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}})
    assert latest is not None
    checkpoint = latest.checkpoint.copy()
    version = int(checkpoint["channel_versions"]["messages"]) + 1
    checkpoint["id"] = empty_checkpoint()["id"]
    checkpoint["channel_values"] = {"messages": [HumanMessage(text)]}
    checkpoint["channel_versions"] = {**checkpoint["channel_versions"], "messages": version}
    saver.put(latest.config, checkpoint, {"step": version}, {"messages": version})


@pytest.mark.django_db
def test_prune_keeps_a_thread_resumed_after_its_age_was_checked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    saver = DjangoSaver()
    config: Any = {"configurable": {"thread_id": "old", "checkpoint_ns": ""}}
    first = empty_checkpoint()
    first["channel_values"] = {"messages": [HumanMessage("hi")], "topic": "refunds"}
    first["channel_versions"] = {"messages": 1, "topic": 1}
    saver.put(config, first, {"step": 1}, {"messages": 1, "topic": 1})
    resume("old", "bye")
    resume("old", "bye again")
    LangGraphCheckpoint.objects.update(created_at=timezone.now() - timedelta(days=40))
    cutoff = timezone.now() - timedelta(days=30)
    checked = removal._fresh_threads

    def resumed_after_the_check(alias: str, thread_ids: list[str], cutoff: Any) -> set[str]:
        fresh = checked(alias, thread_ids, cutoff)
        if not LangGraphCheckpoint.objects.filter(created_at__gte=cutoff).exists():
            resume("old", "back again")  # lands after the check, before the delete
        return fresh

    monkeypatch.setattr(removal, "_fresh_threads", resumed_after_the_check)
    counts = removal.delete_threads_in_batches(["old"], batch_size=1, using=None, cutoff=cutoff)

    assert (counts.threads, counts.checkpoints) == (0, 1)  # the oldest, in the first batch
    assert LangGraphCheckpoint.objects.filter(thread_id="old").count() == 3
    latest = DjangoSaver().get_tuple({"configurable": {"thread_id": "old"}})
    assert latest is not None
    assert latest.checkpoint["channel_values"] == {
        "messages": [HumanMessage("back again")],
        "topic": "refunds",  # an older checkpoint's value, kept for the new one
    }


@pytest.mark.django_db
def test_export_writes_the_users_threads_decoded_and_items() -> None:
    put(U1, "where is order 42?", steps=2)
    put(ACME_U10, "not mine")
    DjangoStore().put(scoped_namespace("memories", user_id="u1"), "food", {"likes": "pizza"})

    out = StringIO()
    call_command("anvia_memory", "export", "--user", "u1", "-v", "0", stdout=out)
    records = [json.loads(line) for line in out.getvalue().splitlines()]

    assert [record["type"] for record in records] == [
        "langgraphThread",
        "langgraphCheckpoint",
        "langgraphCheckpoint",
        "langgraphStoreItem",
    ]
    assert records[0] | {"threadId": U1} == {
        "type": "langgraphThread",
        "threadId": U1,
        "thread": "chat",
        "userId": "u1",
        "tenant": None,
        "checkpointCount": 2,
    }
    latest = records[2]
    message = latest["channelValues"]["messages"][0]
    assert message["kwargs"]["content"] == "where is order 42?"
    assert latest["pendingWrites"] == [{"taskId": "task-1", "channel": "approved", "value": "yes"}]
    assert records[3]["namespace"] == ["anvia:u=u1:", "memories"]
    assert records[3]["value"] == {"likes": "pizza"}


@pytest.mark.django_db
def test_without_langgraph_a_checkpoint_is_exported_as_stored(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    put(U1, "hi")
    monkeypatch.setattr(export, "_decoder", lambda alias: export._as_stored)

    records = list(export.iter_thread_records([U1], batch_size=10))

    checkpoint = records[1]
    assert checkpoint["channelValues"] is None
    stored = LangGraphCheckpoint.objects.get(thread_id=U1)
    assert base64.b64decode(checkpoint["stored"]["base64"]) == bytes(stored.checkpoint)


@pytest.mark.django_db
def test_sweep_deletes_the_expired_store_items() -> None:
    store = DjangoStore()
    store.put(("memories",), "gone", {"v": 1}, ttl=1)
    store.put(("memories",), "kept", {"v": 2})
    LangGraphStoreItem.objects.filter(key="gone").update(
        expires_at=timezone.now() - timedelta(minutes=1)
    )

    assert "Would delete 1 expired store item" in memory("sweep", "--dry-run")
    assert "Deleted 1 expired store item." in memory("sweep")
    assert list(LangGraphStoreItem.objects.values_list("key", flat=True)) == ["kept"]


@pytest.mark.django_db
def test_commands_without_threads_say_what_they_said_before() -> None:
    assert memory("clear", "--user", "nobody", "--yes").strip() == (
        "User 'nobody' has no conversations; nothing cleared."
    )
    assert memory("prune", "--older-than", "1d", "--yes").startswith("No conversations")


@pytest.mark.django_db
@override_settings(ANVIA_DJANGO=TENANTS)
def test_export_of_a_tenant_writes_its_threads_alone() -> None:
    put(ACME_U1, "acme")
    put(UPPER_U1, "other")

    out = StringIO()
    call_command("anvia_memory", "export", "--tenant-id", "acme", "-v", "0", stdout=out)

    records = [json.loads(line) for line in out.getvalue().splitlines()]
    assert {record["threadId"] for record in records} == {ACME_U1}


@pytest.mark.django_db
@override_settings(ANVIA_DJANGO={"SCOPE": {"metadata_keys": ["tenant_id", "org.id"]}})
def test_options_naming_another_key_leave_threads_alone_and_say_so() -> None:
    put(ACME_U1, "acme")

    said = memory("clear", "--user", "u1", "--tenant-id", "acme", "--org-id", "x", "--yes")

    assert "LangGraph threads and store items were left alone" in said
    assert threads() == {ACME_U1}
    memory("clear", "--user", "u1", "--tenant-id", "acme", "--yes")
    assert threads() == set()


def interrupt_after_checkpoints(monkeypatch: pytest.MonkeyPatch) -> None:
    """The next thread deletion stops once its checkpoints are gone, as a
    killed ``prune`` does between its batches."""

    def stopping(*args: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(removal, "_delete_group_rest", stopping)


@pytest.mark.django_db
def test_prune_deletes_what_an_interrupted_prune_left(
    monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: Any
) -> None:
    with override_settings(ANVIA_DJANGO=encryption()):
        put("old", "bye", steps=3)
        put("new", "hi")
        LangGraphCheckpoint.objects.filter(thread_id="old").update(
            created_at=timezone.now() - timedelta(days=40)
        )
        with monkeypatch.context() as patched:
            interrupt_after_checkpoints(patched)
            with pytest.raises(KeyboardInterrupt):
                memory("prune", "--older-than", "30d", "--yes")
        assert threads() == {"new"}
        assert LangGraphBlob.objects.filter(thread_id="old").count() == 3
        assert owner_of_thread("old") in set(DataKey.objects.values_list("owner", flat=True))

        dry = memory("prune", "--older-than", "30d", "--dry-run")
        assert "the rest of 1 half-deleted LangGraph thread" in dry
        with django_capture_on_commit_callbacks(execute=True):
            said = memory("prune", "--older-than", "30d", "--batch-size", "1", "--yes")

        assert "Deleted the rest of 1 half-deleted LangGraph thread" in said
        assert set(LangGraphBlob.objects.values_list("thread_id", flat=True)) == {"new"}
        assert set(LangGraphWrite.objects.values_list("thread_id", flat=True)) == {"new"}
        assert owner_of_thread("old") not in set(DataKey.objects.values_list("owner", flat=True))


@pytest.mark.django_db
@override_settings(ANVIA_DJANGO=encryption())
def test_threads_with_a_checkpoint_or_writes_alone_are_not_leftovers(
    django_capture_on_commit_callbacks: Any,
) -> None:
    put("gone", "bye")
    LangGraphCheckpoint.objects.filter(thread_id="gone").delete()
    put("first-put-pending", "hi")  # writes that came before their checkpoint
    LangGraphCheckpoint.objects.filter(thread_id="first-put-pending").delete()
    LangGraphBlob.objects.filter(thread_id="first-put-pending").delete()
    found = leftover_thread_ids(ScopeSelection())
    assert found == ["gone"]
    put("gone", "back again", steps=2)  # made again after the plan was read

    with django_capture_on_commit_callbacks(execute=True):
        assert removal.delete_leftovers_in_batches(found, batch_size=1, using=None) == []
    for batch_size in (1, 500):  # thread by thread, and the group in one transaction
        removal._delete_group_rest(DEFAULT_DB_ALIAS, ["gone"], batch_size)
    assert LangGraphBlob.objects.filter(thread_id="gone").count() == 2
    assert owner_of_thread("gone") in set(DataKey.objects.values_list("owner", flat=True))
    assert "Would delete 0 expired store items (dry run" in memory("sweep", "--dry-run")

    LangGraphCheckpoint.objects.filter(thread_id="gone").delete()
    assert "Deleted 0 expired store items and the rest of 1 half-deleted LangGraph thread." in (
        memory("sweep", "--batch-size", "1")
    )
    assert not LangGraphBlob.objects.filter(thread_id="gone").exists()
    assert LangGraphWrite.objects.filter(thread_id="first-put-pending").exists()


@pytest.mark.django_db
@override_settings(ANVIA_DJANGO=TENANTS)
def test_clear_thread_deletes_one_thread_and_refuses_an_unknown_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    put(ACME_U1, "mine", steps=2)
    put(ACME_U10, "theirs")

    assert memory("clear", "--thread", ACME_U1, "--dry-run").startswith(
        f"Would delete 1 LangGraph thread (2 checkpoints): {ACME_U1!r} (dry run"
    )
    monkeypatch.setattr("builtins.input", lambda question: "no")
    with pytest.raises(CommandError, match="Cancelled"):
        memory("clear", "--thread", ACME_U1)
    for refused in (
        ("--thread", "nobody"),
        ("--thread", ACME_U1, "--tenant-id", "Acme"),
    ):
        with pytest.raises(CommandError, match=r"No LangGraph thread.* has the id"):
            memory("clear", *refused, "--yes")
    assert threads() == {ACME_U1, ACME_U10}

    said = memory("clear", "--thread", ACME_U1, "--tenant-id", "acme", "--yes")

    assert said.strip() == f"Deleted 1 LangGraph thread (2 checkpoints): {ACME_U1!r}."
    assert threads() == {ACME_U10}
    assert not LangGraphBlob.objects.filter(thread_id=ACME_U1).exists()
    assert not LangGraphWrite.objects.filter(thread_id=ACME_U1).exists()


@pytest.mark.django_db
def test_export_thread_writes_that_thread_alone() -> None:
    put(U1, "where is order 42?", steps=2)
    put(ACME_U10, "not mine")

    out, err = StringIO(), StringIO()
    call_command("anvia_memory", "export", "--thread", U1, stdout=out, stderr=err)

    records = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(r["type"], r["threadId"]) for r in records] == [
        ("langgraphThread", U1),
        ("langgraphCheckpoint", U1),
        ("langgraphCheckpoint", U1),
    ]
    message = records[2]["channelValues"]["messages"][0]
    assert message["kwargs"]["content"] == "where is order 42?"
    assert err.getvalue().strip() == "Exported 1 LangGraph thread (2 checkpoints)."
    with pytest.raises(CommandError, match="No LangGraph thread has the id 'nobody'"):
        memory("export", "--thread", "nobody")


@pytest.mark.django_db
def test_show_thread_prints_its_latest_messages() -> None:
    put(U1, "hi\x1b[2J", "where is order 42?", steps=2)
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"count": 3}
    checkpoint["channel_versions"] = {"count": 1}
    config: Any = {"configurable": {"thread_id": "counter", "checkpoint_ns": ""}}
    DjangoSaver().put(config, checkpoint, {"step": 0}, {"count": 1})

    lines = memory("show", "--thread", U1).splitlines()

    assert lines[0] == f"Thread      {U1}"
    assert lines[1:4] == ["User        u1", "Tenant      -", "Checkpoints 2"]
    assert lines[4].startswith("Latest      ")
    assert "(step 2, " in lines[4]
    assert lines[5:] == [
        "Messages    2",
        "",
        "[0] user: hi\\x1b[2J",
        "[1] user: where is order 42?",
    ]
    assert memory("show", "--thread", "counter").splitlines()[-1] == (
        "Channels    count (no messages)"
    )
    LangGraphCheckpoint.objects.filter(thread_id="counter").delete()
    with pytest.raises(CommandError, match="'counter' has no checkpoint left"):
        memory("show", "--thread", "counter")
    for args, refusal in (
        (("show", "--thread", "nobody"), "No LangGraph thread has the id 'nobody'"),
        (("show",), "one of them"),
        (("show", "s1", "--thread", U1), "one of them"),
    ):
        with pytest.raises(CommandError, match=refusal):
            memory(*args)


@pytest.mark.django_db
def test_list_threads_lists_the_newest_first() -> None:
    assert memory("list", "--threads").strip() == "No LangGraph threads."
    put(U1, "mine", steps=2)
    put(ACME_U10, "theirs")

    lines = memory("list", "--threads").splitlines()

    assert lines[0].split() == ["UPDATED", "CHECKPOINTS", "THREAD"]
    assert [line.split()[1:] for line in lines[1:]] == [["1", ACME_U10], ["2", U1]]
    assert [
        line.split()[2] for line in memory("list", "--threads", "--user", "u1").splitlines()[1:]
    ] == [U1]
    assert len(memory("list", "--threads", "--limit", "1").splitlines()) == 2
