"""The blind index keyed per owner (issue 35): once an owner's keys are
destroyed, a backup of the messages restored from before the erasure
confirms none of their words through search; search still serves one
user's, one tenant's and (up to a bound) every owner's messages.

Keys on their own database, as docs/production.md advises. Transactional
on MariaDB only: InnoDB's full-text index sees committed rows only.
"""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.test import override_settings
from rest_framework.test import APIClient

from anvia_django.core.memory.errors import InvalidMemoryInputError
from anvia_django.encryption import blind_index
from anvia_django.encryption.keys import forget_keys
from anvia_django.models import Conversation, DataKey, MemoryMessage
from anvia_django.persistence import (
    append_messages,
    first_matching_positions,
    search_conversation_page,
    search_message_page,
    search_messages,
)
from tests.api_client import LIST_URL
from tests.encryption.test_key_database import (
    KEYS,
    dump_main_database,
    keys_apart,
    restore_main_database,
)
from tests.helpers import append_input, assistant, user
from tests.test_admin import viewer

pytestmark = [
    pytest.mark.django_db(databases=["default", "keys"]),
    pytest.mark.transactional_on("mysql"),
]

TENANTS = {"user_id": True, "metadata_keys": ["tenant_id"]}


def _indexed(scope: dict[str, object] | None = None) -> override_settings:
    """Encryption with the blind index, keys on their own database."""
    override = keys_apart()
    config = override.options["ANVIA_DJANGO"]
    config["ENCRYPTION"]["BLIND_INDEX"] = True
    if scope is not None:
        config["SCOPE"] = scope
    return override


def sessions(query: str, user_id: str | None = None) -> set[str]:
    return {hit.session_id for hit in search_messages(query, limit=50, user_id=user_id).items}


def test_after_erase_a_restored_backup_confirms_none_of_the_users_words() -> None:
    with _indexed():
        append_messages(append_input("alice-1", [user("my zanzibar parcel")], user_id="alice"))
        append_messages(append_input("alice-2", [assistant("zanzibar again")], user_id="alice"))
        append_messages(append_input("bob-1", [user("a parcel for bob")], user_id="bob"))
        assert sessions("zanzibar") == {"alice-1", "alice-2"}
        assert sessions("zanzibar", user_id="alice") == {"alice-1", "alice-2"}
        assert sessions("parcel") == {"alice-1", "bob-1"}
        dump = dump_main_database()

        call_command("anvia_memory", "erase", "--user", "alice", "--yes", stdout=StringIO())
        restore_main_database(dump)
        forget_keys()  # a process that never held alice's keys
        assert Conversation.objects.filter(user_id="alice").count() == 2  # restored
        assert sessions("zanzibar") == set()
        assert sessions("zanzibar", user_id="alice") == set()
        assert sessions("parcel") == {"bob-1"}  # bob's words still found
        assert search_conversation_page("zanzibar", 10).items == []
        alice_ids = list(Conversation.objects.filter(user_id="alice").values_list("pk", flat=True))
        assert first_matching_positions(alice_ids, "zanzibar") == {}
        assert search_message_page(alice_ids[0], "zanzibar", limit=5).items == []


def test_search_serves_one_tenant_and_one_user_across_tenants() -> None:
    def write(session_id: str, tenant: str, text: str, user_id: str = "u1") -> None:
        append_messages(
            append_input(session_id, [user(text)], user_id=user_id, metadata={"tenant_id": tenant})
        )

    with _indexed(TENANTS):
        write("acme-u1", "acme", "quarterly report")
        write("acme-u2", "acme", "quarterly report", user_id="u2")
        write("globex-u1", "globex", "quarterly report")
        assert sessions("quarterly") == {"acme-u1", "acme-u2", "globex-u1"}
        assert sessions("quarterly", user_id="u1") == {"acme-u1", "globex-u1"}
        acme = search_conversation_page("quarterly", 10, metadata={"tenant_id": "acme"})
        assert {item.session_id for item in acme.items} == {"acme-u1", "acme-u2"}
        # The same words, stored as other tokens by each owner (u1 in two tenants too).
        tokens = {
            message["content"]
            for message in MemoryMessage.objects.values_list("message", flat=True)
        }
        assert len(tokens) == 3


def test_a_search_over_more_keys_than_the_bound_is_refused_and_a_narrower_one_served(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(blind_index, "MAX_SEARCH_KEYS", 2)
    with _indexed(TENANTS):
        for session_id, tenant, user_id in (("a1", "acme", "u1"), ("a2", "acme", "u2")):
            append_messages(
                append_input(
                    session_id,
                    [user("shared word")],
                    user_id=user_id,
                    metadata={"tenant_id": tenant},
                )
            )
        append_messages(
            append_input(
                "g1", [user("shared word")], user_id="u1", metadata={"tenant_id": "globex"}
            )
        )
        assert DataKey.objects.using(KEYS).count() == 3
        with pytest.raises(InvalidMemoryInputError, match="narrow it to a user or a tenant"):
            search_messages("shared", limit=5)  # staff-wide: three owners' keys
        assert sessions("shared", user_id="u1") == {"a1", "g1"}  # two keys
        acme = search_conversation_page("shared", 10, metadata={"tenant_id": "acme"})
        assert {item.session_id for item in acme.items} == {"a1", "a2"}  # two keys
        append_messages(
            append_input("a3", [user("shared word")], user_id="u3", metadata={"tenant_id": "acme"})
        )
        with pytest.raises(InvalidMemoryInputError, match="narrow it"):  # three owners now
            search_conversation_page("shared", 10, metadata={"tenant_id": "acme"})


def test_the_api_and_the_admin_answer_a_search_past_the_bound_without_a_500(
    monkeypatch: pytest.MonkeyPatch, staff: APIClient
) -> None:
    monkeypatch.setattr(blind_index, "MAX_SEARCH_KEYS", 1)
    with _indexed():
        for name in ("u1", "u2"):
            append_messages(append_input(name, [user("shared word")], user_id=name))
        response = staff.get(LIST_URL, {"q": "shared"})
        assert response.status_code == 400
        assert "narrow it to a user or a tenant" in response.json()["q"][0]
        assert len(staff.get(LIST_URL, {"q": "shared", "userId": "u1"}).json()) == 1
        page = viewer().get("/admin/anvia_django/conversation/", {"q": "shared"})
        assert page.status_code == 200
        assert "narrow it to a user or a tenant" in page.content.decode()
