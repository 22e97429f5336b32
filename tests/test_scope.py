"""Conversation scopes: the key a context makes, the setting's forms and
their errors, and a store's own scope."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings
from hypothesis import given
from hypothesis import strategies as st

from anvia_django.checks import check_settings
from anvia_django.conf import app_settings
from anvia_django.core.memory import InvalidMemoryInputError, MemoryContext
from anvia_django.core.memory.scope import (
    HASHED_PREFIX,
    SCOPE_KEY_MAX_LENGTH,
    ConversationScope,
    parse_scope,
)
from anvia_django.models import Conversation
from anvia_django.store import DjangoMemoryStore

from .helpers import append_input, snapshot, user

TENANTS = ConversationScope(metadata_keys=("tenant_id", "org.id"))
ids = st.text(min_size=1, max_size=300).filter(str.strip)


def tenant_scope_key(context: MemoryContext) -> str:
    """A scope function of the kind the setting may name by dotted path."""
    return f"tenant:{(context.metadata or {}).get('tenant_id', '')}"


@given(
    users=st.tuples(st.none() | ids, st.none() | ids),
    tenants=st.tuples(ids, ids),
    orgs=st.tuples(ids, ids),
)
def test_distinct_scope_values_make_distinct_keys(
    users: tuple[str | None, str | None], tenants: tuple[str, str], orgs: tuple[str, str]
) -> None:
    def key(n: int) -> str:
        metadata = {"tenant_id": tenants[n], "org": {"id": orgs[n]}, "ignored": n}
        return TENANTS.key(MemoryContext("s", users[n], metadata))

    same = (users[0], tenants[0], orgs[0]) == (users[1], tenants[1], orgs[1])
    assert (key(0) == key(1)) == same
    assert len(key(0)) <= SCOPE_KEY_MAX_LENGTH


def test_the_common_forms_stay_readable() -> None:
    assert ConversationScope().key(MemoryContext("s", "alice")) == "alice"
    assert ConversationScope().key(MemoryContext("s")) == ""
    assert ConversationScope(user_id=False).key(MemoryContext("s", "alice")) == ""
    context = MemoryContext("s", metadata={"tenant_id": "acme", "org": {"id": "7"}})
    assert TENANTS.key(context) == '[null,"acme","7"]'
    long = MemoryContext("s", "u" * 255, {"tenant_id": "t" * 255, "org": {"id": "o"}})
    assert TENANTS.key(long).startswith(HASHED_PREFIX)


@pytest.mark.parametrize(
    ("metadata", "named"),
    [
        (None, "'tenant_id'"),
        ({"tenant_id": "acme"}, "'org.id'"),
        ({"tenant_id": "acme", "org": "flat"}, "'org.id'"),
        ({"tenant_id": 42, "org": {"id": "7"}}, "'tenant_id' must be a non-empty string"),
        ({"tenant_id": "", "org": {"id": "7"}}, "'tenant_id' must be a non-empty string"),
    ],
)
def test_a_context_lacking_a_scope_value_is_named(metadata: Any, named: str) -> None:
    with pytest.raises(InvalidMemoryInputError, match=named) as raised:
        TENANTS.key(MemoryContext("s", metadata=metadata))
    assert raised.value.path == "context.metadata"


@pytest.mark.parametrize(
    ("value", "error"),
    [
        ({"user_id": "yes"}, "user_id must be True or False"),
        ({"metadata_keys": "tenant_id"}, "metadata_keys must be a list"),
        ({"metadata_keys": ["org..id"]}, "not a dotted path"),
        ({"tenant": True}, "unknown keys"),
        ("no_such_module.function", "cannot import"),
        ("nodots", "not a dotted path"),
        (42, "must be a dict"),
    ],
)
def test_a_bad_scope_setting_is_refused_by_name(value: Any, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        parse_scope(value)
    with override_settings(ANVIA_DJANGO={"SCOPE": value}):
        [message] = [m for m in check_settings() if m.id == "anvia_django.E007"]
        assert error in message.msg
        with pytest.raises(ImproperlyConfigured, match="SCOPE"):
            _ = app_settings.scope
    with pytest.raises(ValueError, match=f"scope: .*{error}"):
        DjangoMemoryStore(scope=value)


def test_a_scope_function_by_dotted_path() -> None:
    scope = parse_scope("tests.test_scope.tenant_scope_key")
    assert scope.owner_checked
    assert scope.key(MemoryContext("s", "u", {"tenant_id": "acme"})) == "tenant:acme"
    with pytest.raises(InvalidMemoryInputError, match="returned int"):
        parse_scope(lambda context: 3).key(MemoryContext("s"))


@pytest.mark.django_db
def test_a_refused_context_writes_nothing() -> None:
    store = DjangoMemoryStore(scope={"metadata_keys": ["tenant_id"]})
    before = snapshot()
    with pytest.raises(InvalidMemoryInputError, match="tenant_id"):
        async_to_sync(store.append)(append_input("s", [user("hi")], metadata={"other": 1}))
    assert snapshot() == before


@pytest.mark.django_db
def test_the_setting_scopes_every_store_without_one(default_scope: None) -> None:
    with override_settings(ANVIA_DJANGO={"SCOPE": {"user_id": False}}):
        async_to_sync(DjangoMemoryStore().append)(append_input("s", [user("hi")], user_id="a"))
    async_to_sync(DjangoMemoryStore().append)(append_input("s", [user("hi")], user_id="a"))
    # The same user's session: "" under the setting, "a" under the default.
    assert sorted(Conversation.objects.values_list("scope_key", flat=True)) == ["", "a"]
    assert "scope=\"session id + user id + metadata 'tenant_id'\"" in repr(
        DjangoMemoryStore(scope={"metadata_keys": ["tenant_id"]})
    )
