"""``anvia_memory`` under a tenant scope: ``export``, ``clear``, ``erase``
and ``prune`` take the scope's metadata keys (``--tenant-id``) and refuse
to act on several tenants without one (issue 35)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.test import override_settings
from django.utils import timezone

from anvia_django.core.memory import MemoryContext
from anvia_django.encryption.keys import forget_keys
from anvia_django.management.tenants import option_names
from anvia_django.models import Conversation, DataKey
from anvia_django.persistence import append_messages, load_messages
from tests.encryption.support import encryption
from tests.helpers import append_input, snapshot, user

pytestmark = pytest.mark.django_db

SCOPE = {"user_id": True, "metadata_keys": ["tenant_id"]}
TENANTS = {"SCOPE": SCOPE}


@pytest.fixture(autouse=True)
def _tenant_scope() -> Iterator[None]:
    with override_settings(ANVIA_DJANGO=TENANTS):
        yield


def seed(session_id: str, tenant: str, user_id: str = "u1") -> None:
    metadata = {"tenant_id": tenant}
    append_messages(
        append_input(
            session_id, [user(f"{session_id} says hi")], user_id=user_id, metadata=metadata
        )
    )


def context(session_id: str, tenant: str, user_id: str = "u1") -> MemoryContext:
    return MemoryContext(session_id, user_id=user_id, metadata={"tenant_id": tenant})


def memory(*args: str) -> str:
    out, err = StringIO(), StringIO()
    call_command("anvia_memory", *args, stdout=out, stderr=err)
    return out.getvalue()


def exported_sessions(*args: str) -> list[str]:
    lines = [json.loads(line) for line in memory("export", *args, "-v", "0").splitlines()]
    return sorted(record["sessionId"] for record in lines if record["type"] == "conversation")


def sessions_left() -> list[str]:
    return sorted(Conversation.objects.values_list("session_id", flat=True))


@pytest.fixture
def two_tenants() -> None:
    """u1 in acme and globex (one session id in both), u2 in acme only."""
    seed("chat", "acme")
    seed("chat", "globex")
    seed("g2", "globex")
    seed("a2", "acme", user_id="u2")


REFUSED = (
    r"User 'u1''s conversations are in 2 tenants \(tenant_id 'acme', tenant_id 'globex'\): "
    r"name one with --tenant-id, or pass --all-tenants"
)


def test_options_are_the_keys_paths_clear_of_the_commands_own() -> None:
    assert option_names(["tenant_id", "org.id", "user", "org_id", "all.tenants"]) == {
        "tenant_id": "--tenant-id",
        "org.id": "--org-id",
        "user": "--scope-user",
        "org_id": "--scope-org-id",
        "all.tenants": "--scope-all-tenants",
    }


def test_export_of_a_user_in_two_tenants_needs_the_tenant(two_tenants: None) -> None:
    with pytest.raises(CommandError, match=REFUSED + r" to export those of every tenant\. "):
        memory("export", "--user", "u1")
    assert exported_sessions("--user", "u1", "--tenant-id", "acme") == ["chat"]
    exported = memory("export", "--user", "u1", "--tenant-id", "globex", "-v", "0").splitlines()
    records = [json.loads(line) for line in exported]
    assert {r["metadata"]["tenant_id"] for r in records if r["type"] == "conversation"} == {
        "globex"
    }
    assert exported_sessions("--user", "u1", "--all-tenants") == ["chat", "chat", "g2"]
    # The whole table spans tenants too; one tenant is every user's of it.
    with pytest.raises(CommandError, match=r"^The conversations are in 2 tenants"):
        memory("export")
    assert exported_sessions("--tenant-id", "acme") == ["a2", "chat"]
    # A user of one tenant needs no option.
    assert exported_sessions("--user", "u2") == ["a2"]
    # --session: the tenant picks among the scopes sharing a session id.
    assert exported_sessions("--session", "chat", "--tenant-id", "globex") == ["chat"]
    with pytest.raises(CommandError, match="No conversation of tenant_id 'acme' has the session"):
        memory("export", "--session", "g2", "--tenant-id", "acme")


def test_clear_of_a_user_in_two_tenants_needs_the_tenant(two_tenants: None) -> None:
    before = snapshot()
    for extra in ((), ("--dry-run",)):
        with pytest.raises(CommandError, match=REFUSED + r" to delete .* Nothing was deleted\."):
            memory("clear", "--user", "u1", "--yes", *extra)
    assert snapshot() == before
    out = memory("clear", "--user", "u1", "--tenant-id", "acme", "--yes")
    assert out.startswith("Deleted 1 conversation (1 message).")
    assert sessions_left() == ["a2", "chat", "g2"]
    assert load_messages(context("chat", "globex")) == [user("chat says hi")]
    assert load_messages(context("chat", "acme")) == []
    # A session id and a tenant name one conversation.
    memory("clear", "--session", "chat", "--tenant-id", "globex", "--yes")
    assert sessions_left() == ["a2", "g2"]


def test_erase_of_a_user_in_two_tenants_needs_the_tenant(two_tenants: None) -> None:
    with override_settings(ANVIA_DJANGO={**TENANTS, **encryption()}):
        seed("sealed", "globex")
        before = snapshot()
        with pytest.raises(CommandError, match=REFUSED + r" to erase .* Nothing was erased\."):
            memory("erase", "--user", "u1", "--yes")
        assert snapshot() == before
        # A key per tenant: acme's (its rows are plain: none) goes, globex's stays.
        keys = set(DataKey.objects.values_list("owner", flat=True))
        assert len(keys) == 1
        out = memory("erase", "--user", "u1", "--tenant-id", "acme", "--yes")
        assert out.startswith("Erased user 'u1' of tenant_id 'acme': 1 conversation(s)")
        assert "0 data key(s) destroyed." in out
        assert "was kept" not in out
        assert set(DataKey.objects.values_list("owner", flat=True)) == keys
        forget_keys()
        assert load_messages(context("sealed", "globex")) == [user("sealed says hi")]
        assert sessions_left() == ["a2", "chat", "g2", "sealed"]
        # The last tenant of the user: their remaining key goes with it.
        out = memory("erase", "--user", "u1", "--tenant-id", "globex", "--yes")
        assert "1 data key(s) destroyed." in out
        assert not DataKey.objects.filter(owner__contains="u1").exists()
        assert sessions_left() == ["a2"]


def test_erase_of_one_tenant_keeps_a_key_shared_from_before_and_says_so(
    two_tenants: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    with override_settings(ANVIA_DJANGO={**TENANTS, **encryption()}):
        with monkeypatch.context() as before:  # sealed as before keys were per tenant
            before.setattr(
                "anvia_django.persistence.codec.sealed.owner_of",
                lambda user_id, ref, scope_key="": f"user:{user_id}" if user_id else ref,
            )
            seed("sealed", "globex")
        out = memory("erase", "--user", "u1", "--tenant-id", "acme", "--yes")
        assert "Their data key from before keys were per tenant was kept" in out
        assert "user:u1" in DataKey.objects.values_list("owner", flat=True)
        forget_keys()
        assert load_messages(context("sealed", "globex")) == [user("sealed says hi")]


def test_prune_across_tenants_says_so(two_tenants: None) -> None:
    Conversation.objects.update(updated_at=timezone.now() - timedelta(days=40))
    with pytest.raises(
        CommandError,
        match=r"^The conversations last updated before .* are in 2 tenants .* Nothing was deleted",
    ):
        memory("prune", "--older-than", "30d", "--yes")
    out = memory("prune", "--older-than", "30d", "--tenant-id", "globex", "--yes")
    assert "Deleted 2 conversations (2 messages) of tenant_id 'globex' last updated" in out
    assert sessions_left() == ["a2", "chat"]
    memory("prune", "--older-than", "30d", "--all-tenants", "--yes")
    assert sessions_left() == []


def test_a_conversation_without_the_key_is_a_tenant_of_its_own(two_tenants: None) -> None:
    # Stored before the scope named the key: no tenant in its metadata.
    Conversation.objects.filter(session_id="a2").update(metadata={"other": "x"})
    seed("a3", "acme", user_id="u2")
    with pytest.raises(
        CommandError, match=r"in 2 tenants \(tenant_id \(none\), tenant_id 'acme'\)"
    ):
        memory("export", "--user", "u2")
    assert exported_sessions("--user", "u2", "--tenant-id", "acme") == ["a3"]


def test_without_metadata_keys_there_are_no_tenant_options() -> None:
    seed("one", "acme")
    with override_settings(ANVIA_DJANGO={"SCOPE": {"user_id": True}}):
        with pytest.raises(CommandError, match="unrecognized arguments: --tenant-id"):
            memory("export", "--tenant-id", "acme")
        with pytest.raises(CommandError, match="unrecognized arguments: --all-tenants"):
            memory("export", "--all-tenants")
        # Nothing to refuse without tenants: the whole table is exported.
        assert exported_sessions() == ["one"]


def test_a_bad_tenant_value_is_refused_by_the_parser() -> None:
    with pytest.raises(CommandError, match="--tenant-id: must not contain NUL"):
        memory("export", "--tenant-id", "a\x00b")
