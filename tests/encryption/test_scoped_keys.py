"""Data keys per scope owner (issue 35): under a scope with metadata keys
(tenants) a user has one data key per tenant, keys made before keep opening
what they sealed, and erasure reaches every one of the user's keys."""

from __future__ import annotations

from collections.abc import Iterator
from io import StringIO

import pytest
from django.core.management import call_command
from django.test import override_settings

from anvia_django.core.memory import MemoryContext
from anvia_django.core.memory.branches import MemoryForkInput
from anvia_django.core.memory.types import MemoryErrorInput
from anvia_django.encryption import keys as keys_module
from anvia_django.encryption.keys import (
    data_key_for,
    forget_keys,
    is_owner_of_user,
    owner_of,
    owners_of_user,
)
from anvia_django.models import Conversation, DataKey, MemoryMessage
from anvia_django.persistence import (
    append_messages,
    fork_conversation,
    load_messages,
    record_failed_run,
)
from anvia_django.persistence.codec import codec_for
from tests.encryption.support import encryption
from tests.helpers import append_input, user

pytestmark = pytest.mark.django_db

TENANTS = {"user_id": True, "metadata_keys": ["tenant_id"]}


@pytest.fixture
def tenant_scoped() -> Iterator[None]:
    with override_settings(ANVIA_DJANGO={**encryption(), "SCOPE": TENANTS}):
        yield


def context(session_id: str, tenant: str, user_id: str = "u1") -> MemoryContext:
    return MemoryContext(session_id, user_id=user_id, metadata={"tenant_id": tenant})


def write(session_id: str, tenant: str, text: str, user_id: str = "u1") -> None:
    append_messages(
        append_input(session_id, [user(text)], user_id=user_id, metadata={"tenant_id": tenant})
    )


def key_ids(*, tenant: str | None = None, session_id: str | None = None) -> set[int]:
    """The data key ids the messages of a tenant's (or a session's)
    conversations are sealed under."""
    conversations = [
        pk
        for pk, metadata, session in Conversation.objects.values_list(
            "pk", "metadata", "session_id"
        )
        if (tenant is None or (metadata or {}).get("tenant_id") == tenant)
        and (session_id is None or session == session_id)
    ]
    return {
        message["dk"]
        for message in MemoryMessage.objects.filter(conversation_id__in=conversations).values_list(
            "message", flat=True
        )
    }


def test_a_user_in_two_tenants_has_a_key_in_each(tenant_scoped: None) -> None:
    write("chat", "acme", "acme's secret")
    write("chat", "globex", "globex's secret")  # the same session id and user
    write("other", "acme", "more for acme")
    acme = key_ids(tenant="acme")
    globex = key_ids(tenant="globex")
    assert len(acme) == len(globex) == 1
    assert acme != globex
    owners = sorted(DataKey.objects.values_list("owner", flat=True))
    assert len(owners) == 2
    assert owners == owners_of_user("default", "u1")
    # The key table names the user, never the tenant.
    assert all(owner.startswith("scoped-user:u1:") for owner in owners)
    assert not any("acme" in owner or "globex" in owner for owner in owners)
    # A failed run and a fork stay under their tenant's key.
    record_failed_run(
        MemoryErrorInput(context("chat", "globex"), "run-2", RuntimeError("boom"), [])
    )
    fork_conversation(MemoryForkInput(context("chat", "acme"), "chat-fork", position=1))
    assert key_ids(session_id="chat-fork") == acme
    assert len(DataKey.objects.all()) == 2
    assert load_messages(context("chat-fork", "acme")) == [user("acme's secret")]
    assert load_messages(context("chat", "globex")) == [user("globex's secret")]


def test_the_default_scopes_keep_one_key_per_user() -> None:
    with override_settings(ANVIA_DJANGO=encryption()):
        append_messages(append_input("a", [user("q")], user_id="u1"))
    with override_settings(ANVIA_DJANGO={**encryption(), "SCOPE": {"user_id": False}}):
        append_messages(append_input("b", [user("q")], user_id="u1"))
    assert list(DataKey.objects.values_list("owner", flat=True)) == ["user:u1"]


# On MariaDB the command's wait for the writes in flight commits: outside a transaction.
@pytest.mark.transactional_on("mysql")
def test_keys_made_before_keep_opening_and_reencrypt_moves_rows_to_the_tenant_key(
    tenant_scoped: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As a version before per-tenant keys wrote them: under "user:u1".
    with monkeypatch.context() as before:
        before.setattr(
            "anvia_django.persistence.codec.sealed.owner_of",
            lambda user_id, ref, scope_key="": owner_of(user_id, ref),
        )
        write("chat", "acme", "written before")
        write("chat", "globex", "globex before")
    (old_key,) = DataKey.objects.values_list("pk", flat=True)
    write("chat", "acme", "written after")
    assert key_ids(tenant="acme") - {old_key}
    forget_keys()  # a new process
    assert load_messages(context("chat", "acme")) == [user("written before"), user("written after")]

    call_command("anvia_memory", "rotate-keys", "--reencrypt", stdout=StringIO(), stderr=StringIO())
    acme, globex = key_ids(tenant="acme"), key_ids(tenant="globex")
    assert old_key not in acme | globex
    assert len(acme) == len(globex) == 1
    assert acme != globex
    assert load_messages(context("chat", "globex")) == [user("globex before")]


def test_erase_destroys_every_key_of_the_user_and_no_one_elses(tenant_scoped: None) -> None:
    write("chat", "acme", "acme words")
    write("chat", "globex", "globex words")
    write("chat", "acme", "a neighbour", user_id="u1:x")  # a user id that extends u1's
    long_id = "u" * 255
    write("long", "acme", "a long id", user_id=long_id)
    with override_settings(ANVIA_DJANGO=encryption()):
        append_messages(append_input("plain-scope", [user("old")], user_id="u1"))
    owners = set(DataKey.objects.values_list("owner", flat=True))
    assert len(owners) == 5
    assert any(owner.startswith("scoped-userh:") for owner in owners)
    assert owners_of_user("default", long_id) == [
        owner for owner in owners if owner.startswith("scoped-userh:")
    ]
    assert not is_owner_of_user(owner_of("u1:x", "r", "k"), "u1")

    # What `erase --user u1` asks first (the command decides which conversations go).
    assert codec_for("default").erase_user("u1") == 3
    left = set(DataKey.objects.values_list("owner", flat=True))
    assert left == {owner_of("u1:x", "", '["u1:x","acme"]'), *owners_of_user("default", long_id)}
    assert load_messages(context("chat", "acme", user_id="u1:x")) == [user("a neighbour")]


def test_the_owner_of_a_long_user_id_fits_the_column() -> None:
    owner = owner_of("u" * 255, "ref", "x" * 255)
    assert len(owner) <= keys_module.OWNER_MAX_LENGTH
    assert is_owner_of_user(owner, "u" * 255)
    assert not is_owner_of_user(owner, "u" * 254)
    with override_settings(ANVIA_DJANGO=encryption()):
        key_id, _ = data_key_for("default", owner)
    assert DataKey.objects.get(pk=key_id).owner == owner


def test_erasing_one_tenant_destroys_that_tenants_key_only(tenant_scoped: None) -> None:
    write("chat", "acme", "acme words")
    write("chat", "globex", "globex words")
    acme_scope = '["u1","acme"]'
    assert codec_for("default").erase_user("u1", scope_keys=[acme_scope]) == 1
    assert list(DataKey.objects.values_list("owner", flat=True)) == [
        owner_of("u1", "", '["u1","globex"]')
    ]
    assert not codec_for("default").shares_a_key_across_scopes("u1")
    forget_keys()
    assert load_messages(context("chat", "globex")) == [user("globex words")]
