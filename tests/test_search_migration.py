"""Migration 0007 on a populated database, and SQLite without FTS5."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from anvia_django.checks import check_content_search
from anvia_django.core.memory.types import MemoryContext
from anvia_django.persistence import append_messages, load_messages, search_messages
from anvia_django.persistence.dialects import full_text as text_match

from .helpers import append_input, assistant, user


def found(q: str) -> list[tuple[str, int]]:
    return [(hit.session_id, hit.position) for hit in search_messages(q, limit=50).items]


@pytest.fixture
def without_fts5(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(text_match, "sqlite_has_fts5", lambda connection: False)


@pytest.mark.django_db(transaction=True)
def test_migration_indexes_existing_rows_and_goes_back_cleanly() -> None:
    append_messages(append_input("before", [user("stored before the index"), assistant("ok")]))
    call_command("migrate", "anvia_django", "0006", verbosity=0)
    try:
        # Written as the code of 0006's time would: its models, not today's.
        _append_at_0006("between", [user("written while unindexed")])
        # Deeper than MariaDB's JSON functions go (32): indexing it must not
        # fail the migration, nor an append after it.
        _append_at_0006("deep", [_deep_message("kept while unindexed")])
        unchanged = _snapshot_at_0006()
    finally:
        call_command("migrate", "anvia_django", verbosity=0)
    assert _snapshot_at_0006() == unchanged  # the index adds nothing the models see
    assert found("unindexed") == [("between", 0)]
    assert found("stored") == [("before", 0)]
    append_messages(append_input("after", [user("stored after")]))
    assert found("stored") == [("after", 0), ("before", 0)]
    append_messages(append_input("deep", [_deep_message("appended after")], turn=2))
    assert load_messages(MemoryContext("deep")) == [
        _deep_message("kept while unindexed"),
        _deep_message("appended after"),
    ]


def _models_at_0006() -> tuple[Any, Any]:
    state = MigrationExecutor(connection).loader.project_state(
        ("anvia_django", "0006_append_function_index_plans")
    )
    return state.apps.get_model("anvia_django", "Conversation"), state.apps.get_model(
        "anvia_django", "MemoryMessage"
    )


def _append_at_0006(session_id: str, messages: list[dict[str, Any]]) -> None:
    conversations, stored = _models_at_0006()
    now = timezone.now()
    conversation = conversations.objects.create(
        session_id=session_id, created_at=now, updated_at=now, message_count=len(messages)
    )
    for position, message in enumerate(messages):
        stored.objects.create(
            conversation=conversation,
            position=position,
            run_id="run-1",
            turn=1,
            role=message["role"],
            message=message,
            created_at=now,
        )


def _snapshot_at_0006() -> list[tuple[Any, ...]]:
    conversations, stored = _models_at_0006()
    return [
        *conversations.objects.order_by("pk").values_list("pk", "session_id", "message_count"),
        *stored.objects.order_by("pk").values_list("pk", "position", "message"),
    ]


def _deep_message(text: str) -> dict[str, object]:
    content: object = text
    for _ in range(60):
        content = [content]
    return {"role": "user", "content": "nested", "parts": content}


@pytest.mark.django_db(transaction=True)
def test_going_back_removes_every_database_object() -> None:
    def names() -> set[str]:
        with connection.cursor() as cursor:
            tables = set(connection.introspection.table_names(cursor))
            messages = "anvia_django_memorymessage"
            columns = {
                c.name for c in connection.introspection.get_table_description(cursor, messages)
            }
            indexes = set(connection.introspection.get_constraints(cursor, messages))
        return tables | columns | indexes

    append_messages(append_input("s", [user("some text")]))
    with_index = names()
    call_command("migrate", "anvia_django", "0006", verbosity=0)
    try:
        without = names()
    finally:
        call_command("migrate", "anvia_django", verbosity=0)
    added = with_index - without
    assert added  # a table, a column or an index, by backend
    assert names() == with_index
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")
            assert {row[0] for row in cursor.fetchall()} >= {"anvia_msg_fts_insert"}
    if connection.vendor == "mysql":
        call_command("migrate", "anvia_django", "0006", verbosity=0)
        try:
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT COUNT(*) FROM information_schema.triggers"
                    " WHERE trigger_schema = DATABASE() AND trigger_name LIKE 'anvia%%'"
                )
                assert cursor.fetchone()[0] == 0
        finally:
            call_command("migrate", "anvia_django", verbosity=0)


@pytest.mark.sqlite
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("without_fts5")
def test_sqlite_without_fts5_scans_and_finds_the_same() -> None:
    append_messages(
        append_input("s", [user("Where is order 1042?"), {"role": "tool", "content": {"a": "b"}}])
    )
    assert found("1042") == [("s", 0)]
    assert found("order 1042") == [("s", 0)]
    assert found("role") == []
    assert found("50%_") == []


@pytest.mark.sqlite
@pytest.mark.usefixtures("without_fts5")
def test_sqlite_without_fts5_is_a_warning() -> None:
    warnings = check_content_search(databases=["default"])
    assert {warning.id for warning in warnings} == {"anvia_django.W008"}
    assert "Database 'default'" in warnings[0].msg
    assert "FTS5" in warnings[0].msg


@pytest.mark.django_db
def test_with_fts5_or_another_backend_there_is_no_warning() -> None:
    assert check_content_search(databases=["default"]) == []


def test_the_check_asks_only_for_the_databases_it_is_given() -> None:
    # A database check: ``migrate`` and ``check --database`` name them.
    assert check_content_search() == []
