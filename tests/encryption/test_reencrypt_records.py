"""``rotate-keys --reencrypt`` beside what else is sealed: failed runs,
summaries and the blind index's tokens."""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.test import override_settings

from anvia_django.core.memory import (
    MemoryCompactionInput,
    MemoryContext,
    MemoryErrorInput,
    Message,
)
from anvia_django.encryption.blind_index import INDEX_OWNER
from anvia_django.encryption.envelope import envelope_head
from anvia_django.models import Conversation, DataKey, FailedRun, MemorySummary
from anvia_django.persistence import list_failed_runs, list_summaries, search_messages
from anvia_django.store import DjangoMemoryStore
from tests.encryption.support import KEY_1, KEY_2, encryption
from tests.helpers import append_input, assistant, run, user

pytestmark = pytest.mark.django_db(transaction=True)


def indexed(current: str, **keys: str) -> dict[str, Any]:
    setting = encryption(current, **keys)
    setting["ENCRYPTION"]["BLIND_INDEX"] = True
    return setting


class Summariser:
    async def __call__(self, previous: str | None, messages: list[Message]) -> str:
        return f"summary of {len(messages)} messages"


def _failure(store: DjangoMemoryStore, run_id: str, text: str) -> None:
    try:
        raise RuntimeError(text)
    except RuntimeError as error:
        failure = MemoryErrorInput(MemoryContext("s", "u1"), run_id, error, [user(text)])
        run(store.record_error, failure)


def test_failed_runs_summaries_and_tokens_survive_a_reencryption() -> None:
    store = DjangoMemoryStore()
    _failure(store, "plain-run", "written before encryption")
    with override_settings(ANVIA_DJANGO=indexed("k1", k1=KEY_1)):
        for index in range(4):
            messages = [user(f"question{index} parcel"), assistant(f"answer{index}")]
            run(store.append, append_input("s", messages, run_id=f"r{index}", user_id="u1"))
        _failure(store, "sealed-run", "sealed under k1")
        request = MemoryCompactionInput(MemoryContext("s", "u1"), Summariser(), keep_messages=2)
        assert run(store.compact, request) is not None
    with override_settings(ANVIA_DJANGO=indexed("k2", k1=KEY_1, k2=KEY_2)):
        call_command("anvia_memory", "rotate-keys", "--reencrypt", verbosity=0, stdout=StringIO())
    with override_settings(ANVIA_DJANGO=indexed("k2", k2=KEY_2)):  # k1 gone, as after a leak
        conversation = Conversation.objects.get(session_id="s")
        user_key = DataKey.objects.get(owner="user:u1")
        head = envelope_head(user_key.pk)
        for raw in FailedRun.objects.values_list("messages", flat=True):
            assert str(raw["dk"]) == str(user_key.pk)
        assert all(
            summary["dk"] == user_key.pk
            for summary in MemorySummary.objects.values_list("message", flat=True)
        )
        assert head.startswith('{"anvia_enc":1')
        records = {r.run_id: r for r in list_failed_runs(conversation.pk, limit=5)}
        assert records["plain-run"].error_message == "written before encryption"
        assert records["sealed-run"].messages == [user("sealed under k1")]
        assert FailedRun.objects.filter(error_message="").count() == 2  # all sealed now
        (summary,) = list_summaries(conversation.pk, limit=5)
        assert summary.message["content"].endswith("summary of 6 messages")
        assert {hit.position for hit in search_messages("parcel", limit=10).items} == {0, 2, 4, 6}
        # The tokens follow the owner's key: resealed under the new one, with
        # tokens under it; no index key of its own is made.
        assert not DataKey.objects.filter(owner=INDEX_OWNER).exists()
