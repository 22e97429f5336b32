"""A fork stays in its source's tenant unless the caller says otherwise (issue 35)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.test import override_settings

from anvia_django.core.memory import (
    ConversationScopeError,
    MemoryAppendInput,
    MemoryContext,
    MemoryForkInput,
)
from anvia_django.models import Conversation
from anvia_django.store import DjangoMemoryStore
from example_project.demo.agent import build_agent
from tests.helpers import run, snapshot, user

pytestmark = pytest.mark.django_db

SCOPE = {"user_id": True, "metadata_keys": ["tenant_id"]}


@pytest.fixture(autouse=True)
def _tenant_scope() -> Iterator[None]:
    with override_settings(ANVIA_DJANGO={"SCOPE": SCOPE}):
        yield


def acme(session_id: str, user_id: str | None = "u1") -> MemoryContext:
    return MemoryContext(session_id, user_id=user_id, metadata={"tenant_id": "acme"})


def globex(session_id: str, user_id: str | None = "u1") -> MemoryContext:
    return MemoryContext(session_id, user_id=user_id, metadata={"tenant_id": "globex"})


@pytest.fixture
def store() -> DjangoMemoryStore:
    store = DjangoMemoryStore()
    for index in range(3):
        run(store.append, MemoryAppendInput(acme("main"), f"run-{index}", 1, [user(str(index))]))
    return store


def test_a_fork_without_metadata_stays_in_its_sources_tenant(store: DjangoMemoryStore) -> None:
    run(store.fork, MemoryForkInput(acme("main"), "branch", 2))
    assert run(store.load, acme("branch")) == [user("0"), user("1")]
    assert run(store.load, globex("branch")) == []
    # Other metadata, the same tenant: still the source's scope.
    metadata: dict[str, object] = {"tenant_id": "acme", "title": "an edit"}
    run(store.fork, MemoryForkInput(acme("main"), "edit", 1, metadata=metadata))
    assert Conversation.objects.get(session_id="edit").metadata == metadata


def test_a_fork_into_another_tenant_is_refused(store: DjangoMemoryStore) -> None:
    before = snapshot()
    into_globex = MemoryForkInput(acme("main"), "branch", 2, metadata={"tenant_id": "globex"})
    with pytest.raises(ConversationScopeError, match="A fork stays in its source's tenant"):
        run(store.fork, into_globex)
    assert snapshot() == before


def test_server_code_is_refused_too() -> None:
    # A scope without the user: the trusted caller's context names no user.
    store = DjangoMemoryStore(scope={"user_id": False, "metadata_keys": ["tenant_id"]})
    run(store.append, MemoryAppendInput(acme("main", None), "run-1", 1, [user("0")]))
    before = snapshot()
    into_globex = MemoryForkInput(acme("main", None), "b", 1, metadata={"tenant_id": "globex"})
    with pytest.raises(ConversationScopeError, match="Pass cross_scope=True"):
        run(store.fork, into_globex)
    assert snapshot() == before
    run(store.fork, MemoryForkInput(acme("main", None), "b", 1))
    assert run(store.load, acme("b", None)) == [user("0")]


def test_cross_scope_forks_into_the_tenant_named(store: DjangoMemoryStore) -> None:
    into_globex = MemoryForkInput(
        acme("main"), "branch", 2, metadata={"tenant_id": "globex"}, cross_scope=True
    )
    run(store.fork, into_globex)
    assert run(store.load, globex("branch")) == [user("0"), user("1")]
    assert run(store.load, acme("branch")) == []


def test_a_session_fork_can_be_continued_in_its_tenant() -> None:
    agent = build_agent()
    original = agent.session("web", user_id="visitor", metadata={"tenant_id": "acme"})
    first = run(original.prompt("Where is order 1042?").send)
    branch = run(original.fork, "web-branch", up_to=len(first.messages))
    # The branch carries the tenant, so the store finds it again.
    assert branch.context.metadata == {"tenant_id": "acme"}
    run(branch.prompt("Where is order 1043?").send)
    assert len(run(branch.history)) > len(first.messages)
    with pytest.raises(ConversationScopeError):
        run(original.fork, "elsewhere", up_to=1, metadata={"tenant_id": "globex"})
