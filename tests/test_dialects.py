"""The SQL dialects: each is chosen where it belongs and keeps every guarantee.

The generic (plain ORM) dialect runs the conformance suite and the
concurrency race here on whatever backend the suite runs on, so it cannot
rot; on MariaDB the MySQL 8 form of the upsert (no RETURNING) is run too.
Ids compare exactly and 4-byte characters round-trip on every backend.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.apps import apps
from django.db import IntegrityError, connection
from django.db.models import QuerySet
from django.test import override_settings
from django.utils import timezone

from anvia_django.core.memory import MemoryContext
from anvia_django.fields import ExactTextField, IdentifierField
from anvia_django.integrations.langgraph.models import LangGraphCheckpoint
from anvia_django.models import Conversation, MemoryMessage
from anvia_django.persistence import (
    append_messages,
    dialects,
    list_conversation_summaries,
    load_messages,
)
from anvia_django.persistence.dialects.collation import exact_collation
from anvia_django.persistence.dialects.full_text import SEARCH_COLUMN
from anvia_django.persistence.dialects.prefixes import starts_with
from anvia_django.store import DjangoMemoryStore
from anvia_django.testing import MemoryStoreConformance

from . import test_concurrency
from .helpers import append_input, assistant, user


@pytest.fixture
def generic() -> Iterator[None]:
    with override_settings(ANVIA_DJANGO={"SQL_DIALECT": "generic"}):
        yield


@pytest.fixture
def mysql_without_returning(monkeypatch: pytest.MonkeyPatch) -> None:
    """MariaDB made to take MySQL 8's path: the upsert, then a SELECT."""
    monkeypatch.setattr(dialects, "_MARIADB", dialects.MySQLDialect())


def test_each_backend_gets_its_own_dialect() -> None:
    expected = {
        "postgresql": dialects.PostgreSQLDialect,
        "sqlite": dialects.SQLiteDialect,
        "mysql": dialects.MariaDBDialect
        if connection.features.can_return_columns_from_insert
        else dialects.MySQLDialect,
    }[connection.vendor]
    assert type(dialects.vendor_dialect(connection)) is expected
    assert dialects.unknown_vendor(connection) is None


def test_the_default_setting_uses_the_vendor_dialect() -> None:
    with override_settings(ANVIA_DJANGO={}):
        assert dialects.dialect_for("default") is dialects.vendor_dialect(connection)


def test_the_setting_forces_the_generic_dialect(generic: None) -> None:
    assert type(dialects.dialect_for("default")) is dialects.Dialect


@pytest.mark.django_db(transaction=True)
class TestGenericDialectConformance(MemoryStoreConformance):
    @pytest.fixture
    def store(self, generic: None) -> DjangoMemoryStore:
        return DjangoMemoryStore()


@pytest.mark.mysql
@pytest.mark.django_db(transaction=True)
class TestMySQLWithoutReturningConformance(MemoryStoreConformance):
    @pytest.fixture
    def store(self, mysql_without_returning: None) -> DjangoMemoryStore:
        return DjangoMemoryStore()


@pytest.mark.django_db(transaction=True)
def test_the_generic_dialect_survives_racing_writers(generic: None) -> None:
    if connection.vendor == "mysql":
        pytest.skip("InnoDB keeps a failed INSERT's shared lock: the generic path deadlocks")
    test_concurrency.test_writers_racing_to_create_each_new_session(processes=False)


@pytest.mark.django_db(transaction=True)
def test_a_generic_first_append_outlives_a_clear_between_its_create_and_lock(
    generic: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Another writer creates the row (our INSERT fails on the unique key) and a
    # clear deletes it before we lock it: the append must look again, not
    # fail with DoesNotExist. CI met this once in the clear-against-appends test.
    create = QuerySet.create
    lost_races: list[bool] = []

    def lose_the_first_race(self: QuerySet[Any], **kwargs: Any) -> Any:
        if self.model is Conversation and not lost_races:
            lost_races.append(True)
            raise IntegrityError("the other writer's row, since cleared")
        return create(self, **kwargs)

    monkeypatch.setattr(QuerySet, "create", lose_the_first_race)
    store = DjangoMemoryStore()
    context = MemoryContext(session_id="raced")
    async_to_sync(store.append)(append_input(context.session_id, [user("hello")]))
    assert lost_races == [True]
    assert async_to_sync(store.load)(context) == [user("hello")]


@pytest.mark.django_db(transaction=True)
def test_a_generic_create_that_keeps_failing_raises_the_database_error(
    generic: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    create = QuerySet.create

    def always_fail(self: QuerySet[Any], **kwargs: Any) -> Any:
        if self.model is Conversation:
            raise IntegrityError("not the race: a constraint the row breaks")
        return create(self, **kwargs)

    monkeypatch.setattr(QuerySet, "create", always_fail)
    context = MemoryContext(session_id="refused")
    with pytest.raises(IntegrityError, match="not the race"):
        async_to_sync(DjangoMemoryStore().append)(append_input(context.session_id, [user("hello")]))
    assert not Conversation.objects.filter(session_id="refused").exists()


@pytest.mark.server
@pytest.mark.django_db(transaction=True)
def test_the_generic_dialect_survives_racing_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    if connection.vendor == "mysql":
        pytest.skip("InnoDB keeps a failed INSERT's shared lock: the generic path deadlocks")
    # Spawned workers read the test settings afresh: the variable reaches them.
    monkeypatch.setenv("ANVIA_TEST_DIALECT", "generic")
    with override_settings(ANVIA_DJANGO={"SQL_DIALECT": "generic"}):
        test_concurrency.test_writers_racing_to_create_each_new_session(processes=True)


@pytest.mark.mysql
@pytest.mark.django_db(transaction=True)
def test_mysql_without_returning_survives_racing_writers(mysql_without_returning: None) -> None:
    test_concurrency.test_writers_racing_to_create_each_new_session(processes=False)


@pytest.mark.django_db
@pytest.mark.parametrize("dialect", ["auto", "generic"])
def test_ids_are_exact_on_every_backend(dialect: str) -> None:
    with override_settings(ANVIA_DJANGO={"SQL_DIALECT": dialect}):
        for session_id in ("Abc", "abc", "abc ", "ABC"):
            append_messages(append_input(session_id, [user(session_id)], user_id=session_id))
        assert Conversation.objects.count() == 4
        for session_id in ("Abc", "abc", "abc ", "ABC"):
            assert load_messages(MemoryContext(session_id)) == [user(session_id)]
            listed = list_conversation_summaries(10, user_id=session_id)
            assert [summary.session_id for summary in listed] == [session_id]
        assert list_conversation_summaries(10, user_id="aBc") == []


@pytest.mark.django_db
def test_a_run_id_differing_in_case_is_another_run_not_a_retry() -> None:
    append_messages(append_input("s", [user("q")], run_id="run-A"))
    append_messages(append_input("s", [user("q")], run_id="run-a"))
    assert MemoryMessage.objects.count() == 2


FOUR_BYTES = "🦊 𝄞 𠜎 \U0010fffd"


@pytest.mark.django_db
@pytest.mark.parametrize("dialect", ["auto", "generic"])
def test_four_byte_characters_round_trip(dialect: str) -> None:
    with override_settings(ANVIA_DJANGO={"SQL_DIALECT": dialect}):
        context = MemoryContext(FOUR_BYTES, user_id=FOUR_BYTES, metadata={FOUR_BYTES: FOUR_BYTES})
        message = {"role": FOUR_BYTES, "content": FOUR_BYTES, FOUR_BYTES: [FOUR_BYTES]}
        append_messages(
            append_input(
                FOUR_BYTES,
                [message, assistant(FOUR_BYTES)],
                run_id=FOUR_BYTES,
                user_id=FOUR_BYTES,
                metadata={FOUR_BYTES: FOUR_BYTES},
            )
        )
        assert load_messages(context) == [message, assistant(FOUR_BYTES)]
        stored = Conversation.objects.get()
        assert (stored.session_id, stored.user_id, stored.metadata) == (
            FOUR_BYTES,
            FOUR_BYTES,
            {FOUR_BYTES: FOUR_BYTES},
        )
        assert set(MemoryMessage.objects.values_list("run_id", "role")) == {
            (FOUR_BYTES, FOUR_BYTES),
            (FOUR_BYTES, "assistant"),
        }


@pytest.mark.mysql
@pytest.mark.django_db
def test_mysql_columns_get_the_exact_collation() -> None:
    expected = exact_collation(connection)
    assert expected in ("utf8mb4_nopad_bin", "utf8mb4_0900_bin", "utf8mb4_bin")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT TABLE_NAME, COLUMN_NAME, COLLATION_NAME FROM information_schema.COLUMNS "
            "WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME LIKE 'anvia_django_%%' "
            f"AND COLLATION_NAME IS NOT NULL AND COLUMN_NAME <> '{SEARCH_COLUMN}'"
        )
        found = {(table, column): collation for table, column, collation in cursor.fetchall()}
    exact_columns = {
        (model._meta.db_table, field.column)
        for model in apps.get_app_config("anvia_django").get_models()
        for field in model._meta.concrete_fields
        if isinstance(field, IdentifierField | ExactTextField)
    }
    assert set(found) == exact_columns
    assert set(found.values()) == {expected}


PREFIXED = ("a_b%:x", "a_b%:y", "A_b%:x", "aXb%:x", "a_bZ:x", "a_b%", "a_b")


def _prefixed() -> QuerySet[LangGraphCheckpoint]:
    now = timezone.now()
    LangGraphCheckpoint.objects.bulk_create(
        LangGraphCheckpoint(
            thread_id=thread_id, checkpoint_id="1", type="json", checkpoint=b"{}", created_at=now
        )
        for thread_id in PREFIXED
    )
    return LangGraphCheckpoint.objects.filter(starts_with("default", "thread_id", "a_b%:"))


@pytest.mark.django_db
def test_an_id_prefix_is_matched_exactly() -> None:
    rows = _prefixed()
    assert sorted(rows.values_list("thread_id", flat=True)) == ["a_b%:x", "a_b%:y"]


@pytest.mark.mysql
@pytest.mark.django_db
def test_mysql_reads_an_id_prefix_as_a_range_of_the_index() -> None:
    # LIKE BINARY (Django's startswith there) reads the whole index.
    sql, params = _prefixed().values("pk").query.sql_with_params()
    assert "BINARY" not in sql
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN {sql}", params)
        names = [column[0] for column in cursor.description]
        [plan] = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
    assert plan["type"] == "range", plan


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_postgresql_gives_the_planner_estimate() -> None:
    append_messages(append_input("s", [user("q"), assistant("a")]))
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {MemoryMessage._meta.db_table}")
    assert dialects.estimated_row_count("default", MemoryMessage) == 2


@pytest.mark.django_db
def test_other_backends_give_no_estimate() -> None:
    if connection.vendor == "postgresql":
        pytest.skip("PostgreSQL has one")
    assert dialects.estimated_row_count("default", MemoryMessage) is None


def _collations() -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT DISTINCT COLLATION_NAME FROM information_schema.COLUMNS "
            "WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME LIKE 'anvia_django_%%' "
            f"AND COLLATION_NAME IS NOT NULL AND COLUMN_NAME <> '{SEARCH_COLUMN}'"
        )
        return {row[0] for row in cursor.fetchall()}


@pytest.mark.mysql
@pytest.mark.django_db(transaction=True)
def test_the_collation_migration_applies_and_reverts_on_mysql() -> None:
    from django.core.management import call_command

    exact = exact_collation(connection)
    append_messages(append_input("Kept", [user("across the migration")]))
    try:
        call_command("migrate", "anvia_django", "0002", verbosity=0)
        assert exact not in _collations()
    finally:
        call_command("migrate", "anvia_django", verbosity=0)
    assert _collations() == {exact}
    assert load_messages(MemoryContext("Kept")) == [user("across the migration")]


@pytest.mark.django_db(transaction=True)
def test_the_collation_migration_leaves_other_databases_alone() -> None:
    from django.core.management import call_command
    from django.test.utils import CaptureQueriesContext

    if connection.vendor == "mysql":
        pytest.skip("MySQL/MariaDB columns do change")
    try:
        call_command("migrate", "anvia_django", "0002", verbosity=0)
        with CaptureQueriesContext(connection) as captured:
            call_command("migrate", "anvia_django", "0003", verbosity=0)
    finally:
        call_command("migrate", "anvia_django", verbosity=0)
    schema_changes = [
        query["sql"]
        for query in captured.captured_queries
        if query["sql"].lstrip().upper().startswith(("ALTER", "CREATE", "DROP"))
    ]
    assert schema_changes == []


@pytest.mark.mysql
@pytest.mark.django_db
def test_messages_larger_together_than_a_packet_are_stored() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT @@max_allowed_packet")
        (packet,) = cursor.fetchone()
    # Each message fits in a packet; together they do not.
    size = min(packet // 3, 6 * 1024 * 1024)
    messages = [user(str(n) * size) for n in range(4)]
    assert sum(len(m["content"]) for m in messages) > packet
    append_messages(append_input("big", messages))
    assert load_messages(MemoryContext("big")) == messages


@pytest.mark.mysql  # rows over 1 MiB are measured against the server's packet size
@pytest.mark.django_db
def test_mysql_splits_the_insert_below_the_packet_size() -> None:
    rows = dialects.NewMessages(
        1, 0, "run", 1, ["user"] * 5, ['"' + "x" * 1_000_000 + '"'] * 5, timezone.now()
    )
    statements = dialects.MySQLDialect().insert_statements(connection, rows)
    assert [len(params) // 7 for _, params in statements] == [1, 1, 1, 1, 1]
    small = dialects.NewMessages(1, 0, "run", 1, ["user"] * 3, ["{}"] * 3, timezone.now())
    assert len(dialects.MySQLDialect().insert_statements(connection, small)) == 1


@pytest.mark.mysql
@pytest.mark.django_db
@pytest.mark.parametrize("dialect", [dialects.MySQLDialect(), dialects.MariaDBDialect()])
def test_an_upsert_that_changes_nothing_still_finds_its_row(dialect: dialects.Dialect) -> None:
    if (
        isinstance(dialect, dialects.MariaDBDialect)
        and not connection.features.can_return_columns_from_insert
    ):
        pytest.skip("needs MariaDB 10.5+")
    append_messages(append_input("other", [user("q")]))
    now = timezone.now()
    found = [
        dialect.lock_conversation("default", dialects.ConversationLock("same", "", "u", None, now))
        for _ in range(2)
    ]
    # The second upsert leaves the row as it was: no count, same clock.
    assert found[0] == found[1]
    assert found[0].id == Conversation.objects.get(session_id="same").pk


@pytest.mark.postgres
@pytest.mark.django_db
def test_without_the_append_function_appends_run_in_steps(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # As before ``migrate`` created it; the test's transaction restores it.
    with connection.cursor() as cursor:
        cursor.execute(f"DROP FUNCTION {dialects.postgresql.APPEND_FUNCTION}")
    try:
        append_messages(append_input("s", [user("q")], turn=1))
        append_messages(append_input("s", [user("q")], turn=1))  # a retry
        append_messages(append_input("s", [user("next")], turn=2))
    finally:
        dialects.forget_missing_functions()
    assert load_messages(MemoryContext("s")) == [user("q"), user("next")]
    assert Conversation.objects.get().message_count == 2
    # Said once, not on every append.
    assert [r.getMessage() for r in caplog.records].count(caplog.records[0].getMessage()) == 1
    assert "manage.py migrate" in caplog.records[0].getMessage()


@pytest.mark.django_db
def test_appends_after_a_retry_keep_every_guarantee() -> None:
    # A retry leaves the one statement writing nothing and runs the steps,
    # which recognise it; the appends after it stay gap-free.
    batch = [user("q"), assistant("a")]
    append_messages(append_input("s", batch, turn=1))
    append_messages(append_input("s", batch, turn=1))
    append_messages(append_input("s", [user("next")], turn=2))
    append_messages(append_input("s", batch, turn=1))  # still the last of turn 1: a retry
    append_messages(append_input("s", [user("q2")], turn=1))
    assert load_messages(MemoryContext("s")) == [*batch, user("next"), user("q2")]
    positions = MemoryMessage.objects.order_by("position").values_list("position", flat=True)
    assert list(positions) == [0, 1, 2, 3]
    assert Conversation.objects.get().message_count == 4
