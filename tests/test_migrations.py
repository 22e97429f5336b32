from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from anvia_django.models import Conversation
from anvia_django.persistence import append_messages, dialects

from .helpers import append_input, user


@pytest.mark.django_db
def test_models_and_migrations_agree() -> None:
    # Fails when a model change ships without its migration.
    call_command("makemigrations", "anvia_django", "--check", "--dry-run", stdout=StringIO())


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_without_the_append_function_appends_run_in_steps_until_migrate() -> None:
    function = f"{dialects.postgresql.APPEND_FUNCTION}({dialects.postgresql.APPEND_ARGUMENT_TYPES})"

    def function_exists() -> bool:
        with connection.cursor() as cursor:
            cursor.execute("SELECT to_regprocedure(%s) IS NOT NULL", [function])
            return bool(cursor.fetchone()[0])

    def statements_of_an_append(turn: int) -> int:
        with CaptureQueriesContext(connection) as captured:
            append_messages(append_input("s", [user(f"turn {turn}")], turn=turn))
        return len(captured.captured_queries)

    assert function_exists()
    with connection.cursor() as cursor:
        cursor.execute(f"DROP FUNCTION {function}")
    try:
        assert statements_of_an_append(1) > 1  # in steps, and still stored
    finally:
        # 0008 (re)creates the function the code calls.
        call_command("migrate", "anvia_django", "0007", verbosity=0)
        call_command("migrate", "anvia_django", verbosity=0)
    assert function_exists()
    assert statements_of_an_append(2) == 1  # migrate told the store to look again
    assert Conversation.objects.get(session_id="s").message_count == 2


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_the_append_function_finds_messages_by_index_on_tables_analysed_empty() -> None:
    # PL/pgSQL keeps the plans it made on the statistics of the moment: made
    # on an empty table, the retry check would scan the messages whole.
    connection.close()  # a backend with no plans of earlier tests
    messages = "anvia_django_memorymessage"
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regprocedure('pg_stat_force_next_flush()') IS NOT NULL")
        if not cursor.fetchone()[0]:
            pytest.skip("needs PostgreSQL 15's pg_stat_force_next_flush()")
        cursor.execute(f"VACUUM ANALYZE {Conversation._meta.db_table}, {messages}")

        def scans() -> tuple[int, int]:
            cursor.execute("SELECT pg_stat_force_next_flush(), pg_stat_clear_snapshot()")
            cursor.execute(
                "SELECT coalesce(seq_scan, 0), coalesce(idx_scan, 0) FROM pg_stat_user_tables"
                " WHERE relname = %s",
                [messages],
            )
            sequential, by_index = cursor.fetchone()
            return sequential, by_index

        before = scans()
        # Past PL/pgSQL's five custom plans, into the generic one it keeps;
        # one run and turn, so that every append checks for a retry.
        for number in range(12):
            append_messages(append_input("s", [user(f"message {number}")], turn=1))
        after = scans()
    assert after[0] == before[0]
    assert after[1] > before[1]
