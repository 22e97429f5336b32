"""benchmarks/sealed_search.py builds sealed rows in bulk, outside the
store: what it writes must be what the store finds and opens, in both of
its layouts (a few conversations; the sizes it measures are its own)."""

from __future__ import annotations

import pytest
from django.test import override_settings

from anvia_django.models import Conversation, DataKey
from anvia_django.persistence import search_messages
from benchmarks.sealed_search import fill
from benchmarks.search import PER_CONVERSATION
from tests.encryption.support import blind_index

pytestmark = [pytest.mark.django_db, pytest.mark.transactional_on("mysql")]


@pytest.mark.parametrize("shared", [False, True])
def test_the_bulk_fill_is_found_and_opened_by_the_store(shared: bool) -> None:
    with override_settings(ANVIA_DJANGO=blind_index()):
        fill("default", 3 * PER_CONVERSATION, shared=shared)
        first = Conversation.objects.order_by("pk").first()
        assert first is not None
        number = first.pk * PER_CONVERSATION + 2
        (hit,) = search_messages(str(number), limit=5, user_id=first.user_id).items
        assert hit.position == 2
        assert f"order {number} has shipped" in hit.snippet
        assert len(search_messages("shipped", limit=500).items) == 3 * PER_CONVERSATION * 3 // 4
    owners = set(DataKey.objects.values_list("owner", flat=True))
    assert owners == ({"blind-index"} if shared else {"user:user-1", "user:user-2", "user:user-3"})
