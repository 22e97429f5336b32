"""Encryption at rest (issue 29, first slice): round trip, tamper, keys,
erasure, rotation."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.management import call_command
from django.test import override_settings
from django.urls import reverse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anvia_django.checks import check_encryption
from anvia_django.core.memory import MemoryContext
from anvia_django.core.memory.branches import MemoryForkInput
from anvia_django.encryption.envelope import DecryptionError
from anvia_django.encryption.keyring import MissingKeyError
from anvia_django.encryption.keys import forget_keys
from anvia_django.models import Conversation, DataKey, MemoryMessage
from anvia_django.persistence import (
    ConversationFilter,
    ExportedMessage,
    append_messages,
    clear_conversation,
    fork_conversation,
    get_conversation_with_messages,
    iter_export_records,
    list_message_page,
    load_entries,
    load_latest_messages,
    load_messages,
    pop_last_message,
)
from tests.encryption.support import KEY_1, KEY_2, encryption
from tests.helpers import append_input, assistant, snapshot, user


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


texts = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\x00"))
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | texts,
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(texts.filter(lambda key: len(key) <= 5), children, max_size=3)
    ),
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
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
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
    assert "position 0" in str(failed.value)
    assert "first" not in str(failed.value)
    with pytest.raises(DecryptionError, match="position 1"):
        load_latest_messages(context, 1)


@pytest.mark.django_db
def test_a_row_copied_to_another_conversation_does_not_decrypt(encrypted: None) -> None:
    append_messages(append_input("a", [user("mine")], user_id="u1"))
    append_messages(append_input("b", [user("other")], user_id="u1"))
    ((_, _, text_a),) = raw_messages("a")
    ((pk_b, _, _),) = raw_messages("b")
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
        assert KEY_1 not in str(failed.value)
        assert KEY_2 not in str(failed.value)
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
    # A dump of the user's rows taken before the erasure.
    dumped_conversations = list(Conversation.objects.filter(user_id="u1").values())
    dumped_messages = list(MemoryMessage.objects.filter(conversation__user_id="u1").values())
    call_command("anvia_memory", "erase", "--user", "u1", "--yes", verbosity=0)
    assert not Conversation.objects.filter(user_id="u1").exists()
    assert list(DataKey.objects.values_list("owner", flat=True)) == ["user:u2"]
    # The dump restored, rows exactly as they were: nothing opens, also in a
    # process that never held the key, and the error names the key.
    forget_keys()
    for conversation in dumped_conversations:
        Conversation.objects.create(**conversation)
    for message in dumped_messages:
        MemoryMessage.objects.create(**message)
    with pytest.raises(MissingKeyError, match=r"data key \d+ does not exist") as failed:
        load_messages(MemoryContext("a", user_id="u1"))
    assert "private" not in str(failed.value)
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
    with override_settings(ANVIA_DJANGO={"ENCRYPTION": None}):
        append_messages(append_input("s", [user("plain")]))
    assert "plain" in raw_messages("s")[0][2]
    append_messages(append_input("s", [user("sealed")], turn=2))
    assert load_messages(MemoryContext("s")) == [user("plain"), user("sealed")]


def test_the_default_path_has_no_encryption() -> None:
    """Without the setting nothing of encryption runs: a fresh process that
    imports the store, the admin and the API and runs the system checks never
    imports ``cryptography`` (an optional extra) nor the key code (also in
    a run with ``ANVIA_TEST_ENCRYPTION=1``, which turns it on only in this
    process)."""
    script = (
        "import sys, django; django.setup()\n"
        "import anvia_django.store, anvia_django.admin, anvia_django.api.views\n"
        "from django.core import checks as django_checks\n"
        "django_checks.run_checks()\n"
        "assert 'cryptography' not in sys.modules, 'cryptography imported'\n"
        "assert 'anvia_django.encryption.keys' not in sys.modules\n"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings"}
    subprocess.run([sys.executable, "-c", script], check=True, env=env, timeout=120)


@pytest.mark.django_db
def test_a_fork_reseals_its_copies_for_itself(encrypted: None) -> None:
    append_messages(append_input("src", [user("one"), assistant("two")], user_id="u1"))
    fork_conversation(
        MemoryForkInput(MemoryContext("src", user_id="u1"), session_id="fork", position=1)
    )
    assert load_messages(MemoryContext("fork", user_id="u1")) == [user("one")]
    assert all("one" not in text for _, _, text in raw_messages("fork"))


@pytest.mark.django_db
def test_entries_export_and_the_inspector_open_sealed_messages(encrypted: None) -> None:
    append_messages(append_input("s", [user("hello"), assistant("hi")], user_id="u1"))
    context = MemoryContext("s", user_id="u1")
    assert [entry.message for entry in load_entries(context)] == [user("hello"), assistant("hi")]
    exported = [
        record.message.message
        for record in iter_export_records(ConversationFilter(user_id="u1"))
        if isinstance(record, ExportedMessage)
    ]
    assert exported == [user("hello"), assistant("hi")]
    conversation = Conversation.objects.get(session_id="s")
    page = list_message_page(conversation.pk, after=None, limit=10)
    assert [item.message for item in page.items] == [user("hello"), assistant("hi")]
    whole = get_conversation_with_messages(conversation.ref)
    assert whole is not None
    assert [item.message for item in whole.messages] == [user("hello"), assistant("hi")]
    # Model instances (the admin's record pages) too.
    assert MemoryMessage.objects.get(position=0).message == user("hello")


@pytest.mark.django_db
def test_clearing_a_conversation_without_user_destroys_its_key(
    encrypted: None, django_capture_on_commit_callbacks: Any
) -> None:
    append_messages(append_input("s", [user("q")]))
    assert DataKey.objects.filter(owner__startswith="conversation:").count() == 1
    with django_capture_on_commit_callbacks(execute=True):
        clear_conversation(MemoryContext("s"))
    assert not DataKey.objects.exists()


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({"KEYS": {"k1": "not base64!"}, "CURRENT": "k1"}, "'k1' is not valid URL-safe base64"),
        ({"KEYS": {"k1": "AAAA"}, "CURRENT": "k1"}, "'k1' decodes to 3 bytes; it must be 32"),
        ({"KEYS": {"k1": KEY_1}, "CURRENT": "k9"}, "CURRENT 'k9' is not one of"),
        ({"KEYS": {"k1": KEY_1}}, "CURRENT None is not one of"),
        ({"KEYS_ENV": "ANVIA_TEST_NO_SUCH_VARIABLE", "CURRENT": "k1"}, "is not set"),
    ],
)
def test_the_system_check_names_the_key_id_never_the_key(config: Any, expected: str) -> None:
    with override_settings(ANVIA_DJANGO={"ENCRYPTION": config}):
        errors = [m for m in check_encryption() if m.id == "anvia_django.E202"]
    assert len(errors) == 1
    assert expected in errors[0].msg
    assert KEY_1 not in errors[0].msg


def test_keys_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANVIA_TEST_KEYS", f"k2={KEY_2}")
    config = {"KEYS": {"k1": KEY_1}, "KEYS_ENV": "ANVIA_TEST_KEYS", "CURRENT": "k2"}
    with override_settings(ANVIA_DJANGO={"ENCRYPTION": config}):
        assert [m.id for m in check_encryption()] == ["anvia_django.W201"]


def test_no_check_message_without_encryption() -> None:
    with override_settings(ANVIA_DJANGO={"ENCRYPTION": None}):
        assert check_encryption() == []


@pytest.mark.django_db
def test_the_admin_and_the_api_show_decrypted_transcripts_to_staff(
    encrypted: None, admin_client: Any
) -> None:
    append_messages(append_input("s", [user("visible to staff")], user_id="u1"))
    conversation = Conversation.objects.get(session_id="s")
    message = MemoryMessage.objects.values_list("pk", flat=True).get()
    pages = [
        reverse("admin:anvia_django_conversation_change", args=[conversation.pk]),
        reverse("admin:anvia_django_memorymessage_change", args=[message]),
        f"/anvia/api/conversations/{conversation.ref}/",
    ]
    for page in pages:
        response = admin_client.get(page)
        assert response.status_code == 200, page
        assert "visible to staff" in response.content.decode(), page
        assert "anvia_enc" not in response.content.decode(), page
