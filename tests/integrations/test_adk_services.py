"""``DjangoSessionService`` and ``DjangoMemoryService`` in the store: memory
search scoped to an app and a user, keyset pages of sessions, tenants,
encryption at rest, erasure, export and retention.

Transactional on MariaDB only: InnoDB's FULLTEXT index sees committed rows only.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from datetime import timedelta
from io import StringIO
from typing import TYPE_CHECKING, Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.db import connection
from django.test import override_settings
from django.utils import timezone

from anvia_django.core.memory.errors import InvalidMemoryInputError
from anvia_django.encryption.envelope import ENVELOPE_PREFIX
from anvia_django.integrations import adk
from anvia_django.models import (
    AdkAppState,
    AdkEvent,
    AdkSession,
    AdkUserState,
    Conversation,
    MemoryMessage,
)
from anvia_django.persistence.maintenance import erase_user_conversations
from tests.encryption.support import blind_index, encryption
from tests.helpers import run
from tests.integrations.adk_support import event, in_memory, needs_adk, scenario

if TYPE_CHECKING:
    from anvia_django.integrations.adk import DjangoSessionService

pytestmark = [pytest.mark.django_db, pytest.mark.transactional_on("mysql"), needs_adk]

APP = "shop"


async def say(service: DjangoSessionService, user_id: str, session_id: str, *texts: str) -> None:
    session = await service.create_session(app_name=APP, user_id=user_id, session_id=session_id)
    for text in texts:
        await service.append_event(session, event(author="user", text=text))


@pytest.fixture(params=["as-configured", "sealed"])
def searchable(request: pytest.FixtureRequest) -> Iterator[None]:
    """Content search as the run configures it, and over sealed events
    (encryption at rest with the blind index); a run with encryption on
    has both sealed, through the blind index."""
    if request.param == "sealed" or os.environ.get("ANVIA_TEST_ENCRYPTION") == "1":
        with override_settings(ANVIA_DJANGO=blind_index()):
            yield
    else:
        yield


@scenario
async def test_memory_finds_the_users_events_in_the_app_most_words_first(
    searchable: None,
) -> None:
    sessions = adk.DjangoSessionService()
    await say(sessions, "u1", "a", "my cat likes fish", "the weather is grey")
    await say(sessions, "u1", "b", "my dog likes long walks")
    await say(sessions, "u2", "c", "my cat is called Tom")  # another user
    other_app = await sessions.create_session(app_name="other", user_id="u1", session_id="d")
    await sessions.append_event(other_app, event(text="a cat in another app"))
    memory = adk.DjangoMemoryService()

    found = await memory.search_memory(app_name=APP, user_id="u1", query="Cat likes?")
    texts = [m.content.parts[0].text for m in found.memories]  # type: ignore[index]
    assert texts == ["my cat likes fish", "my dog likes long walks"]
    assert found.memories[0].author == "user"
    assert found.memories[0].custom_metadata == {"session_id": "a", "position": 0}
    assert (await memory.search_memory(app_name=APP, user_id="u1", query="Tom")).memories == []
    assert (await memory.search_memory(app_name=APP, user_id="u3", query="cat")).memories == []
    assert (await memory.search_memory(app_name=APP, user_id="u1", query="  ")).memories == []


@scenario
async def test_a_session_of_another_service_added_to_memory_is_stored_once(
    searchable: None,
) -> None:
    elsewhere = in_memory()
    session = await elsewhere.create_session(app_name=APP, user_id="u1", session_id="s")
    await elsewhere.append_event(session, event(text="remember the blue door"))
    memory = adk.DjangoMemoryService()
    await memory.add_session_to_memory(session)
    await memory.add_session_to_memory(session)  # stored already: nothing more
    found = await memory.search_memory(app_name=APP, user_id="u1", query="door")
    assert [m.id for m in found.memories] == [session.events[0].id]
    stored = await adk.DjangoSessionService().get_session(
        app_name=APP, user_id="u1", session_id="s"
    )
    assert stored is not None
    assert stored.events == session.events


def test_sessions_page_newest_first_at_the_same_cost_at_any_depth(
    django_assert_num_queries: Any,
) -> None:
    service = adk.DjangoSessionService()
    for i in range(7):
        session = run(service.create_session, app_name=APP, user_id="u", session_id=f"s{i}")
        run(service.append_event, session, event(timestamp=1000.0 + i % 3))  # ties too
    run(service.create_session, app_name=APP, user_id="other", session_id="x")
    seen: list[str] = []
    after = None
    for _ in range(3):
        with django_assert_num_queries(3):  # the page, the app's and the users' state
            page = run(service.list_sessions_page, app_name=APP, user_id="u", limit=3, after=after)
        seen += [s.id for s in page.items]
        after = page.next_key
    assert after is None
    assert seen == ["s5", "s2", "s4", "s1", "s6", "s3", "s0"]
    everyone = run(service.list_sessions_page, app_name=APP, limit=10)
    assert everyone.items[0].id == "x"
    assert len(everyone.items) == 8


@pytest.fixture
def tenants() -> Iterator[None]:
    with override_settings(ANVIA_DJANGO={"SCOPE": {"metadata_keys": ["tenant_id"]}}):
        yield


@scenario
async def test_tenants_share_no_session_and_no_state(tenants: None) -> None:
    acme = adk.DjangoSessionService(metadata={"tenant_id": "acme"})
    initech = adk.DjangoSessionService(metadata={"tenant_id": "initech"})
    await acme.create_session(app_name=APP, user_id="u", session_id="s", state={"app:k": "acme"})
    theirs = await initech.create_session(app_name=APP, user_id="u", session_id="s")
    assert theirs.state == {}
    assert [s.id for s in (await acme.list_sessions(app_name=APP)).sessions] == ["s"]
    with pytest.raises(InvalidMemoryInputError):
        await adk.DjangoSessionService().create_session(app_name=APP, user_id="u")


def test_a_scope_function_is_refused_with_its_reason() -> None:
    setting = {"SCOPE": "tests.test_scope.tenant_scope_key"}
    with override_settings(ANVIA_DJANGO=setting), pytest.raises(ImproperlyConfigured):
        run(adk.DjangoSessionService().create_session, app_name=APP, user_id="u")


@scenario
async def test_with_encryption_on_events_are_sealed_and_read_back_equal() -> None:
    with override_settings(ANVIA_DJANGO=encryption()):
        service = adk.DjangoSessionService()
        session = await service.create_session(app_name=APP, user_id="u")
        await service.append_event(session, event(text="a secret", delta={"k": 1}))
        got = await service.get_session(app_name=APP, user_id="u", session_id=session.id)
    assert got == session

    def raw() -> str:
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT message FROM {MemoryMessage._meta.db_table}")
            (text,) = cursor.fetchone()
        return str(text)

    from asgiref.sync import sync_to_async

    sealed = await sync_to_async(raw)()
    assert sealed.startswith(ENVELOPE_PREFIX)
    assert "secret" not in sealed


def test_erasing_a_user_takes_their_sessions_events_and_user_state() -> None:
    service = adk.DjangoSessionService()
    for user in ("u1", "u2"):
        session = run(
            service.create_session,
            app_name=APP,
            user_id=user,
            session_id="s",
            state={"user:name": user, "app:shared": 1},
        )
        run(service.append_event, session, event(text=f"hello from {user}"))
    erase_user_conversations("u1")
    assert list(AdkSession.objects.values_list("user_id", flat=True)) == ["u2"]
    assert AdkEvent.objects.count() == 1
    assert list(AdkUserState.objects.values_list("user_id", flat=True)) == ["u2"]
    assert AdkAppState.objects.count() == 1
    assert run(service.get_session, app_name=APP, user_id="u1", session_id="s") is None


@scenario
async def test_after_the_store_pops_an_event_the_session_appends_again() -> None:
    from asgiref.sync import sync_to_async

    from anvia_django.persistence import pop_last_message
    from anvia_django.persistence.adk.keys import AdkKey, session_scope

    service = adk.DjangoSessionService()
    session = await service.create_session(app_name=APP, user_id="u", session_id="s")
    for text in ("one", "two"):
        await service.append_event(session, event(text=text))
    key = AdkKey(APP, "u", "s")
    await sync_to_async(pop_last_message)(key.context, scope=session_scope())
    again = await service.get_session(app_name=APP, user_id="u", session_id="s")
    assert again is not None
    assert [e.content.parts[0].text for e in again.events] == ["one"]  # type: ignore[union-attr,index]
    await service.append_event(again, event(text="three"))
    final = await service.get_session(app_name=APP, user_id="u", session_id="s")
    assert final is not None
    assert [e.content.parts[0].text for e in final.events] == ["one", "three"]  # type: ignore[union-attr,index]


def test_export_carries_each_sessions_state_and_prune_leaves_shared_state() -> None:
    service = adk.DjangoSessionService()
    for user in ("u1", "u2"):
        state = {"app:motto": "hi", "user:name": user, "cart": f"{user}-cart"}
        session = run(
            service.create_session, app_name=APP, user_id=user, session_id="s", state=state
        )
        run(service.append_event, session, event(text=f"hello from {user}"))

    out = StringIO()
    call_command("anvia_memory", "export", "--user", "u1", stdout=out)
    records = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [r["type"] for r in records] == ["conversation", "adkState", "message"]
    assert records[1] | {"ref": None} == {
        "type": "adkState",
        "ref": None,
        "sessionId": "s",
        "appName": APP,
        "userId": "u1",
        "sessionState": {"cart": "u1-cart"},
        "userState": {"name": "u1"},
        "appState": {"motto": "hi"},
    }

    # Retention deletes old sessions with their own state and events; the
    # user's and the app's state outlive them (erase takes the user's).
    old = timezone.now() - timedelta(days=40)
    Conversation.objects.filter(user_id="u1").update(updated_at=old)
    call_command("anvia_memory", "prune", "--older-than", "30d", "--yes", stdout=StringIO())
    assert list(AdkSession.objects.values_list("user_id", flat=True)) == ["u2"]
    assert AdkEvent.objects.count() == 1
    assert run(service.get_user_state, app_name=APP, user_id="u1") == {"name": "u1"}
    assert AdkAppState.objects.count() == 1
