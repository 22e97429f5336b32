"""Fork: a new conversation from the first N messages of another, with lineage."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from anvia_django import signals
from anvia_django.core.memory import (
    ConversationScopeError,
    ForkLineage,
    InProcessMemoryStore,
    InvalidMemoryInputError,
    MemoryAppendInput,
    MemoryContext,
    MemoryForkInput,
)
from anvia_django.models import Conversation, MemoryMessage
from anvia_django.persistence import clear_conversation, conversation_lineage
from anvia_django.persistence.lifecycle import forks
from anvia_django.store import DjangoMemoryStore
from example_project.demo.agent import build_agent
from tests.helpers import run, snapshot, user

pytestmark = pytest.mark.django_db

STORES: dict[str, Callable[[], Any]] = {
    "django": DjangoMemoryStore,
    "in-process": InProcessMemoryStore,
}


def fill(store: Any, session_id: str, count: int, user_id: str | None = "u1") -> None:
    context = MemoryContext(session_id, user_id=user_id, metadata={"tier": "gold"})
    for index in range(count):
        run(store.append, MemoryAppendInput(context, f"run-{index // 2}", 1, [user(str(index))]))


def lineage_of(store: Any, session_id: str) -> Any:
    if isinstance(store, InProcessMemoryStore):
        return store.lineage(session_id)
    return conversation_lineage(Conversation.objects.get(session_id=session_id).pk)


@pytest.mark.parametrize("make_store", STORES.values(), ids=list(STORES))
@pytest.mark.parametrize("position", [0, 3, 5])
def test_a_fork_copies_the_first_messages_and_leaves_the_source_alone(
    make_store: Callable[[], Any], position: int
) -> None:
    store = make_store()
    fill(store, "main", 5)
    source = MemoryContext("main", user_id="u1")
    summary = run(store.fork, MemoryForkInput(source, "branch", position))
    assert (summary.session_id, summary.user_id, summary.message_count) == (
        "branch",
        "u1",
        position,
    )
    assert summary.metadata == {"tier": "gold"}
    branch = MemoryContext("branch", user_id="u1")
    assert run(store.load, branch) == [user(str(i)) for i in range(position)]
    run(store.append, MemoryAppendInput(branch, "new-run", 1, [user("edited")]))
    assert run(store.load, source) == [user(str(i)) for i in range(5)]
    assert run(store.load, branch)[-1] == user("edited")
    copied = run(store.inspector.get_conversation, summary.ref)
    assert [m.position for m in copied.messages] == list(range(position + 1))
    main_ref = run(store.inspector.list_conversations, _options())[-1].ref
    assert lineage_of(store, "branch").forked_from == ForkLineage(main_ref, "main", position)
    assert lineage_of(store, "main").forks == [ForkLineage(summary.ref, "branch", position)]


def _options() -> Any:
    from anvia_django.core.memory import MemoryConversationListOptions

    return MemoryConversationListOptions(limit=10)


@pytest.mark.parametrize("make_store", STORES.values(), ids=list(STORES))
@pytest.mark.parametrize(
    ("fork", "path"),
    [
        (MemoryForkInput(MemoryContext("main"), "main", 1), "session_id"),
        (MemoryForkInput(MemoryContext("main"), "taken", 1), "session_id"),
        (MemoryForkInput(MemoryContext("main"), "new", 4), "position"),
        (MemoryForkInput(MemoryContext("main"), "new", -1), "position"),
        (MemoryForkInput(MemoryContext("main"), "", 1), "session_id"),
        (MemoryForkInput(MemoryContext("nobody"), "new", 0), "source.session_id"),
        (MemoryForkInput(MemoryContext("main"), "new", 1, metadata={"x": float("nan")}), None),
    ],
)
def test_bad_forks_are_named_and_write_nothing(
    make_store: Callable[[], Any], fork: MemoryForkInput, path: str | None
) -> None:
    store = make_store()
    fill(store, "main", 3)
    fill(store, "taken", 1)
    before = snapshot()
    with pytest.raises(InvalidMemoryInputError) as caught:
        run(store.fork, fork)
    if path is not None:
        assert caught.value.path == path
    assert snapshot() == before
    assert run(store.load, MemoryContext("new")) == []


@pytest.mark.parametrize("make_store", STORES.values(), ids=list(STORES))
def test_forks_stay_with_their_user_unless_server_code_says_otherwise(
    make_store: Callable[[], Any],
) -> None:
    store = make_store()
    fill(store, "main", 2, user_id="alice")
    before = snapshot()
    with pytest.raises(ConversationScopeError):
        run(store.fork, MemoryForkInput(MemoryContext("main", user_id="mallory"), "x", 1))
    with pytest.raises(ConversationScopeError):
        run(store.fork, MemoryForkInput(MemoryContext("main", "alice"), "x", 1, user_id="bob"))
    assert snapshot() == before
    trusted = run(store.fork, MemoryForkInput(MemoryContext("main"), "x", 1, user_id="bob"))
    assert trusted.user_id == "bob"
    assert run(store.fork, MemoryForkInput(MemoryContext("main"), "y", 1)).user_id == "alice"


def test_a_failure_after_the_copy_leaves_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    fill(DjangoMemoryStore(), "main", 9)
    monkeypatch.setattr(forks, "COPY_BATCH", 4)  # three batches: 4, 4, 1
    real = forks._copy_summaries

    def fail(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("the database went away after the messages")

    monkeypatch.setattr(forks, "_copy_summaries", fail)
    before = snapshot()
    with pytest.raises(RuntimeError, match="went away"):
        run(DjangoMemoryStore().fork, MemoryForkInput(MemoryContext("main"), "branch", 9))
    assert snapshot() == before
    monkeypatch.setattr(forks, "_copy_summaries", real)
    run(DjangoMemoryStore().fork, MemoryForkInput(MemoryContext("main"), "branch", 9))
    copied = MemoryMessage.objects.filter(conversation__session_id="branch").order_by("position")
    assert [(m.position, m.message) for m in copied] == [(i, user(str(i))) for i in range(9)]


@pytest.mark.django_db(transaction=True)
def test_the_signal_follows_the_commit() -> None:
    events: list[dict[str, Any]] = []

    def receive(sender: type, signal: object, **kwargs: Any) -> None:
        events.append(kwargs)

    fill(DjangoMemoryStore(), "main", 2)
    signals.conversation_forked.connect(receive)
    try:
        summary = run(DjangoMemoryStore().fork, MemoryForkInput(MemoryContext("main"), "b", 1))
    finally:
        signals.conversation_forked.disconnect(receive)
    source_ref = Conversation.objects.get(session_id="main").ref
    assert events == [
        {
            "session_id": "b",
            "ref": summary.ref,
            "user_id": "u1",
            "source_session_id": "main",
            "source_ref": source_ref,
            "position": 1,
            "using": "default",
        }
    ]


def test_a_deleted_source_leaves_the_fork_whole() -> None:
    fill(DjangoMemoryStore(), "main", 3)
    run(DjangoMemoryStore().fork, MemoryForkInput(MemoryContext("main"), "branch", 2))
    clear_conversation(MemoryContext("main"))
    assert run(DjangoMemoryStore().load, MemoryContext("branch")) == [user("0"), user("1")]
    assert lineage_of(None, "branch").forked_from == ForkLineage(None, None, 2)


def test_the_api_shows_lineage_both_ways_in_constant_queries(staff: APIClient) -> None:
    store = DjangoMemoryStore()
    fill(store, "main", 4)
    refs = [
        run(store.fork, MemoryForkInput(MemoryContext("main"), f"b{i}", i)).ref for i in range(3)
    ]
    main = Conversation.objects.get(session_id="main")
    client = staff
    body = client.get(f"/anvia/api/conversations/{main.ref}/lineage/").json()
    assert body["forkedFrom"] is None
    assert body["forks"] == [
        {"ref": refs[i], "sessionId": f"b{i}", "position": i} for i in reversed(range(3))
    ]
    child = client.get(f"/anvia/api/conversations/{refs[2]}/lineage/").json()
    assert child == {
        "forkedFrom": {"ref": main.ref, "sessionId": "main", "position": 2},
        "forks": [],
    }
    assert (
        len(
            client.get(f"/anvia/api/conversations/{main.ref}/lineage/", {"limit": 1}).json()[
                "forks"
            ]
        )
        == 1
    )
    counts = []
    for ref in (refs[0], main.ref):
        with CaptureQueriesContext(connection) as queries:
            client.get(f"/anvia/api/conversations/{ref}/lineage/")
        counts.append(len(queries))
    assert counts[0] == counts[1]


def test_owner_mode_hides_another_users_end_of_a_fork() -> None:
    store = DjangoMemoryStore()
    fill(store, "main", 2, user_id="1")
    run(store.fork, MemoryForkInput(MemoryContext("main"), "theirs", 1, user_id="someone-else"))
    client = APIClient()
    owner = User.objects.create_user("owner", is_staff=True)
    client.force_authenticate(owner)
    theirs = Conversation.objects.get(session_id="theirs")
    Conversation.objects.filter(session_id="main").update(user_id=str(owner.pk))
    theirs_ref, main_ref = theirs.ref, Conversation.objects.get(session_id="main").ref
    with override_settings(ANVIA_DJANGO={"INSPECTOR_OWNER_MODE": True}):
        assert client.get(f"/anvia/api/conversations/{main_ref}/lineage/").json()["forks"] == []
        assert client.get(f"/anvia/api/conversations/{theirs_ref}/lineage/").status_code == 404


def test_the_admin_page_shows_lineage() -> None:
    store = DjangoMemoryStore()
    fill(store, "main", 3)
    run(store.fork, MemoryForkInput(MemoryContext("main"), "branch", 2))
    client = APIClient()
    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
    main = Conversation.objects.get(session_id="main")
    branch = Conversation.objects.get(session_id="branch")
    source_page = client.get(f"/admin/anvia_django/conversation/{main.pk}/change/").content.decode()
    assert "Forks:" in source_page
    assert f'href="/admin/anvia_django/conversation/{branch.pk}/change/"' in source_page
    fork_page = client.get(f"/admin/anvia_django/conversation/{branch.pk}/change/").content.decode()
    assert "after its first 2 messages" in fork_page
    # The source itself, not a list filtered down to it.
    assert f'href="/admin/anvia_django/conversation/{main.pk}/change/">main</a>' in fork_page
    linked = client.get(f"/admin/anvia_django/conversation/?ref__exact={main.ref}")
    assert linked.status_code == 200
    assert "main" in linked.content.decode()


def test_edit_and_regenerate_on_a_fork_keeps_the_original_branch() -> None:
    agent = build_agent()
    original = agent.session("web-original", user_id="visitor")
    first = run(original.prompt("Where is order 1042?").send)
    second = run(original.prompt("What did I ask you before?").send)
    kept = run(original.history)

    # Edit the second question on a new branch; the original stays intact.
    branch = run(original.fork, "web-branch", up_to=len(first.messages))
    assert branch.context.user_id == "visitor"
    regenerated = run(branch.prompt("Where is order 1043?").send)

    assert run(original.history) == kept == first.messages + second.messages
    assert run(branch.history) == first.messages + regenerated.messages
    fork_row = Conversation.objects.get(session_id="web-branch")
    assert fork_row.forked_from is not None
    assert fork_row.forked_from.session_id == "web-original"
    assert fork_row.forked_at_position == len(first.messages)
