"""Faults round 2 (issue 33): a connection that dies around COMMIT, seen
from the caller's own thread, and reads after an idle connection was killed."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from django.db import DatabaseError, connection, connections, transaction
from hypothesis import given
from hypothesis import strategies as st

from anvia_django.core.memory import (
    InvalidMemoryInputError,
    MemoryContext,
    MemoryConversationListOptions,
)
from anvia_django.encryption import encryption_enabled
from anvia_django.models import Conversation
from anvia_django.persistence import list_conversation_summaries, pop_last_message, search_messages
from anvia_django.persistence.dialects.mysql import STATEMENT_ROOM, escaped_size
from anvia_django.store import DjangoMemoryInspector, DjangoMemoryStore
from tests.helpers import append_input, assistant, run, snapshot, user

STORE = DjangoMemoryStore()
CONTEXT = MemoryContext("thread", "u")


def kill_own_connection() -> None:
    """End this thread's connection from another one, as a server restart,
    a proxy or an idle timeout would."""
    if connection.vendor == "postgresql":
        pid = connection.connection.info.backend_pid
        with connections["other"].cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
    else:
        thread_id = connection.connection.thread_id()
        with connections["other"].cursor() as cursor:
            cursor.execute("KILL CONNECTION %s", [thread_id])


class DiesAfterCommit:
    """``connection._commit`` that commits, then loses the connection: Django
    then fails to restore autocommit on it (MariaDB sends that to the server)."""

    def __init__(self) -> None:
        self.real_commit: Callable[[], None] = connection._commit  # type: ignore[attr-defined]
        self.calls = 0

    def __call__(self) -> None:
        self.calls += 1
        self.real_commit()
        if self.calls == 1:
            kill_own_connection()


def history() -> None:
    run(STORE.append, append_input("thread", [user("alpha"), assistant("bravo")], user_id="u"))
    run(STORE.append, append_input("thread", [user("charlie")], run_id="run-2", user_id="u"))


def _pop() -> None:
    pop_last_message(CONTEXT)


def _rewind() -> None:
    run(STORE.rewind, CONTEXT, 2)


def _own_transaction() -> None:
    with transaction.atomic():
        Conversation.objects.filter(session_id="thread").update(metadata={"k": "v"})


BROKEN_BY: dict[str, Callable[[], None]] = {
    "pop_last_message": _pop,
    "rewind": _rewind,
    "the caller's own ORM transaction": _own_transaction,
}


@pytest.mark.mysql  # PostgreSQL's driver restores autocommit without a round trip
@pytest.mark.django_db(transaction=True, databases=["default", "other"])
@pytest.mark.parametrize("call", list(BROKEN_BY))
def test_the_callers_thread_recovers_after_its_connection_died_after_commit(
    call: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    history()
    dies = DiesAfterCommit()
    monkeypatch.setattr(connection, "_commit", dies)

    # A sync caller (a Celery task, a command) driving the store through
    # async_to_sync: the store's calls run on this thread, on its connection.
    with pytest.raises(DatabaseError):  # Django could not restore autocommit
        BROKEN_BY[call]()
    assert dies.calls == 1
    if call != "the caller's own ORM transaction":
        # The store's call left the connection usable for the caller's ORM.
        assert Conversation.objects.filter(session_id="thread").count() == 1
    loaded = run(STORE.load, CONTEXT)
    assert loaded[0] == user("alpha")
    run(STORE.append, append_input("thread", [user("delta")], run_id="run-3", user_id="u"))
    with transaction.atomic():
        assert Conversation.objects.get(session_id="thread").message_count == len(loaded) + 1
    assert run(STORE.load, CONTEXT)[-1] == user("delta")


INSPECTOR = DjangoMemoryInspector()


def _list_conversations(ref: str) -> None:
    summaries = run(INSPECTOR.list_conversations, MemoryConversationListOptions(limit=5))
    assert [summary.session_id for summary in summaries] == ["thread"]


def _get_conversation(ref: str) -> None:
    found = run(INSPECTOR.get_conversation, ref)
    assert found is not None
    assert [m.message for m in found.messages] == [
        user("alpha"),
        assistant("bravo"),
        user("charlie"),
    ]


def _search_messages(ref: str) -> None:
    page = search_messages("bravo", limit=5)
    if encryption_enabled():
        return  # sealed messages are found through the blind index only (tests/encryption)
    assert [(hit.conversation_ref, hit.position) for hit in page.items] == [(ref, 1)]


def _list_conversation_summaries(ref: str) -> None:
    assert [s.session_id for s in list_conversation_summaries(5)] == ["thread"]


IDLE_READS: dict[str, Callable[[str], None]] = {
    "inspector.list_conversations": _list_conversations,
    "inspector.get_conversation": _get_conversation,
    "search_messages": _search_messages,
    "list_conversation_summaries": _list_conversation_summaries,
}


@pytest.mark.server
@pytest.mark.django_db(transaction=True, databases=["default", "other"])
@pytest.mark.parametrize("read", list(IDLE_READS))
def test_a_read_succeeds_on_its_first_call_after_its_idle_connection_was_killed(
    read: str,
) -> None:
    history()
    ref = Conversation.objects.values_list("ref", flat=True).get()
    kill_own_connection()
    IDLE_READS[read](ref)


@given(st.text())
def test_the_escaped_size_is_what_the_driver_sends(text: str) -> None:
    escape = pytest.importorskip("MySQLdb._mysql").escape_string
    encoded = text.encode("utf-8", "surrogatepass")
    assert escaped_size(text) == len(escape(encoded))


@pytest.mark.mysql
@pytest.mark.django_db
def test_a_message_of_backslashes_at_the_size_limit_is_stored_or_refused_whole() -> None:
    # 8 MiB as JSON (each backslash is two there), twice that once the
    # driver has escaped it: over MariaDB's default max_allowed_packet.
    backslashes = "\\" * ((8 * 1024 * 1024 - 64) // 2)
    message = {"role": "user", "content": backslashes}
    history()
    before = snapshot()
    with connection.cursor() as cursor:
        cursor.execute("SELECT @@max_allowed_packet")
        limit = cursor.fetchone()[0]
    request = append_input("thread", [user("fits"), message], run_id="big", user_id="u")
    # The documented limit: the message as the driver escapes it, and room
    # for the rest of its INSERT, within the server's max_allowed_packet.
    if escaped_size(json.dumps(message, separators=(",", ":"))) + STATEMENT_ROOM > limit:
        with pytest.raises(InvalidMemoryInputError, match=r"messages\[1\].*max_allowed_packet"):
            run(STORE.append, request)
        assert snapshot() == before  # nothing written, the small message neither
    else:
        run(STORE.append, request)
        assert run(STORE.load, CONTEXT)[-1] == message
    # The connection is still good.
    assert run(STORE.load, CONTEXT)[0] == user("alpha")
