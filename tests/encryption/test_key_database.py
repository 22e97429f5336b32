"""The data key table on a database of its own (``ENCRYPTION["KEY_DATABASE"]``
and the router of docs/production.md): a copy of the main database taken
before ``anvia_memory erase`` does not decrypt after it."""

from __future__ import annotations

from collections.abc import Iterator
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.db.models import Model
from django.test import override_settings

from anvia_django.core.memory import MemoryContext
from anvia_django.encryption.keyring import MissingKeyError
from anvia_django.encryption.keys import forget_keys
from anvia_django.models import Conversation, DataKey, MemoryMessage
from anvia_django.persistence import (
    append_messages,
    clear_conversation,
    load_latest_messages,
    load_messages,
)
from tests.encryption.support import KEY_1, KEY_2, encryption
from tests.helpers import append_input, assistant, snapshot, user

pytestmark = pytest.mark.django_db(databases=["default", "keys"])

KEYS = "keys"


class DataKeyRouter:
    """docs/production.md's router: the data key table on "keys" only."""

    def db_for_read(self, model: type[Model], **hints: Any) -> str | None:
        return KEYS if model._meta.model_name == "datakey" else None

    db_for_write = db_for_read

    def allow_relation(self, obj1: Model, obj2: Model, **hints: Any) -> bool | None:
        return None

    def allow_migrate(
        self, db: str, app_label: str, model_name: str | None = None, **hints: Any
    ) -> bool | None:
        if app_label == "anvia_django":
            return (db == KEYS) == (model_name == "datakey")
        return None


def keys_apart(current: str = "k1", **keys: str) -> override_settings:
    config = encryption(current, **keys)
    config["ENCRYPTION"]["KEY_DATABASE"] = KEYS
    return override_settings(ANVIA_DJANGO=config, DATABASE_ROUTERS=[DataKeyRouter()])


@pytest.fixture
def encrypted_keys_apart() -> Iterator[None]:
    with keys_apart():
        yield


def key_rows() -> list[tuple[int, str, str, str]]:
    """(pk, owner, master key id, wrapped key) of the keys database's data keys."""
    return list(
        DataKey.objects.using(KEYS)
        .order_by("owner")
        .values_list("pk", "owner", "master_key_id", "wrapped_key")
    )


def dump_main_database() -> dict[str, list[Any]]:
    """The conversation and message rows of the main database, as stored
    (envelopes, never opened): what a backup of it holds."""
    return {
        "conversations": list(Conversation.objects.using("default").order_by("pk").values()),
        "messages": list(MemoryMessage.objects.using("default").order_by("pk").values()),
    }


def restore_main_database(dump: dict[str, list[Any]]) -> None:
    """Put the dumped rows back (the backup restored), keys and all columns
    as they were."""
    Conversation.objects.using("default").all().delete()
    Conversation.objects.using("default").bulk_create(
        Conversation(**row) for row in dump["conversations"]
    )
    MemoryMessage.objects.using("default").bulk_create(
        MemoryMessage(**row) for row in dump["messages"]
    )


def test_a_dump_taken_before_erase_does_not_decrypt_after_it(
    encrypted_keys_apart: None,
) -> None:
    alice = MemoryContext("alice-chat", user_id="alice")
    append_messages(append_input("alice-chat", [user("my IBAN is DE89 3704")], user_id="alice"))
    append_messages(append_input("alice-notes", [user("a second secret")], user_id="alice"))
    append_messages(
        append_input("bob-chat", [user("bob asks"), assistant("bob hears")], user_id="bob")
    )
    # Keys went to their own database only: the main database holds envelopes
    # and no key (its DataKey table exists, unrouted, and stays empty).
    assert [owner for _, owner, _, _ in key_rows()] == ["user:alice", "user:bob"]
    assert not DataKey.objects.using("default").exists()
    assert not any("IBAN" in str(row["message"]) for row in dump_main_database()["messages"])
    (alice_key, _, _, _), bob_key_row = key_rows()
    assert load_messages(alice) == [user("my IBAN is DE89 3704")]

    dump = dump_main_database()
    before = snapshot()
    out = StringIO()
    call_command("anvia_memory", "erase", "--user", "alice", "--yes", stdout=out)
    assert "2 conversation(s)" in out.getvalue()
    assert "1 data key(s) destroyed" in out.getvalue()
    # The keys database lost alice's key and nothing else.
    assert key_rows() == [bob_key_row]

    restore_main_database(dump)
    assert snapshot() == before  # the restored rows are exactly the ones that decrypted
    forget_keys()  # a process that never held alice's key
    for read in (
        lambda: load_messages(alice),
        lambda: load_latest_messages(alice, 1),
        lambda: load_messages(MemoryContext("alice-notes", user_id="alice")),
        lambda: MemoryMessage.objects.filter(conversation__user_id="alice").first(),
    ):
        with pytest.raises(MissingKeyError, match=rf"^data key {alice_key} does not exist") as err:
            read()
        assert "IBAN" not in str(err.value)
        assert "secret" not in str(err.value)
    # Bob's restored rows open with his key, fetched again from the keys database.
    assert load_messages(MemoryContext("bob-chat", user_id="bob")) == [
        user("bob asks"),
        assistant("bob hears"),
    ]


def test_clearing_a_conversation_without_user_destroys_its_key_on_the_keys_database(
    encrypted_keys_apart: None, django_capture_on_commit_callbacks: Any
) -> None:
    append_messages(append_input("anonymous", [user("q")]))
    append_messages(append_input("kept", [user("k")], user_id="u1"))
    ref = Conversation.objects.get(session_id="anonymous").ref
    assert [owner for _, owner, _, _ in key_rows()] == [f"conversation:{ref}", "user:u1"]
    with django_capture_on_commit_callbacks(execute=True):
        clear_conversation(MemoryContext("anonymous"))
    assert [owner for _, owner, _, _ in key_rows()] == ["user:u1"]
    assert not DataKey.objects.using("default").exists()


def test_rotate_keys_rewraps_the_keys_database() -> None:
    with keys_apart("k1", k1=KEY_1):
        append_messages(append_input("a", [user("one")], user_id="u1"))
        append_messages(append_input("b", [user("two")]))
    stored = snapshot()
    with keys_apart("k2", k1=KEY_1, k2=KEY_2):
        call_command("anvia_memory", "rotate-keys", stdout=StringIO())
    assert {master for _, _, master, _ in key_rows()} == {"k2"}
    assert snapshot() == stored  # messages untouched
    with keys_apart("k2", k2=KEY_2):
        assert load_messages(MemoryContext("a", user_id="u1")) == [user("one")]
        assert load_messages(MemoryContext("b")) == [user("two")]
