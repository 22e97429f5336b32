"""What erasure and re-encryption leave in the live database (issue 35):
each compacts what it can reach (SQLite's FTS5 segments, PostgreSQL's dead
row versions, InnoDB's tables), or prints the statement to run."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection
from django.test import override_settings

from anvia_django.models import DataKey
from anvia_django.persistence import append_messages
from anvia_django.persistence.dialects.full_text import FTS_TABLE, sqlite_has_fts5
from tests.encryption.support import KEY_1, KEY_2, encryption
from tests.helpers import append_input, user

WORD = "zzqxplughword"
"""Shares no prefix with the other words: an FTS5 segment holds it whole."""


def fts_segments_hold(word: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {FTS_TABLE}_data WHERE instr(block, %s) > 0", [word])
        return bool(cursor.fetchone()[0])


def erase(user_id: str) -> str:
    out = StringIO()
    call_command("anvia_memory", "erase", "--user", user_id, "--yes", stdout=out)
    return out.getvalue()


@pytest.mark.sqlite
@pytest.mark.django_db
def test_erase_takes_the_users_words_out_of_sqlite_fts_segments() -> None:
    if not sqlite_has_fts5(connection):
        pytest.skip("this SQLite has no FTS5")
    append_messages(append_input("a", [user(f"{WORD} parcel")], user_id="alice"))
    append_messages(append_input("b", [user("bob's parcel")], user_id="bob"))
    with connection.cursor() as cursor:  # deleting alone leaves the word in the segments
        cursor.execute("SAVEPOINT probe")
        cursor.execute(
            "DELETE FROM anvia_django_memorymessage WHERE message LIKE %s", [f"%{WORD}%"]
        )
        assert fts_segments_hold(WORD)
        cursor.execute("ROLLBACK TO SAVEPOINT probe")
    out = erase("alice")
    assert not fts_segments_hold(WORD)
    assert "VACUUM" not in out
    assert "OPTIMIZE" not in out


@pytest.mark.postgres
@pytest.mark.django_db
def test_erase_in_a_transaction_prints_the_vacuum_on_postgresql() -> None:
    append_messages(append_input("a", [user("words")], user_id="alice"))
    out = erase("alice")  # the test's transaction: VACUUM cannot run in it
    assert "VACUUM" in out
    for table in ("memorymessage", "conversation", "failedrun", "memorysummary", "agentrun"):
        assert f'VACUUM "anvia_django_{table}";' in out


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_reencrypt_vacuums_the_key_table_on_postgresql() -> None:
    with override_settings(ANVIA_DJANGO=encryption("k1", k1=KEY_1)):
        append_messages(append_input("a", [user("words")], user_id="u1"))
    with override_settings(ANVIA_DJANGO=encryption("k2", k1=KEY_1, k2=KEY_2)):
        out = StringIO()
        call_command("anvia_memory", "rotate-keys", "--reencrypt", stdout=out, stderr=StringIO())
    assert "1 old data key(s) destroyed" in out.getvalue()
    assert "VACUUM" not in out.getvalue()  # it ran
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT vacuum_count FROM pg_stat_user_tables WHERE relname = %s",
            [DataKey._meta.db_table],
        )
        assert cursor.fetchone()[0] >= 1


@pytest.mark.postgres
@pytest.mark.django_db
def test_reencrypt_in_a_transaction_prints_the_vacuum_of_the_key_table() -> None:
    with override_settings(ANVIA_DJANGO=encryption("k1", k1=KEY_1)):
        append_messages(append_input("a", [user("words")], user_id="u1"))
    with override_settings(ANVIA_DJANGO=encryption("k2", k1=KEY_1, k2=KEY_2)):
        out = StringIO()
        call_command("anvia_memory", "rotate-keys", "--reencrypt", stdout=out, stderr=StringIO())
    assert 'VACUUM "anvia_django_datakey";' in out.getvalue()


@pytest.mark.mysql
@pytest.mark.django_db(transaction=True)
def test_erase_optimizes_the_tables_on_mariadb() -> None:
    append_messages(append_input("a", [user(f"{WORD} parcel")], user_id="alice"))
    with connection.cursor() as cursor:
        cursor.execute("SHOW SESSION STATUS LIKE 'Com_optimize'")
        before = int(cursor.fetchone()[1])
    out = erase("alice")
    assert "OPTIMIZE" not in out  # it ran, outside a transaction
    with connection.cursor() as cursor:
        cursor.execute("SHOW SESSION STATUS LIKE 'Com_optimize'")
        assert int(cursor.fetchone()[1]) == before + 1
