"""One message that does not open (a flipped bit, or its data key gone as
after a backup of an erased owner is restored) is shown as such, by its id
and the error's class, in the admin's lists and pages and as the API's
documented JSON error for that conversation; everything else reads as
before, and the store's ``load`` keeps raising."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client, override_settings

from anvia_django.core.memory import MemoryContext, MemoryErrorInput
from anvia_django.encryption.envelope import DecryptionError
from anvia_django.encryption.keyring import MissingKeyError
from anvia_django.encryption.keys import forget_keys
from anvia_django.models import Conversation, DataKey, FailedRun, MemoryMessage, MemorySummary
from anvia_django.persistence import (
    append_messages,
    load_messages,
    record_failed_run,
)
from tests.api_client import LIST_URL, detail_url, messages_url
from tests.encryption.support import encryption, flip_a_bit
from tests.helpers import append_input, assistant, user
from tests.inspector_records import make_summaries

pytestmark = pytest.mark.django_db

ADMIN = "/admin/anvia_django"
SECRET = "my account number is 7781"


@pytest.fixture
def encrypted() -> Iterator[None]:
    with override_settings(ANVIA_DJANGO=encryption()):
        yield


def destroy_its_key(message: MemoryMessage) -> None:
    """Its data key gone and forgotten, as when a backup of an erased
    owner's rows is restored: every message of that owner."""
    stored = MemoryMessage.objects.filter(pk=message.pk).values_list("message", flat=True).get()
    DataKey.objects.filter(pk=stored["dk"]).delete()
    forget_keys()


DAMAGES = {
    "a flipped bit": (flip_a_bit, "DecryptionError", [0]),
    "its key gone": (destroy_its_key, "MissingKeyError", [0, 1, 2]),
}
TURNS = [user(SECRET), assistant("second message"), user("third message")]


@dataclass(frozen=True)
class Damage:
    conversation: Conversation
    unreadable: list[MemoryMessage]
    readable: list[str]
    """The texts of the conversation's messages that still open."""
    error_type: str


@pytest.fixture(params=list(DAMAGES.values()), ids=list(DAMAGES))
def damage(request: pytest.FixtureRequest, encrypted: None) -> Damage:
    """Conversation "bad" whose first user message does not open, beside a
    readable "good" one of another owner."""
    append_messages(append_input("good", [user("hello from good")], user_id="u-good"))
    append_messages(append_input("bad", TURNS, user_id="u-bad"))
    damage_it, error_type, positions = request.param
    first = MemoryMessage.objects.get(conversation__session_id="bad", position=0)
    damage_it(first)
    unreadable = list(
        MemoryMessage.objects.filter(conversation__session_id="bad", position__in=positions)
        .defer("message")
        .order_by("position")
    )
    readable = [m["content"] for p, m in enumerate(TURNS) if p not in positions]
    return Damage(first.conversation, unreadable, readable, error_type)


@pytest.fixture
def staff() -> Client:
    client = Client()
    client.force_login(User.objects.create_superuser("root", password="pw"))
    return client


def marks(damage: Damage, page: str) -> list[int]:
    """The ids of the messages ``page`` marks as unreadable."""
    found = re.findall(rf"[Mm]essage (\d+) cannot be opened \({damage.error_type}\)", page)
    return sorted({int(pk) for pk in found})


def test_the_admin_lists_and_pages_mark_the_rows_and_show_the_rest(
    damage: Damage, staff: Client
) -> None:
    bad, first = damage.conversation, damage.unreadable[0]
    pages = {
        "conversation list": (f"{ADMIN}/conversation/", [first.pk]),
        "message list": (f"{ADMIN}/memorymessage/", [m.pk for m in damage.unreadable]),
        "conversation page": (
            f"{ADMIN}/conversation/{bad.pk}/change/",
            [m.pk for m in damage.unreadable],
        ),
        "message page": (f"{ADMIN}/memorymessage/{first.pk}/change/", [first.pk]),
    }
    shown = {}
    for name, (url, marked) in pages.items():
        response = staff.get(url)
        assert response.status_code == 200, name
        shown[name] = response.content.decode()
        assert marks(damage, shown[name]) == marked, name
        # Never its content, nor its ciphertext.
        assert SECRET not in shown[name]
        assert "anvia_enc" not in shown[name], name
    assert "hello from good" in shown["conversation list"]
    assert "hello from good" in shown["message list"]
    for text in damage.readable:
        assert text in shown["message list"]
        assert text in shown["conversation page"]
    good = Conversation.objects.get(session_id="good")
    page = staff.get(f"{ADMIN}/conversation/{good.pk}/change/").content.decode()
    assert "hello from good" in page
    assert "cannot be opened" not in page


def test_the_api_answers_the_documented_json_error_for_that_conversation_only(
    damage: Damage, staff: Client
) -> None:
    bad = damage.conversation
    expected = {
        "detail": (
            f"The message at position 0 of this conversation cannot be opened "
            f"({damage.error_type})."
        ),
        "code": "unreadable_record",
        "record": "message",
        "position": 0,
        "errorType": damage.error_type,
    }
    for url in (detail_url(bad.ref), messages_url(bad.ref)):
        response = staff.get(url)
        assert response.status_code == 500, url
        assert response["Content-Type"] == "application/json"
        assert response.json() == expected
    if damage.readable:  # past it, the transcript reads as before
        after = staff.get(messages_url(bad.ref), {"after": 0}).json()
        assert [m["message"] for m in after] == TURNS[1:]
    good = Conversation.objects.get(session_id="good")
    body: Any = staff.get(detail_url(good.ref)).json()
    assert [m["message"] for m in body["messages"]] == [user("hello from good")]
    listed = staff.get(LIST_URL).json()
    assert {item["sessionId"] for item in listed} == {"good", "bad"}


def test_the_store_still_refuses_to_load_the_transcript(damage: Damage) -> None:
    raised = {"DecryptionError": DecryptionError, "MissingKeyError": MissingKeyError}
    with pytest.raises(raised[damage.error_type]):
        load_messages(MemoryContext("bad", user_id="u-bad"))
    assert load_messages(MemoryContext("good", user_id="u-good")) == [user("hello from good")]


def test_a_summary_or_failed_run_that_does_not_open_marks_its_section(
    encrypted: None, staff: Client
) -> None:
    context = MemoryContext("s", user_id="u1")
    append_messages(append_input("s", [user("q"), assistant("second message")], user_id="u1"))
    conversation = Conversation.objects.get(session_id="s")
    make_summaries(conversation, 1)
    record_failed_run(MemoryErrorInput(context, "run-2", RuntimeError(SECRET), [user("lost")]))
    flip_a_bit(MemorySummary.objects.get(), "message")
    flip_a_bit(FailedRun.objects.get(), "messages")
    response = staff.get(f"{ADMIN}/conversation/{conversation.pk}/change/")
    assert response.status_code == 200
    page = response.content.decode()
    assert "A summary of this conversation cannot be opened (DecryptionError)" in page
    assert "A failed run of this conversation cannot be opened (DecryptionError)" in page
    assert SECRET not in page
    assert "second message" in page  # the transcript shows
    # The summary list and page mark it; the failed-run list reads no
    # payload, so it lists the run, and its page marks it.
    summary = MemorySummary.objects.defer("message").get()
    for url in (f"{ADMIN}/memorysummary/", f"{ADMIN}/memorysummary/{summary.pk}/change/"):
        response = staff.get(url)
        assert response.status_code == 200, url
        assert (
            f"summary {summary.pk} cannot be opened (DecryptionError)" in response.content.decode()
        )
    listed = staff.get(f"{ADMIN}/failedrun/")
    assert listed.status_code == 200
    assert "run-2" in listed.content.decode()
    failed = FailedRun.objects.defer("error_message", "traceback", "messages").get()
    response = staff.get(f"{ADMIN}/failedrun/{failed.pk}/change/")
    assert response.status_code == 200
    assert f"failed run {failed.pk} cannot be opened (DecryptionError)" in response.content.decode()
    assert SECRET not in response.content.decode()
    # The API names the record's kind and the error's class, in JSON.
    response = staff.get(f"{detail_url(conversation.ref)}summaries/")
    assert response.status_code == 500
    assert response.json() == {
        "detail": "The record of this conversation cannot be opened (DecryptionError).",
        "code": "unreadable_record",
        "record": "record",
        "position": None,
        "errorType": "DecryptionError",
    }
