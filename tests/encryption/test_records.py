"""Encryption at rest of what is kept beside a transcript: failed runs'
errors and partial messages, and compaction summaries."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client, override_settings
from django.urls import reverse

from anvia_django.core.memory import (
    MemoryAppendInput,
    MemoryCompactionInput,
    MemoryContext,
    MemoryErrorInput,
    MemoryRunInput,
    Message,
)
from anvia_django.core.memory.branches import MemoryForkInput
from anvia_django.encryption.envelope import DecryptionError
from anvia_django.models import Conversation, FailedRun, MemorySummary
from anvia_django.persistence import (
    list_failed_runs,
    list_runs,
    list_summaries,
    load_entries,
)
from anvia_django.store import DjangoMemoryStore
from tests.encryption.support import encryption
from tests.helpers import assistant, run, user

pytestmark = pytest.mark.django_db

SECRET = "diagnosis hypertension"
_NOW = datetime(2026, 12, 5, tzinfo=UTC)


@pytest.fixture
def encrypted() -> Iterator[None]:
    with override_settings(ANVIA_DJANGO=encryption()):
        yield


class Failure(Exception):
    pass


def _fail(store: DjangoMemoryStore, session_id: str, run_id: str, text: str) -> None:
    context = MemoryContext(session_id, user_id="alice")
    try:
        raise Failure(f"{text} (error)")
    except Failure as error:
        partial = [user(f"{text} (partial)")]
        run(store.record_error, MemoryErrorInput(context, run_id, error, partial))
    run(store.record_run, MemoryRunInput(context, run_id, "failed", _NOW, _NOW))


def _raw(model: Any) -> str:
    """Every stored column of every row of ``model``, as text."""
    return json.dumps([list(row) for row in model.objects.values_list()], default=str)


def test_a_failed_run_is_sealed_and_every_reader_opens_it(encrypted: None) -> None:
    store = DjangoMemoryStore()
    _fail(store, "s", "run-1", SECRET)
    raw = _raw(FailedRun)
    assert SECRET not in raw
    assert "Failure" in raw
    conversation = Conversation.objects.get(session_id="s")
    (record,) = list_failed_runs(conversation.pk, limit=5)
    assert record.error_message == f"{SECRET} (error)"
    assert SECRET in record.traceback
    assert record.messages == [user(f"{SECRET} (partial)")]
    (listed,) = list_runs(conversation.pk, limit=5)
    assert (listed.error_type or "").endswith("Failure")
    assert listed.error_message == f"{SECRET} (error)"
    instance = FailedRun.objects.get()  # the admin's record page reads instances
    assert instance.error_message == f"{SECRET} (error)"
    assert instance.messages == [user(f"{SECRET} (partial)")]


def test_failed_runs_recorded_before_encryption_still_read() -> None:
    store = DjangoMemoryStore()
    _fail(store, "s", "run-1", "plain")
    with override_settings(ANVIA_DJANGO=encryption()):
        _fail(store, "s", "run-2", SECRET)
        conversation = Conversation.objects.get(session_id="s")
        records = list_failed_runs(conversation.pk, limit=5)
        assert {r.error_message for r in records} == {"plain (error)", f"{SECRET} (error)"}


def test_a_failed_runs_payload_moved_to_another_run_fails_loudly(encrypted: None) -> None:
    store = DjangoMemoryStore()
    _fail(store, "s", "run-1", "first")
    _fail(store, "s", "run-2", "second")
    first, second = FailedRun.objects.order_by("pk").values_list("pk", "messages")
    FailedRun.objects.filter(pk=first[0]).update(messages=second[1])
    conversation = Conversation.objects.get(session_id="s")
    with pytest.raises(DecryptionError, match="failed-run record of conversation") as caught:
        list_failed_runs(conversation.pk, limit=5)
    assert "first" not in str(caught.value)
    assert "second" not in str(caught.value)


class Summariser:
    async def __call__(self, previous: str | None, messages: list[Message]) -> str:
        return f"{SECRET}: {len(messages)} messages, after {previous}"


def append_input_for(session_id: str, index: int, user_id: str | None = "alice") -> Any:
    return MemoryAppendInput(
        MemoryContext(session_id, user_id=user_id),
        f"run-{index}",
        1,
        [user(f"q{index}"), assistant(f"a{index}")],
    )


def _compacted(session_id: str, user_id: str | None = "alice") -> DjangoMemoryStore:
    """A session of 12 messages whose first 10 a summary covers."""
    store = DjangoMemoryStore()
    for index in range(6):
        run(store.append, append_input_for(session_id, index, user_id))
    request = MemoryCompactionInput(
        MemoryContext(session_id, user_id=user_id), Summariser(), keep_messages=2
    )
    assert run(store.compact, request) is not None
    return store


def test_a_summary_is_sealed_and_loads_through_it(encrypted: None) -> None:
    store = _compacted("s")
    assert SECRET not in _raw(MemorySummary)
    context = MemoryContext("s", user_id="alice")
    loaded = run(store.load_compacted, context)
    assert SECRET in loaded[0]["content"]
    assert loaded[1:] == [user("q5"), assistant("a5")]
    conversation = Conversation.objects.get(session_id="s")
    (summary,) = list_summaries(conversation.pk, limit=5)
    assert SECRET in json.dumps(summary.message)
    assert SECRET in json.dumps(MemorySummary.objects.get().message)
    entries = load_entries(context, compacted=True)
    assert SECRET in json.dumps(entries[0].message)
    # A second compaction reads the first summary back as its "previous".
    for index in range(6, 9):
        run(store.append, append_input_for("s", index))
    request = MemoryCompactionInput(context, Summariser(), keep_messages=2)
    assert run(store.compact, request) is not None
    newest = run(store.load_compacted, context)[0]["content"]
    assert f"after {SECRET}" in newest


def test_a_summary_moved_to_another_range_fails_loudly(encrypted: None) -> None:
    _compacted("s")
    MemorySummary.objects.update(covers_through=1)
    conversation = Conversation.objects.get(session_id="s")
    with pytest.raises(DecryptionError, match="summary record"):
        list_summaries(conversation.pk, limit=5)


def test_a_fork_reseals_its_summaries_for_itself(encrypted: None) -> None:
    store = _compacted("s", user_id=None)
    run(store.fork, MemoryForkInput(MemoryContext("s"), "s-fork", position=12))
    fork = Conversation.objects.get(session_id="s-fork")
    (summary,) = list_summaries(fork.pk, limit=5)
    assert SECRET in json.dumps(summary.message)
    source, copy = MemorySummary.objects.order_by("pk").values_list("message", flat=True)
    assert source["dk"] != copy["dk"]  # no user: each conversation has its own key


def test_the_admin_shows_opened_failed_runs_and_summaries(encrypted: None) -> None:
    store = _compacted("s")
    _fail(store, "s", "run-x", SECRET)
    staff = User.objects.create_superuser("staff", "staff@example.com", "pw")
    client = Client()
    client.force_login(staff)
    failed = FailedRun.objects.get()
    page = client.get(reverse("admin:anvia_django_failedrun_change", args=[failed.pk]))
    assert page.status_code == 200
    assert f"{SECRET} (partial)" in page.content.decode()
    summary = MemorySummary.objects.get()
    page = client.get(reverse("admin:anvia_django_memorysummary_change", args=[summary.pk]))
    assert page.status_code == 200
    assert SECRET in page.content.decode()
    conversation = Conversation.objects.get(session_id="s")
    page = client.get(reverse("admin:anvia_django_conversation_change", args=[conversation.pk]))
    assert f"{SECRET} (error)" in page.content.decode()
    listing = client.get(reverse("admin:anvia_django_conversation_changelist"))
    assert listing.status_code == 200
    assert "q0" in listing.content.decode()  # the first user message, opened for its preview


def _raw_column(model: Any, pk: int, column: str = "message") -> str:
    from django.db import connection

    table = connection.ops.quote_name(model._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {connection.ops.quote_name(column)} FROM {table} WHERE id = %s", [pk]
        )
        return str(cursor.fetchone()[0])


def test_messages_and_summaries_written_through_the_orm_are_sealed(encrypted: None) -> None:
    from anvia_django.models import MemoryMessage
    from anvia_django.persistence import load_messages

    store = DjangoMemoryStore()
    run(store.append, append_input_for("s", 0))
    conversation = Conversation.objects.get(session_id="s")
    now = conversation.updated_at
    made = MemoryMessage.objects.create(
        conversation=conversation,
        position=2,
        run_id="orm",
        turn=1,
        role="user",
        message=user(f"{SECRET} by create"),
        created_at=now,
    )
    (bulk,) = MemoryMessage.objects.bulk_create(
        [
            MemoryMessage(
                conversation=conversation,
                position=3,
                run_id="orm",
                turn=1,
                role="user",
                message=user(f"{SECRET} by bulk_create"),
                created_at=now,
            )
        ]
    )
    summary = MemorySummary.objects.create(
        conversation=conversation,
        covers_through=1,
        message=user(f"{SECRET} summary"),
        created_at=now,
    )
    for model, pk in (
        (MemoryMessage, made.pk),
        (MemoryMessage, bulk.pk),
        (MemorySummary, summary.pk),
    ):
        raw = _raw_column(model, pk)
        assert raw.startswith('{"anvia_enc":1')
        assert SECRET not in raw
    Conversation.objects.filter(pk=conversation.pk).update(message_count=4)
    loaded = load_messages(MemoryContext("s", user_id="alice"))
    assert loaded[2:] == [user(f"{SECRET} by create"), user(f"{SECRET} by bulk_create")]
    assert MemoryMessage.objects.get(pk=made.pk).message == user(f"{SECRET} by create")
    assert MemorySummary.objects.get().message == user(f"{SECRET} summary")
    made.save()  # an instance read back and saved again is sealed again, not twice
    assert MemoryMessage.objects.get(pk=made.pk).message == user(f"{SECRET} by create")


@pytest.mark.django_db(databases=["default", "other"])
def test_an_orm_write_to_another_database_is_sealed_with_that_databases_keys(
    encrypted: None,
) -> None:
    from anvia_django.models import MemoryMessage
    from anvia_django.persistence import load_messages

    run(DjangoMemoryStore(using="default").append, append_input_for("s", 0))  # id 1 on default
    store = DjangoMemoryStore(using="other")
    run(store.append, append_input_for("s", 0, user_id="bob"))
    conversation = Conversation.objects.using("other").get(session_id="s")
    # By id: assigning the conversation object would tell Django its database.
    MemoryMessage.objects.using("other").create(
        conversation_id=conversation.pk,
        position=2,
        run_id="orm",
        turn=1,
        role="user",
        message=user("written on other"),
        created_at=conversation.updated_at,
    )
    Conversation.objects.using("other").filter(pk=conversation.pk).update(message_count=3)
    loaded = load_messages(MemoryContext("s", user_id="bob"), using="other")
    assert loaded[2] == user("written on other")


def test_a_failed_run_opened_from_a_sealed_record_refuses_to_be_saved(encrypted: None) -> None:
    _fail(DjangoMemoryStore(), "s", "run-1", SECRET)
    failed = FailedRun.objects.get()
    with pytest.raises(ValueError, match="would store its error and partial messages in plain"):
        failed.save()
    assert SECRET not in _raw(FailedRun)
