"""Encryption at rest (issue 29, first slice): round trip, tamper, keys,
erasure, rotation."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection
from django.test import override_settings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anvia_django.core.memory import MemoryContext
from anvia_django.encryption.envelope import DecryptionError
from anvia_django.encryption.keyring import MissingKeyError
from anvia_django.encryption.keys import forget_keys
from anvia_django.models import DataKey, MemoryMessage
from anvia_django.persistence import (
    append_messages,
    load_latest_messages,
    load_messages,
    pop_last_message,
)

from ..helpers import append_input, assistant, snapshot, user
from .support import KEY_1, KEY_2, encryption


@pytest.fixture
def encrypted() -> Iterator[None]:
    with override_settings(ANVIA_DJANGO=encryption()):
        yield


def raw_messages(session_id: str) -> list[tuple[int, int, str]]:
    """(pk, position, column text) of the session's rows, in order."""
    return [
        (pk, position, json.dumps(message))
        for pk, position, message in MemoryMessage.objects.filter(
            conversation__session_id=session_id
        )
        .order_by("position")
        .values_list("pk", "position", "message")
    ]


texts = st.text(alphabet=st.characters(blacklist_characters="\x00"))
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | texts,
    lambda children: st.lists(children, max_size=3)
    | st.dictionaries(texts.filter(lambda key: len(key) <= 5), children, max_size=3),
    max_leaves=8,
)
messages = st.lists(
    st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant", "tool"])}).flatmap(
        lambda base: st.dictionaries(
            texts.filter(lambda key: len(key) <= 6 and key != "role"), json_values, max_size=3
        ).map(lambda rest: {**rest, **base})
    ),
    min_size=1,
    max_size=4,
)


@pytest.mark.django_db
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=st.lists(messages, min_size=1, max_size=3))
def test_an_exact_round_trip(encrypted: None, batches: list[list[dict[str, Any]]]) -> None:
    MemoryMessage.objects.all().delete()
    context = MemoryContext("round-trip", user_id="u1")
    for turn, batch in enumerate(batches, start=1):
        append_messages(append_input("round-trip", batch, turn=turn, user_id="u1"))
    everything = [message for batch in batches for message in batch]
    loaded = load_messages(context)
    assert json.dumps(loaded) == json.dumps(everything)
    assert load_latest_messages(context, 2) == everything[-2:]
    # Nothing readable in the column.
    for _, _, text in raw_messages("round-trip"):
        assert '"role"' not in text


@pytest.mark.django_db
def test_messages_are_sealed_and_windows_and_pop_open_them(encrypted: None) -> None:
    context = MemoryContext("s")
    append_messages(append_input("s", [user("secret one")], run_id="r1"))
    append_messages(append_input("s", [assistant("secret two"), user("three")], run_id="r2"))
    assert all("secret" not in text for _, _, text in raw_messages("s"))
    assert load_messages(context) == [user("secret one"), assistant("secret two"), user("three")]
    assert load_messages(context, limit=2) == [assistant("secret two"), user("three")]
    assert pop_last_message(context) == user("three")
    assert load_messages(context) == [user("secret one"), assistant("secret two")]
    assert DataKey.objects.count() == 1  # per conversation: it has no user


@pytest.mark.django_db
def test_a_retried_append_writes_nothing(encrypted: None) -> None:
    batch = [assistant("a"), {"role": "tool", "tool_call_id": "c1", "content": "ok"}]
    append_messages(append_input("s", [user("q")], turn=1))
    append_messages(append_input("s", batch, turn=2))
    before = snapshot()
    append_messages(append_input("s", batch, turn=2))
    assert snapshot()["messages"] == before["messages"]
    # Not a retry: different content for the same run and turn.
    append_messages(append_input("s", [assistant("b")], turn=2))
    assert len(load_messages(MemoryContext("s"))) == 4


@pytest.mark.django_db
def test_a_users_conversations_share_one_data_key(encrypted: None) -> None:
    append_messages(append_input("a", [user("x")], user_id="u1"))
    append_messages(append_input("b", [user("y")], user_id="u1"))
    append_messages(append_input("c", [user("z")], user_id="u2"))
    assert sorted(DataKey.objects.values_list("owner", flat=True)) == ["user:u1", "user:u2"]


@pytest.mark.django_db
def test_swapped_ciphertexts_both_fail_loudly(encrypted: None) -> None:
    append_messages(append_input("s", [user("first"), user("second")], user_id="u1"))
    (pk_a, _, text_a), (pk_b, _, text_b) = raw_messages("s")
    MemoryMessage.objects.filter(pk=pk_a).update(message=json.loads(text_b))
    MemoryMessage.objects.filter(pk=pk_b).update(message=json.loads(text_a))
    context = MemoryContext("s", user_id="u1")
    with pytest.raises(DecryptionError) as failed:
        load_messages(context)
    assert "position 0" in str(failed.value) and "first" not in str(failed.value)
    with pytest.raises(DecryptionError, match="position 1"):
        load_latest_messages(context, 1)


@pytest.mark.django_db
def test_a_row_copied_to_another_conversation_does_not_decrypt(encrypted: None) -> None:
    append_messages(append_input("a", [user("mine")], user_id="u1"))
    append_messages(append_input("b", [user("other")], user_id="u1"))
    (_, _, text_a), = raw_messages("a")
    (pk_b, _, _), = raw_messages("b")
    MemoryMessage.objects.filter(pk=pk_b).update(message=json.loads(text_a))
    with pytest.raises(DecryptionError):
        load_messages(MemoryContext("b", user_id="u1"))


@pytest.mark.django_db
def test_a_wrong_master_key_names_its_id_and_writes_nothing() -> None:
    with override_settings(ANVIA_DJANGO=encryption(k1=KEY_1)):
        append_messages(append_input("s", [user("q")], user_id="u1"))
    before = snapshot()
    # The same id, another key: the data key does not unwrap.
    with override_settings(ANVIA_DJANGO=encryption(k1=KEY_2)):
        with pytest.raises(DecryptionError, match="'k1'") as failed:
            append_messages(append_input("s", [user("more")], user_id="u1"))
        assert KEY_1 not in str(failed.value) and KEY_2 not in str(failed.value)
        with pytest.raises(DecryptionError, match="'k1'"):
            load_messages(MemoryContext("s", user_id="u1"))
    assert snapshot() == before


@pytest.mark.django_db
def test_a_missing_master_key_names_its_id_and_writes_nothing() -> None:
    with override_settings(ANVIA_DJANGO=encryption(k1=KEY_1)):
        append_messages(append_input("s", [user("q")], user_id="u1"))
    before = snapshot()
    with override_settings(ANVIA_DJANGO=encryption("k2", k2=KEY_2)):
        with pytest.raises(MissingKeyError, match="master key 'k1'"):
            append_messages(append_input("s", [user("more")], user_id="u1"))
        with pytest.raises(MissingKeyError, match="master key 'k1'"):
            load_messages(MemoryContext("s", user_id="u1"))
    assert snapshot() == before


@pytest.mark.django_db
def test_erase_destroys_the_users_data_key(encrypted: None) -> None:
    append_messages(append_input("a", [user("private")], user_id="u1"))
    append_messages(append_input("b", [user("kept")], user_id="u2"))
    copy = list(MemoryMessage.objects.filter(conversation__session_id="a").values())
    call_command("anvia_memory", "erase", "--user", "u1", "--yes", verbosity=0)
    assert not MemoryMessage.objects.filter(conversation__session_id="a").exists()
    assert list(DataKey.objects.values_list("owner", flat=True)) == ["user:u2"]
    # The copy (a backup taken before) put back does not open any more, also
    # in a process that never held the key.
    forget_keys()
    append_messages(append_input("a", [user("new")], user_id="u1"))  # a new key
    row = copy[0]
    restored_conversation = MemoryMessage.objects.get(conversation__session_id="a").conversation_id
    MemoryMessage.objects.create(**{**row, "id": None, "conversation_id": restored_conversation, "position": 1})
    with pytest.raises((MissingKeyError, DecryptionError)):
        load_messages(MemoryContext("a", user_id="u1"))
    assert load_messages(MemoryContext("b", user_id="u2")) == [user("kept")]


@pytest.mark.django_db
def test_rotate_keys_rewraps_and_keeps_everything_readable() -> None:
    with override_settings(ANVIA_DJANGO=encryption(k1=KEY_1)):
        append_messages(append_input("a", [user("one")], user_id="u1"))
        append_messages(append_input("b", [user("two")]))
    with override_settings(ANVIA_DJANGO=encryption("k2", k1=KEY_1, k2=KEY_2)):
        call_command("anvia_memory", "rotate-keys", verbosity=0)
        assert set(DataKey.objects.values_list("master_key_id", flat=True)) == {"k2"}
    # k1 gone: everything still opens with k2 alone.
    with override_settings(ANVIA_DJANGO=encryption("k2", k2=KEY_2)):
        assert load_messages(MemoryContext("a", user_id="u1")) == [user("one")]
        assert load_messages(MemoryContext("b")) == [user("two")]
        append_messages(append_input("a", [user("three")], user_id="u1", turn=2))
        assert load_messages(MemoryContext("a", user_id="u1")) == [user("one"), user("three")]


@pytest.mark.django_db
def test_rows_written_before_encryption_still_read(encrypted: None) -> None:
    with override_settings(ANVIA_DJANGO={}):
        append_messages(append_input("s", [user("plain")]))
    append_messages(append_input("s", [user("sealed")], turn=2))
    assert load_messages(MemoryContext("s")) == [user("plain"), user("sealed")]


def test_the_default_path_has_no_encryption() -> None:
    from anvia_django.encryption import encryption_enabled

    assert not encryption_enabled()
    assert connection.vendor  # the suite's database
