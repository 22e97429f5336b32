"""Reads are querysets: values come through the model fields, SQL from the
compiler, and ``load`` keeps its scope check and its query count."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anvia_django.core.memory import (
    ConversationScopeError,
    InvalidMemoryInputError,
    MemoryContext,
)
from anvia_django.fields import ExactJSONField
from anvia_django.models import Conversation, MemoryMessage
from anvia_django.persistence import (
    RowKey,
    append_messages,
    list_conversation_page,
    list_message_page,
    load_latest_messages,
    load_messages,
)
from anvia_django.persistence.compiled import Slot, compile_once

from .helpers import append_input, user

BASE = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


@contextmanager
def decoded_messages(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """Every value ``ExactJSONField.from_db_value`` decodes, tagged so a test
    can tell it went through the field."""
    seen: list[Any] = []
    original = ExactJSONField.from_db_value

    def tagged(self: ExactJSONField, value: Any, expression: Any, conn: Any) -> Any:
        decoded = original(self, value, expression, conn)
        if isinstance(decoded, dict):
            decoded = {**decoded, "via": "field"}
        seen.append(decoded)
        return decoded

    monkeypatch.setattr(ExactJSONField, "from_db_value", tagged)
    yield seen


def statements(work: Callable[[], object]) -> list[tuple[str, Any]]:
    captured: list[tuple[str, Any]] = []

    def record(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        captured.append((sql, params))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(record):
        work()
    return captured


def write(session: str, texts: list[str], user_id: str | None = None) -> None:
    messages = [user(text) for text in texts]
    append_messages(append_input(session, messages, user_id=user_id))


@pytest.mark.django_db
@pytest.mark.parametrize("limit", [None, 3])
def test_load_decodes_every_message_through_the_field(
    monkeypatch: pytest.MonkeyPatch, limit: int | None
) -> None:
    write("s", ["a", "b", "c"], user_id="alice")
    with decoded_messages(monkeypatch):
        loaded = load_messages(MemoryContext("s", user_id="alice"), limit=limit)
        latest = load_latest_messages(MemoryContext("s"), 2)
    expected = [{**user(text), "via": "field"} for text in ("a", "b", "c")]
    assert loaded == expected
    assert latest == expected[1:]


@pytest.mark.django_db
@pytest.mark.parametrize(
    "load",
    [
        lambda context: load_messages(context),
        lambda context: load_messages(context, limit=2),
        lambda context: load_latest_messages(context, 2),
        lambda context: load_latest_messages(context, 0),
    ],
    ids=["all", "window", "latest", "latest-0"],
)
def test_another_users_messages_never_leave_the_database(
    monkeypatch: pytest.MonkeyPatch, load: Callable[[MemoryContext], object]
) -> None:
    write("s", ["secret", "more"], user_id="alice")
    write("unowned", ["server"])
    with decoded_messages(monkeypatch) as decoded:
        for context in (MemoryContext("s", user_id="mallory"), MemoryContext("unowned", "bob")):
            with pytest.raises(ConversationScopeError):
                load(context)
    assert decoded == []


@pytest.mark.django_db
def test_load_is_one_query_and_two_only_for_an_empty_user_scoped_read() -> None:
    write("s", [str(n) for n in range(30)], user_id="alice")
    write("empty", ["x"], user_id="alice")
    Conversation.objects.filter(session_id="empty").update(message_count=0)
    MemoryMessage.objects.filter(conversation__session_id="empty").delete()
    cases: list[tuple[Callable[[], object], int]] = [
        (lambda: load_messages(MemoryContext("s")), 1),
        (lambda: load_messages(MemoryContext("s", user_id="alice")), 1),
        (lambda: load_messages(MemoryContext("s", user_id="alice"), limit=5), 1),
        (lambda: load_latest_messages(MemoryContext("s", user_id="alice"), 5), 1),
        (lambda: load_messages(MemoryContext("unknown")), 1),
        (lambda: load_messages(MemoryContext("empty")), 1),
        (lambda: load_messages(MemoryContext("unknown", user_id="alice")), 2),
        (lambda: load_messages(MemoryContext("empty", user_id="alice")), 2),
        (lambda: load_messages(MemoryContext("empty", user_id="alice"), limit=5), 2),
    ]
    for call, expected in cases:
        with CaptureQueriesContext(connection) as queries:
            call()
        assert len(queries) == expected, [q["sql"] for q in queries]


@pytest.mark.django_db
def test_load_sends_no_boolean_or_limit_parameter() -> None:
    write("s", [str(n) for n in range(5)], user_id="alice")
    sent = statements(lambda: load_messages(MemoryContext("s", user_id="alice"), limit=3))
    sent += statements(lambda: load_latest_messages(MemoryContext("s"), 3))
    assert len(sent) == 2
    for sql, params in sent:
        # The session id and scope key ("": the owner-checked scope), and the user.
        assert sorted(params) in (["", "alice", "s"], ["", "s"])
        assert "LIMIT 4" in sql or "LIMIT 3" in sql


@pytest.mark.django_db
def test_load_finds_the_conversation_in_a_subquery_not_a_join() -> None:
    # Over a join PostgreSQL sorted the whole session, even for a window of
    # it; ``conversation_id = (subquery)`` reads the position index in order.
    write("s", [str(n) for n in range(5)], user_id="alice")
    sent = statements(lambda: load_messages(MemoryContext("s", user_id="alice")))
    sent += statements(lambda: load_messages(MemoryContext("s"), limit=3))
    sent += statements(lambda: load_latest_messages(MemoryContext("s"), 3))
    assert len(sent) == 3
    for sql, _ in sent:
        assert " JOIN " not in sql.upper()
        assert "(SELECT" in sql


@pytest.mark.django_db
def test_a_compiled_query_answers_as_its_queryset_would() -> None:
    write("s", ["a", "b", "c"], user_id="alice")
    conversation = Conversation._meta
    slotted = Conversation.objects.filter(
        session_id=Slot("session", conversation.get_field("session_id")),
        updated_at__lte=Slot("moment", conversation.get_field("updated_at")),
    ).values_list("ref", "metadata", "updated_at", "message_count")
    compiled = compile_once(slotted, connection.alias)
    later = datetime.now(UTC) + timedelta(days=1)
    plain = Conversation.objects.filter(session_id="s", updated_at__lte=later).values_list(
        "ref", "metadata", "updated_at", "message_count"
    )
    assert compiled.rows(connection.alias, {"session": "s", "moment": later}) == [
        list(row) for row in plain
    ]
    assert compiled.rows(connection.alias, {"session": "s", "moment": BASE}) == []
    # The lookups parenthesise an expression on their right-hand side.
    sql = plain.query.get_compiler(connection.alias).as_sql()[0]
    assert compiled.sql.replace("(%s)", "%s") == sql


def make_conversations(rows: list[tuple[int, int, str | None]]) -> None:
    Conversation.objects.bulk_create(
        Conversation(
            session_id=f"s{index}",
            user_id=owner,
            created_at=BASE,
            updated_at=BASE + timedelta(seconds=seconds, microseconds=micros),
            message_count=index,
        )
        for index, (seconds, micros, owner) in enumerate(rows)
    )


@pytest.mark.django_db
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=st.lists(
        st.tuples(st.integers(0, 3), st.integers(0, 1), st.sampled_from([None, "u1", "u2"])),
        max_size=25,
    ),
    size=st.integers(1, 6),
    owner=st.sampled_from([None, "u1"]),
)
def test_keyset_pages_with_ties_see_every_conversation_once_in_order(
    rows: list[tuple[int, int, str | None]], size: int, owner: str | None
) -> None:
    Conversation.objects.all().delete()
    make_conversations(rows)
    expected = Conversation.objects.order_by("-updated_at", "-id")
    if owner is not None:
        expected = expected.filter(user_id=owner)
    seen: list[str] = []
    after: RowKey | None = None
    for _ in range(len(rows) + 1):
        page = list_conversation_page(size, owner, after=after)
        seen += [item.session_id for item in page.items]
        if page.next_key is None:
            break
        assert len(page.items) == size
        after = page.next_key
    assert seen == list(expected.values_list("session_id", flat=True))


@pytest.mark.django_db
def test_message_pages_take_every_64_bit_position_and_refuse_larger_ones() -> None:
    write("s", ["a"])
    conversation = Conversation.objects.get(session_id="s")
    assert list_message_page(conversation.pk, after=2**63 - 1, limit=5).items == []
    with pytest.raises(InvalidMemoryInputError, match="after"):
        list_message_page(conversation.pk, after=2**63, limit=5)
