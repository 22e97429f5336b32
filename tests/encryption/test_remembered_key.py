"""A sealed append to a conversation that may hold a retry seals with the
data key this process last read for the owner, confirmed by the statement
that reads the tail (anvia_django/persistence/sealed.py). Another process
may have rotated, replaced or erased that key meanwhile: then the key is read
again, and nothing is ever sealed under a key that is not the owner's."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from anvia_django.core.memory import MemoryContext
from anvia_django.encryption.envelope import new_data_key, unwrap, wrap
from anvia_django.encryption.keyring import MissingKeyError
from anvia_django.encryption.keys import forget_keys, keyring
from anvia_django.models import DataKey, MemoryMessage
from anvia_django.persistence import append_messages, load_latest_messages, load_messages
from tests.encryption.support import encryption
from tests.helpers import append_input, assistant, snapshot, user

OWNER = "user:u1"
CONTEXT = MemoryContext("s", user_id="u1")


@pytest.fixture
def encrypted() -> Iterator[None]:
    with override_settings(ANVIA_DJANGO=encryption()):
        yield


def sealed_with(turn: int) -> set[int]:
    """The data key ids of the session's envelopes stored for ``turn``."""
    envelopes: list[Any] = list(
        MemoryMessage.objects.filter(conversation__session_id="s", turn=turn).values_list(
            "message", flat=True
        )
    )
    return {envelope["dk"] for envelope in envelopes}


def append_turn(turn: int, *messages: dict[str, Any]) -> None:
    append_messages(append_input("s", list(messages), user_id="u1", turn=turn))


def rewrap_in_place(raw: bytes | None = None) -> int:
    """What another process's rotation (``raw`` None: the same data key,
    wrapped anew) or re-encryption (a new data key ``raw`` under the same id)
    does to the owner's key row; its id."""
    ring = keyring()
    row = DataKey.objects.get(owner=OWNER)
    master = ring.master(row.master_key_id)
    data_key = raw or unwrap(master, row.master_key_id, OWNER, row.wrapped_key)
    DataKey.objects.filter(pk=row.pk).update(
        wrapped_key=wrap(master, row.master_key_id, OWNER, data_key)
    )
    return row.pk


@pytest.mark.django_db
def test_the_remembered_key_saves_the_key_query(
    encrypted: None, django_assert_num_queries: Any
) -> None:
    append_turn(1, user("one"), assistant("two"))
    forget_keys()  # a process that has not read the key yet
    with CaptureQueriesContext(connection) as reading:
        append_turn(2, user("three"), assistant("four"))
    with django_assert_num_queries(len(reading) - 1):
        append_turn(3, user("five"), assistant("six"))
    (key_id,) = DataKey.objects.values_list("pk", flat=True)
    assert sealed_with(2) == sealed_with(3) == {key_id}
    assert len(load_messages(CONTEXT)) == 6


@pytest.mark.django_db
def test_a_key_erased_by_another_process_is_not_sealed_with(encrypted: None) -> None:
    append_turn(1, user("one"), assistant("two"))
    append_turn(2, user("three"), assistant("four"))
    (erased,) = DataKey.objects.values_list("pk", flat=True)
    # Another process erases the key; this one still remembers it.
    DataKey.objects.filter(owner=OWNER).delete()
    append_turn(3, user("after"), assistant("the erasure"))
    (created,) = DataKey.objects.values_list("pk", flat=True)
    assert created != erased
    assert sealed_with(3) == {created}
    forget_keys()  # a process that never held the erased key
    assert load_latest_messages(CONTEXT, 2) == [user("after"), assistant("the erasure")]
    with pytest.raises(MissingKeyError, match=f"data key {erased} does not exist"):
        load_messages(CONTEXT)


@pytest.mark.django_db
def test_a_key_replaced_under_its_id_is_read_again(encrypted: None) -> None:
    append_turn(1, user("one"), assistant("two"))
    append_turn(2, user("three"), assistant("four"))
    # Another process gives the owner a new data key under the same id.
    key_id = rewrap_in_place(new_data_key())
    append_turn(3, user("under"), assistant("the new key"))
    assert sealed_with(3) == {key_id}
    forget_keys()  # opens with the key as stored now, not as remembered
    assert load_latest_messages(CONTEXT, 2) == [user("under"), assistant("the new key")]


@pytest.mark.django_db
def test_a_retry_is_recognised_when_the_remembered_key_was_rotated(encrypted: None) -> None:
    batch = [assistant("a"), {"role": "tool", "tool_call_id": "c1", "content": "ok"}]
    append_turn(1, user("q"))
    append_turn(2, *batch)
    rewrap_in_place()  # rotated elsewhere: the same data key, wrapped anew
    before = snapshot()
    append_turn(2, *batch)
    assert snapshot()["messages"] == before["messages"]
    append_turn(2, assistant("b"))
    assert load_messages(CONTEXT) == [user("q"), *batch, assistant("b")]
