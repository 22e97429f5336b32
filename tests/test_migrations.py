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
def test_the_append_function_comes_and_goes_with_migration_0005() -> None:
    def function_exists() -> bool:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT to_regprocedure(%s) IS NOT NULL",
                [f"{dialects.APPEND_FUNCTION}({dialects._APPEND_ARGUMENT_TYPES})"],
            )
            return bool(cursor.fetchone()[0])

    def statements_of_an_append(turn: int) -> int:
        with CaptureQueriesContext(connection) as captured:
            append_messages(append_input("s", [user(f"turn {turn}")], turn=turn))
        return len(captured.captured_queries)

    assert function_exists()
    call_command("migrate", "anvia_django", "0004", verbosity=0)
    try:
        assert not function_exists()
        assert statements_of_an_append(1) > 1  # in steps, and still stored
    finally:
        call_command("migrate", "anvia_django", verbosity=0)
    assert function_exists()
    assert statements_of_an_append(2) == 1  # migrate told the store to look again
    assert Conversation.objects.get(session_id="s").message_count == 2
