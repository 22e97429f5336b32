"""Content search over encrypted messages through the keyed blind index
(``ENCRYPTION["BLIND_INDEX"]``), on every backend.

Transactional on MariaDB only: InnoDB's FULLTEXT index sees committed rows only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest
from django.test import override_settings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anvia_django.checks import check_encryption
from anvia_django.core.memory import MemoryContext
from anvia_django.core.memory.branches import MemoryForkInput
from anvia_django.encryption.blind_index import normalised_words
from anvia_django.models import Conversation, MemoryMessage
from anvia_django.persistence import (
    append_messages,
    first_matching_positions,
    fork_conversation,
    search_conversation_page,
    search_message_page,
    search_messages,
)
from tests.encryption.support import blind_index, encryption
from tests.helpers import append_input, assistant, user

pytestmark = [pytest.mark.django_db, pytest.mark.transactional_on("mysql")]


@pytest.fixture
def indexed() -> Iterator[None]:
    with override_settings(ANVIA_DJANGO=blind_index()):
        yield


def _write(session_id: str, *messages: dict[str, str], user_id: str | None = None) -> None:
    append_messages(append_input(session_id, list(messages), user_id=user_id))


def _sessions(query: str) -> set[str]:
    return {hit.session_id for hit in search_messages(query, limit=50).items}


def test_search_finds_sealed_messages_by_exact_words(indexed: None) -> None:
    _write("a", user("Where is order 1042?"), assistant("Order 1042 shipped to Zürich."))
    _write("b", user("Cancel my subscription"), user_id="bob")
    stored = list(MemoryMessage.objects.values_list("message", flat=True))
    raw = json.dumps(stored)
    # Ciphertext and tokens are random letters and digits, so a short word
    # such as "1042" can turn up in them by chance; longer phrases cannot.
    for phrase in ("order 1042", "Order 1042", "shipped", "Cancel my", "subscription"):
        assert phrase not in raw
    # What stays searchable is keyed tokens, never the words themselves.
    for message in stored:
        assert re.fullmatch(r"[0-9a-f]{20}( [0-9a-f]{20})*", message["content"])
    assert _sessions("order") == {"a"}
    assert _sessions("ORDER 1042") == {"a"}  # every word, any case
    assert _sessions("zürich") == {"a"}
    assert _sessions("subscription") == {"b"}  # another user's too: staff search
    assert _sessions("ord") == set()  # exact words, not prefixes
    assert _sessions("order subscription") == set()
    (hit,) = search_messages("shipped", limit=5).items
    assert "Order 1042 shipped" in hit.snippet  # cut from the opened text


def test_every_search_path_opens_what_it_finds(indexed: None) -> None:
    _write("a", user("first question"), assistant("the refund is approved"))
    conversation = Conversation.objects.get(session_id="a")
    page = search_message_page(conversation.pk, "refund", limit=5)
    assert [item.message for item in page.items] == [assistant("the refund is approved")]
    found = search_conversation_page("refund", 5)
    assert [item.session_id for item in found.items] == ["a"]
    assert first_matching_positions([conversation.pk], "refund") == {conversation.pk: 1}


def test_a_forks_copies_stay_findable(indexed: None) -> None:
    _write("a", user("passport number please"), assistant("noted"))
    fork_conversation(MemoryForkInput(MemoryContext("a"), "a-fork", position=2))
    assert _sessions("passport") == {"a", "a-fork"}


def test_without_the_blind_index_sealed_messages_are_not_found() -> None:
    with override_settings(ANVIA_DJANGO=encryption()):
        _write("a", user("invisible words"))
        assert _sessions("invisible") == set()
        assert [m.id for m in check_encryption(None)] == ["anvia_django.W201"]
    with override_settings(ANVIA_DJANGO=blind_index()):
        # Found, under each owner's key: a search over many owners is bounded.
        assert [m.id for m in check_encryption(None)] == ["anvia_django.W202"]


def test_a_search_before_anything_was_indexed_writes_nothing(indexed: None) -> None:
    assert _sessions("anything") == set()
    assert not MemoryMessage.objects.exists()
    from anvia_django.models import DataKey

    assert not DataKey.objects.exists()  # a read made no index key


words = st.text(alphabet=st.characters(categories=["Ll", "Lu", "Nd"]), min_size=1, max_size=8)


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(texts=st.lists(st.lists(words, min_size=1, max_size=4), min_size=1, max_size=3))
def test_each_word_finds_exactly_the_messages_holding_it(
    indexed: None, texts: list[list[str]]
) -> None:
    MemoryMessage.objects.all().delete()
    Conversation.objects.all().delete()
    for index, message_words in enumerate(texts):
        _write(f"s{index}", user(" ".join(message_words)))
    for message_words in texts:
        for word in normalised_words(" ".join(message_words)):
            expected = {
                f"s{i}"
                for i, other in enumerate(texts)
                if word in normalised_words(" ".join(other))
            }
            assert _sessions(word) == expected


def test_a_blind_index_setting_that_is_not_a_boolean_is_refused() -> None:
    setting = blind_index()
    setting["ENCRYPTION"]["BLIND_INDEX"] = "yes"
    with override_settings(ANVIA_DJANGO=setting):
        (error,) = check_encryption(None)
    assert error.id == "anvia_django.E202"
    assert "BLIND_INDEX must be True or False" in error.msg


def test_a_message_with_more_words_than_the_cap_is_found_by_the_first(
    indexed: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from anvia_django.encryption import blind_index

    monkeypatch.setattr(blind_index, "MAX_TOKENS", 3)
    _write("a", user("one two three four"))
    assert _sessions("three") == {"a"}
    assert _sessions("four") == set()


def test_an_index_key_rolled_back_is_never_kept(indexed: None) -> None:
    from django.db import transaction

    from anvia_django.encryption.keys import forget_keys

    def two_writes_rolled_back() -> None:
        with transaction.atomic():
            _write("a", user("first parcel"))
            _write("b", user("second parcel"))  # the key seen twice in one transaction
            raise RuntimeError("rolled back")

    with pytest.raises(RuntimeError):
        two_writes_rolled_back()
    _write("c", user("third parcel"))
    forget_keys()  # as a restart would
    assert _sessions("parcel") == {"c"}
