"""Content search over message text (persistence/inspector/search.py), on every backend.

Transactional on MariaDB only: InnoDB's FULLTEXT index sees committed rows
only, so a row written inside the test's transaction could not be found there.
"""

from __future__ import annotations

from typing import Any

import pytest

from anvia_django.core.memory import MemoryContext
from anvia_django.core.memory.errors import InvalidMemoryInputError
from anvia_django.core.memory.search_text import message_text, snippet
from anvia_django.models import Conversation
from anvia_django.persistence import (
    append_messages,
    clear_conversation,
    first_matching_positions,
    matching_conversations,
    search_conversation_page,
    search_message_page,
    search_messages,
)
from anvia_django.persistence.inspector.search import MAX_QUERY_LENGTH

from .helpers import append_input, assistant, user

pytestmark = [pytest.mark.django_db, pytest.mark.transactional_on("mysql")]

HOSTILE = [
    '"',
    '""',
    "*",
    "order*",
    "NEAR",
    "NEAR(order shipped)",
    "order NEAR shipped",
    "-order",
    "+order -shipped",
    "order OR shipped",
    "AND",
    "(",
    ")",
    "^order",
    "body:order",
    "'",
    "\\",
    "%",
    "_",
    "@",
    "order:*",
    "!order & | <->",
    "…",
    "<script>",
    "%s %s",
]


def tool_result(call_id: str, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


@pytest.fixture
def stored() -> None:
    append_messages(
        append_input(
            "orders",
            [
                user("Where is order 1042? It has not arrived."),
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{"id": "c1", "function": {"name": "lookup_parcel"}}],
                },
                tool_result("c1", "Parcel 1042 is held at the depot in Zaragoza."),
                assistant("Your parcel waits at the depot."),
            ],
            user_id="alice",
        )
    )
    append_messages(
        append_input(
            "parts",
            [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "Ein schönes Gemälde"},
                        {"type": "image_url", "image_url": {"url": "https://x.test/kiwi.png"}},
                        {"type": "text", "text": "über Straßenbahnen"},
                    ],
                },
                {"role": "tool", "tool_call_id": "c2", "content": {"status": "delivered"}},
            ],
            user_id="bob",
        )
    )


def positions(q: str, **kwargs: Any) -> list[tuple[str, int]]:
    return [(hit.session_id, hit.position) for hit in search_messages(q, limit=50, **kwargs).items]


@pytest.mark.usefixtures("stored")
def test_a_word_of_the_content_finds_its_message() -> None:
    assert positions("depot") == [("orders", 3), ("orders", 2)]
    assert positions("arrived") == [("orders", 0)]


@pytest.mark.usefixtures("stored")
def test_every_word_must_match() -> None:
    assert positions("parcel depot") == [("orders", 3), ("orders", 2)]
    assert positions("parcel Zaragoza") == [("orders", 2)]
    assert positions("parcel kiwi") == []


@pytest.mark.usefixtures("stored")
def test_case_does_not_matter() -> None:
    assert positions("ZARAGOZA") == [("orders", 2)]


@pytest.mark.usefixtures("stored")
def test_text_of_a_tool_result_is_found() -> None:
    assert positions("Zaragoza") == [("orders", 2)]
    assert search_messages("Zaragoza", limit=5).items[0].role == "tool"


@pytest.mark.usefixtures("stored")
def test_text_parts_of_a_content_list_are_found() -> None:
    assert positions("Gemälde") == [("parts", 0)]
    assert positions("Straßenbahnen") == [("parts", 0)]


@pytest.mark.usefixtures("stored")
@pytest.mark.parametrize(
    "q",
    ["role", "content", "tool_calls", "lookup_parcel", "status", "delivered", "image_url", "kiwi"],
)
def test_json_keys_and_structured_values_are_not_text(q: str) -> None:
    assert positions(q) == []


@pytest.mark.usefixtures("stored")
def test_a_hit_names_its_conversation_and_shows_a_snippet() -> None:
    (hit,) = search_messages("Zaragoza", limit=5).items
    conversation = Conversation.objects.get(session_id="orders")
    assert (hit.conversation_id, hit.conversation_ref) == (conversation.pk, conversation.ref)
    assert hit.user_id == "alice"
    assert "Zaragoza" in hit.snippet


@pytest.mark.usefixtures("stored")
def test_user_id_keeps_other_users_messages_out() -> None:
    assert positions("depot", user_id="alice") == [("orders", 3), ("orders", 2)]
    assert positions("depot", user_id="bob") == []
    assert positions("Gemälde", user_id="alice") == []


@pytest.mark.usefixtures("stored")
@pytest.mark.parametrize("q", HOSTILE)
def test_fts_syntax_and_punctuation_never_raise(q: str) -> None:
    found = positions(q)
    assert all(session in ("orders", "parts") for session, _ in found)
    conversation = Conversation.objects.get(session_id="orders")
    search_message_page(conversation.pk, q, limit=10)
    search_conversation_page(q, 10)


@pytest.mark.usefixtures("stored")
def test_operators_are_words_not_syntax() -> None:
    # "-" does not exclude, "*" is no prefix, quotes do not make a phrase.
    assert positions("-depot") == positions("depot")
    assert positions("depo*") == []
    assert positions('"depot Zaragoza"') == [("orders", 2)]


@pytest.mark.parametrize(
    ("q", "error"),
    [
        ("", "must not be empty"),
        ("   ", "must not be empty"),
        ("x" * (MAX_QUERY_LENGTH + 1), "the maximum is"),
        ("a\x00b", "U\\+0000"),
        ("\ud800", "surrogates"),
    ],
)
def test_queries_no_backend_could_take_are_refused_naming_q(q: str, error: str) -> None:
    with pytest.raises(InvalidMemoryInputError, match=error) as raised:
        search_messages(q, limit=10)
    assert raised.value.path == "q"


@pytest.mark.usefixtures("stored")
def test_a_long_query_at_the_limit_is_fine() -> None:
    assert positions("depot " * (MAX_QUERY_LENGTH // 6)) == [("orders", 3), ("orders", 2)]


def test_pages_follow_the_keyset_newest_first(django_assert_num_queries: Any) -> None:
    for number in range(7):
        append_messages(
            append_input(f"s{number}", [user(f"needle number {number}"), user("hay")], turn=1)
        )
    seen: list[str] = []
    after = None
    pages = 0
    while True:
        with django_assert_num_queries(1):
            page = search_messages("needle", limit=3, after=after)
        seen += [hit.session_id for hit in page.items]
        pages += 1
        after = page.next_after
        if after is None:
            break
    assert seen == [f"s{number}" for number in reversed(range(7))]
    assert pages == 3


def test_one_query_whatever_the_number_of_hits(django_assert_num_queries: Any) -> None:
    append_messages(append_input("few", [user("needle")]))
    with django_assert_num_queries(1):
        search_messages("needle", limit=50)
    append_messages(append_input("many", [user(f"needle {n}") for n in range(40)]))
    with django_assert_num_queries(1):
        assert len(search_messages("needle", limit=50).items) == 41


def test_a_query_without_words_costs_no_query(django_assert_num_queries: Any) -> None:
    with django_assert_num_queries(0):
        assert search_messages("?!", limit=10).items == []


@pytest.mark.usefixtures("stored")
def test_message_page_keeps_position_order_and_pages_by_position() -> None:
    conversation = Conversation.objects.get(session_id="orders")
    page = search_message_page(conversation.pk, "depot", limit=1)
    assert [m.position for m in page.items] == [2]
    assert page.next_after == 2
    page = search_message_page(conversation.pk, "depot", after=2, limit=1)
    assert [m.position for m in page.items] == [3]
    assert not page.has_more


def test_conversation_page_lists_conversations_with_a_hit_newest_first() -> None:
    for number in range(5):
        text = "needle here" if number % 2 == 0 else "nothing"
        append_messages(append_input(f"s{number}", [user(text)], user_id=f"u{number}"))
    page = search_conversation_page("needle", 2)
    assert [s.session_id for s in page.items] == ["s4", "s2"]
    assert page.next_key is not None
    page = search_conversation_page("needle", 2, after=page.next_key)
    assert [s.session_id for s in page.items] == ["s0"]
    assert page.next_key is None
    assert [s.session_id for s in search_conversation_page("needle", 5, "u2").items] == ["s2"]
    assert search_conversation_page("needle", 5, "u1").items == []


@pytest.mark.usefixtures("stored")
def test_matching_conversations_narrows_a_queryset() -> None:
    found = matching_conversations(Conversation.objects.all(), _terms("Gemälde"))
    assert list(found.values_list("session_id", flat=True)) == ["parts"]


@pytest.mark.usefixtures("stored")
def test_first_matching_positions_one_query_for_all(django_assert_num_queries: Any) -> None:
    ids = list(Conversation.objects.order_by("id").values_list("id", flat=True))
    with django_assert_num_queries(1):
        first = first_matching_positions(ids, "depot")
    assert first == {ids[0]: 2}


@pytest.mark.usefixtures("stored")
def test_deleted_messages_are_no_longer_found() -> None:
    clear_conversation(MemoryContext("orders"))
    assert positions("depot") == []
    append_messages(append_input("orders", [user("a new depot")]))
    assert positions("depot") == [("orders", 0)]


def test_message_text_mirrors_what_the_database_indexes() -> None:
    assert message_text({"role": "user", "content": "plain"}) == "plain"
    parts = [{"type": "text", "text": "a"}, {"type": "image_url"}, "b", {"text": "c"}]
    assert message_text({"role": "user", "content": parts}) == "a c"
    assert message_text({"role": "tool", "content": {"text": "no"}}) == ""
    assert message_text({"role": "assistant", "content": None}) == ""


def test_snippet_centres_on_the_first_word_found() -> None:
    text = "x " * 200 + "the needle sits here " + "y " * 200
    cut = snippet(text, ["needle"])
    assert "needle" in cut
    assert cut.startswith("…")
    assert cut.endswith("…")
    assert len(cut) <= 162
    assert snippet("short text", ["absent"]) == "short text"


def _terms(q: str) -> Any:
    from anvia_django.persistence import validate_query

    return validate_query(q)


def test_a_message_updated_in_place_is_found_by_the_words_it_kept() -> None:
    # SQLite's FTS5 triggers once removed the old text after adding the new
    # (newest trigger first), losing the shared words (migration 0011).
    from anvia_django.models import MemoryMessage

    append_messages(append_input("s", [user("parcel lost in transit")]))
    MemoryMessage.objects.update(message={"role": "user", "content": "parcel found"})
    assert [hit.session_id for hit in search_messages("parcel", limit=5).items] == ["s"]
    assert search_messages("transit", limit=5).items == []
    assert [hit.session_id for hit in search_messages("found", limit=5).items] == ["s"]
