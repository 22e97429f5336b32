"""Migration 0008 (conversation scopes) on a populated database, both ways."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test import override_settings

from anvia_django.core.memory import MemoryContext
from anvia_django.models import Conversation, MemoryMessage
from anvia_django.persistence import append_messages, load_messages

from .helpers import append_input, user

BEFORE = ("anvia_django", "0007_message_search")
COLUMNS = ("ref", "session_id", "user_id", "metadata", "message_count")


def rows() -> dict[str, list[tuple[Any, ...]]]:
    """Every conversation and message as the models before 0008 see them."""
    return {
        "conversations": sorted(Conversation.objects.values_list(*COLUMNS)),
        "messages": sorted(
            MemoryMessage.objects.values_list("conversation__ref", "position", "message")
        ),
    }


def migrate_back_then_forward(scope: Any = None) -> None:
    call_command("migrate", "anvia_django", BEFORE[1], verbosity=0)
    settings = {} if scope is None else {"SCOPE": scope}
    with override_settings(ANVIA_DJANGO=settings):
        call_command("migrate", "anvia_django", verbosity=0)


def populate() -> None:
    append_messages(append_input("owned", [user("alice's")], user_id="alice"))
    append_messages(append_input("server", [user("no user")], metadata={"tenant_id": "acme"}))
    append_messages(
        append_input("tenant", [user("bob's")], user_id="bob", metadata={"tenant_id": "acme"})
    )


@pytest.mark.django_db(transaction=True)
def test_every_row_survives_both_ways_and_keeps_its_default_key(default_scope: None) -> None:
    populate()
    kept = rows()
    migrate_back_then_forward()
    assert rows() == kept
    assert dict(Conversation.objects.values_list("session_id", "scope_key")) == {
        "owned": "alice",
        "server": "",
        "tenant": "bob",
    }
    # Reachable as before, and writable at once.
    assert load_messages(MemoryContext("owned", "alice")) == [user("alice's")]
    append_messages(append_input("owned", [user("again")], user_id="alice", turn=2))
    assert Conversation.objects.get(session_id="owned").message_count == 2


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("scope", "keys"),
    [
        ({"user_id": False}, {"owned": "", "server": "", "tenant": ""}),
        (
            {"user_id": True, "metadata_keys": ["tenant_id"]},
            # A row without the tenant cannot be named by a context: "".
            {"owned": "", "server": '[null,"acme"]', "tenant": '["bob","acme"]'},
        ),
    ],
)
def test_the_keys_follow_the_scope_setting_at_migration_time(
    scope: dict[str, Any], keys: dict[str, str]
) -> None:
    populate()
    kept = rows()
    migrate_back_then_forward(scope)
    assert rows() == kept
    assert dict(Conversation.objects.values_list("session_id", "scope_key")) == keys
    with override_settings(ANVIA_DJANGO={"SCOPE": scope}):
        assert load_messages(MemoryContext("tenant", "bob", {"tenant_id": "acme"})) == [
            user("bob's")
        ]


@pytest.mark.django_db(transaction=True)
def test_going_back_is_refused_while_a_session_id_has_two_scopes(default_scope: None) -> None:
    append_messages(append_input("shared", [user("alice's")], user_id="alice"))
    append_messages(append_input("shared", [user("bob's")], user_id="bob"))
    kept = rows()
    applied = set(MigrationExecutor(connection).loader.applied_migrations)
    try:
        with pytest.raises(CommandError, match=r"'shared'.*Nothing was unapplied"):
            call_command("migrate", "anvia_django", BEFORE[1], verbosity=0)
        # Refused before anything ran: every later migration is still applied.
        assert set(MigrationExecutor(connection).loader.applied_migrations) == applied
        assert rows() == kept
    finally:
        call_command("migrate", "anvia_django", verbosity=0)
