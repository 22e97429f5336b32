"""The append calls of each save policy, asserted call by call (SPEC §3)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from anvia_django.core import AgentBuilder, AgentResponse, MemorySavePolicy, Message

from .doubles import RecordingStore, ScriptedModel, assistant, tool_result, user

ASK = assistant(None, ("call-1", "lookup_order", {"order_id": "A1"}))
RESULT = tool_result("call-1", "lookup_order", '{"status": "shipped"}')
FINAL = assistant("Your order A1 has shipped.")


def lookup_order(order_id: str) -> dict[str, str]:
    """Look an order up by its id."""
    return {"status": "shipped"} if order_id == "A1" else {"status": "unknown"}


def two_turn_run(policy: MemorySavePolicy) -> tuple[RecordingStore, AgentResponse]:
    store = RecordingStore()
    agent = (
        AgentBuilder("support", ScriptedModel([ASK, FINAL]))
        .instructions("Be brief.")
        .tool(lookup_order)
        .memory(store, save_policy=policy)
        .build()
    )
    session = agent.session("thread-1", user_id="user-1", metadata={"channel": "web"})
    return store, asyncio.run(session.prompt("Where is A1?").send())


EXPECTED_APPENDS: dict[str, list[tuple[int, list[Message]]]] = {
    "message": [
        (1, [user("Where is A1?")]),
        (1, [ASK]),
        (1, [RESULT]),
        (2, [FINAL]),
    ],
    "turn": [
        (1, [user("Where is A1?"), ASK, RESULT]),
        (2, [FINAL]),
    ],
    "run": [
        (2, [user("Where is A1?"), ASK, RESULT, FINAL]),
    ],
}


@pytest.mark.parametrize("policy", ["message", "turn", "run"])
def test_two_turns_with_one_tool_call(policy: MemorySavePolicy) -> None:
    store, response = two_turn_run(policy)

    assert [c.method for c in store.calls] == ["load"] + ["append"] * len(EXPECTED_APPENDS[policy])
    assert store.appends == [
        (response.run_id, turn, messages) for turn, messages in EXPECTED_APPENDS[policy]
    ]
    assert all(c.context is store.calls[0].context for c in store.calls)
    context = store.calls[0].context
    assert (context.session_id, context.user_id, context.metadata) == (
        "thread-1",
        "user-1",
        {"channel": "web"},
    )
    assert response.output == "Your order A1 has shipped."
    assert response.messages == [user("Where is A1?"), ASK, RESULT, FINAL]
    assert asyncio.run(store.inner.load(context)) == response.messages


def test_default_policy_is_message() -> None:
    store = RecordingStore()
    agent = AgentBuilder("a", ScriptedModel([FINAL])).memory(store).build()
    response = asyncio.run(agent.session("s").prompt("hi").send())
    assert store.appends == [(response.run_id, 1, [user("hi")]), (response.run_id, 1, [FINAL])]


def test_each_run_gets_a_fresh_run_id_and_sees_the_history() -> None:
    store = RecordingStore()
    model = ScriptedModel([FINAL, assistant("again")])
    agent = AgentBuilder("a", model).instructions("Be brief.").memory(store).build()
    session = agent.session("s")
    first = asyncio.run(session.prompt("one").send())
    second = asyncio.run(session.prompt("two").send())
    assert first.run_id != second.run_id
    assert len(first.run_id) >= 32
    # Instructions lead every model call and are never stored.
    assert model.calls[1] == [
        {"role": "system", "content": "Be brief."},
        user("one"),
        FINAL,
        user("two"),
    ]
    assert asyncio.run(session.history()) == [user("one"), FINAL, user("two"), assistant("again")]


# A script is a list of turns; each non-final turn lists the outcome of each
# of its tool calls (True: the tool returns, False: it raises).
scripts = st.lists(st.lists(st.booleans(), min_size=1, max_size=3), max_size=4)


def flaky(n: int, ok: bool) -> str:
    """Return n, or fail when told to."""
    if not ok:
        raise RuntimeError(f"tool failed on {n}")
    return f"ok {n}"


def scripted_run(
    script: list[list[bool]], policy: MemorySavePolicy
) -> tuple[RecordingStore, AgentResponse, list[tuple[int, Message]]]:
    steps: list[Message] = []
    expected: list[tuple[int, Message]] = [(1, user("go"))]
    for turn, outcomes in enumerate(script, start=1):
        calls = [(f"c{turn}-{i}", "flaky", {"n": i, "ok": ok}) for i, ok in enumerate(outcomes)]
        steps.append(assistant(None, *calls))
        expected.append((turn, steps[-1]))
        for i, ok in enumerate(outcomes):
            content = f"ok {i}" if ok else f"Error: RuntimeError: tool failed on {i}"
            expected.append((turn, tool_result(f"c{turn}-{i}", "flaky", content)))
    steps.append(assistant("done"))
    expected.append((len(script) + 1, steps[-1]))
    store = RecordingStore()
    agent = AgentBuilder("a", ScriptedModel([*steps])).tool(flaky).memory(store, save_policy=policy)
    response = asyncio.run(agent.build().session("s").prompt("go").send())
    return store, response, expected


@settings(max_examples=40, deadline=None)
@given(script=scripts, policy=st.sampled_from(["message", "turn", "run"]))
def test_every_policy_saves_every_message_once_in_order(
    script: list[list[bool]], policy: MemorySavePolicy
) -> None:
    store, response, expected = scripted_run(script, policy)
    last_turn = len(script) + 1
    stored = [(turn, m) for run_id, turn, batch in store.appends for m in batch]
    assert {run_id for run_id, _, _ in store.appends} == {response.run_id}
    assert response.messages == [m for _, m in expected]
    if policy == "message":
        assert stored == expected
        assert all(len(batch) == 1 for _, _, batch in store.appends)
    elif policy == "turn":
        assert stored == expected
        assert [turn for _, turn, _ in store.appends] == list(range(1, last_turn + 1))
    else:
        assert stored == [(last_turn, m) for _, m in expected]
        assert len(store.appends) == 1
    assert store.errors == []


@settings(max_examples=20, deadline=None)
@given(script=scripts)
def test_the_policy_changes_when_messages_are_saved_never_what(script: Any) -> None:
    histories = set()
    for policy in ("message", "turn", "run"):
        store, response, _ = scripted_run(script, policy)
        context = store.calls[0].context
        histories.add(repr(asyncio.run(store.inner.load(context))))
        assert asyncio.run(store.inner.load(context)) == response.messages
    assert len(histories) == 1
