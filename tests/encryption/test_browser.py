"""Encryption at rest in a real browser: a staff member reads the plain
transcript in the admin and in the API (browsable and JSON), while the
message table holds envelopes only; a message that does not open is marked
in the admin's list and page, and the rest reads. One browser session, six
pages."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import override_settings

from anvia_django.encryption.envelope import ENVELOPE_PREFIX
from anvia_django.models import Conversation, MemoryMessage
from anvia_django.persistence import append_messages
from tests.browser_support import BROWSER_MARKS, run_in_browser
from tests.encryption.support import encryption, flip_a_bit
from tests.helpers import append_input, assistant, user

pytestmark = BROWSER_MARKS

ASKED = "My blood pressure was 150/95 this morning."
ANSWERED = "That is high; please call your doctor today."
PRIVATE = "Ward 9, bed 4: allergic to penicillin."
READABLE = "Noted."


def read_everywhere(conversation_pk: int, ref: str, damaged_pk: int) -> Any:
    def walk(browser: Any, base_url: str) -> dict[str, Any]:
        page = browser.new_page()
        page.goto(f"{base_url}/admin/login/?next=/admin/")
        page.fill("#id_username", "nurse")
        page.fill("#id_password", "correct horse")
        page.click("input[type=submit]")
        page.wait_for_url(f"{base_url}/admin/")
        seen: dict[str, Any] = {}
        page.goto(f"{base_url}/admin/anvia_django/conversation/{conversation_pk}/change/")
        seen["admin"] = page.locator(".anvia-message .anvia-text").all_inner_texts()
        page.goto(f"{base_url}/anvia/api/conversations/{ref}/")
        seen["browsable"] = page.locator(".response-info").inner_text()
        page.goto(f"{base_url}/anvia/api/conversations/{ref}/?format=json")
        seen["json"] = page.locator("body").inner_text()
        page.goto(f"{base_url}/admin/anvia_django/conversation/")
        seen["list_marks"] = page.locator("#result_list .anvia-unreadable").all_inner_texts()
        seen["list_previews"] = page.locator("#result_list td.field-preview").all_inner_texts()
        page.goto(f"{base_url}/admin/anvia_django/conversation/{damaged_pk}/change/")
        seen["damaged_marks"] = page.locator(".anvia-message .anvia-unreadable").all_inner_texts()
        seen["damaged_texts"] = page.locator(".anvia-message .anvia-text").all_inner_texts()
        return seen

    return walk


def stored_message_texts() -> list[str]:
    """The message column (a text column) as the database holds it."""
    table = connection.ops.quote_name(MemoryMessage._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT message FROM {table}")
        return [value for (value,) in cursor]


@pytest.mark.django_db(transaction=True)
def test_staff_read_an_encrypted_transcript_in_the_admin_and_the_api(live_server: Any) -> None:
    User.objects.create_superuser("nurse", password="correct horse")
    with override_settings(ANVIA_DJANGO=encryption()):
        append_messages(append_input("clinic", [user(ASKED)], user_id="patient-7"))
        append_messages(append_input("clinic", [assistant(ANSWERED)], turn=2, user_id="patient-7"))
        append_messages(append_input("ward", [user(PRIVATE), assistant(READABLE)], user_id="p-9"))
        damaged = MemoryMessage.objects.get(conversation__session_id="ward", position=0)
        flip_a_bit(damaged)
        conversation = Conversation.objects.get(session_id="clinic")
        walk = read_everywhere(conversation.pk, conversation.ref, damaged.conversation_id)
        seen = run_in_browser(walk, live_server.url)

    assert seen["admin"] == [ASKED, ANSWERED]
    assert ASKED in seen["browsable"]
    assert ANSWERED in seen["browsable"]
    assert "anvia_enc" not in seen["browsable"]
    body = json.loads(seen["json"])
    assert [m["message"] for m in body["messages"]] == [user(ASKED), assistant(ANSWERED)]
    # The damaged message is marked by its id in the list and on its page;
    # the other conversation's preview and the next message still show.
    mark = f"⚠ message {damaged.pk} cannot be opened (DecryptionError)"
    assert seen["list_marks"] == [mark]
    assert ASKED in seen["list_previews"]
    (marked,) = seen["damaged_marks"]
    assert marked.startswith(f"⚠ Message {damaged.pk} cannot be opened (DecryptionError)")
    assert seen["damaged_texts"] == [READABLE]
    assert PRIVATE not in str(seen)
    # At rest: envelopes only, no word of either message.
    stored = stored_message_texts()
    assert len(stored) == 4
    assert all(text.startswith(ENVELOPE_PREFIX) for text in stored)
    assert not any(word in text for text in stored for word in ("blood", "doctor", "150/95"))
