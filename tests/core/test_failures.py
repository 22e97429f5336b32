"""Failed runs: record_error gets the partial run, the caller gets the error."""

from __future__ import annotations

import asyncio
import logging

import pytest

from anvia_django.core import (
    AgentBuilder,
    InvalidModelOutputError,
    MemoryNotConfiguredError,
    MemorySavePolicy,
    Message,
    TurnLimitExceededError,
)

from .doubles import RecordingStore, ScriptedModel, Step, assistant, tool_result, user
from .test_save_policies import ASK, EXPECTED_APPENDS, FINAL, RESULT, lookup_order

PROMPT = user("Where is A1?")


class Boom(Exception):
    pass


def send(store: RecordingStore, steps: list[Step], policy: MemorySavePolicy = "message") -> None:
    agent = (
        AgentBuilder("support", ScriptedModel(steps))
        .tool(lookup_order)
        .memory(store, save_policy=policy)
        .build()
    )
    asyncio.run(agent.session("thread-1", user_id="u").prompt("Where is A1?").send())


@pytest.mark.parametrize(
    ("policy", "saved"),
    [("message", [[PROMPT], [ASK], [RESULT]]), ("turn", [[PROMPT, ASK, RESULT]]), ("run", [])],
)
def test_model_raising_in_turn_two(policy: MemorySavePolicy, saved: list[list[Message]]) -> None:
    store, boom = RecordingStore(), Boom("provider down")
    with pytest.raises(Boom) as raised:
        send(store, [ASK, boom], policy)
    assert raised.value is boom
    (error,) = store.errors
    assert (error.error, error.messages) == (boom, [PROMPT, ASK, RESULT])
    assert [batch for _, _, batch in store.appends] == saved
    assert {run_id for run_id, _, _ in store.appends} <= {error.run_id}
    assert store.calls[-1].method == "record_error"


APPEND_POINTS = [(p, n) for p, appends in EXPECTED_APPENDS.items() for n in range(len(appends))]


@pytest.mark.parametrize(("policy", "failing"), APPEND_POINTS)
def test_append_raising_fails_the_run(policy: MemorySavePolicy, failing: int) -> None:
    boom = Boom("database unavailable")
    store = RecordingStore(fail_append={failing + 1: boom})
    with pytest.raises(Boom) as raised:
        send(store, [ASK, FINAL], policy)
    assert raised.value is boom
    expected = EXPECTED_APPENDS[policy]
    # The run stops at the failing append; the messages it tried to save are
    # part of what record_error receives.
    assert [(turn, batch) for _, turn, batch in store.appends] == expected[: failing + 1]
    (error,) = store.errors
    assert error.messages == [m for _, batch in expected[: failing + 1] for m in batch]
    assert asyncio.run(store.inner.load(store.calls[0].context)) == [
        m for _, batch in expected[:failing] for m in batch
    ]


def test_load_raising_records_the_prompt_and_saves_nothing() -> None:
    boom = Boom("no connection")
    store = RecordingStore(fail_load=boom)
    with pytest.raises(Boom):
        send(store, [FINAL])
    assert [c.method for c in store.calls] == ["load", "record_error"]
    assert store.errors[0].messages == [PROMPT]


def test_failing_record_error_never_hides_the_error(caplog: pytest.LogCaptureFixture) -> None:
    boom = Boom("provider down")
    store = RecordingStore(fail_record_error=OSError("disk full"))
    with caplog.at_level(logging.WARNING, "anvia_django.runtime"), pytest.raises(Boom) as raised:
        send(store, [boom])
    assert raised.value is boom
    assert raised.value.__notes__ == ["record_error also failed: OSError: disk full"]
    (record,) = caplog.records
    assert record.exc_info is not None
    assert isinstance(record.exc_info[1], OSError)


def test_a_store_without_record_error_just_raises() -> None:
    store = RecordingStore()
    plain = _WithoutRecordError(store)
    agent = AgentBuilder("a", ScriptedModel([Boom("x")])).memory(plain).build()
    with pytest.raises(Boom):
        asyncio.run(agent.session("s").prompt("hi").send())
    assert [c.method for c in store.calls] == ["load", "append"]


@pytest.mark.parametrize(("policy", "appends"), [("message", 5), ("turn", 2), ("run", 0)])
def test_turn_limit(policy: MemorySavePolicy, appends: int) -> None:
    store = RecordingStore()
    asks = [assistant(None, (f"c{n}", "lookup_order", {"order_id": "B"})) for n in (1, 2)]
    agent = (
        AgentBuilder("a", ScriptedModel(list(asks)))
        .tool(lookup_order)
        .memory(store, save_policy=policy)
        .max_turns(2)
        .build()
    )
    with pytest.raises(TurnLimitExceededError, match="2 turns") as raised:
        asyncio.run(agent.session("s").prompt("go").send())
    assert raised.value.max_turns == 2
    assert len(store.appends) == appends
    results = [tool_result(f"c{n}", "lookup_order", '{"status": "unknown"}') for n in (1, 2)]
    assert store.errors[0].messages == [user("go"), asks[0], results[0], asks[1], results[1]]


def test_tool_errors_become_results_the_model_sees() -> None:
    def broken(order_id: str) -> str:
        raise LookupError(f"no order {order_id}")

    store = RecordingStore()
    model = ScriptedModel(
        [
            assistant(
                None,
                ("c1", "broken", {"order_id": "Z"}),
                ("c2", "missing", {}),
                ("c3", "broken", {"wrong": 1}),
                ("c4", "broken", "not an object"),  # type: ignore[arg-type]
            ),
            FINAL,
        ]
    )
    agent = AgentBuilder("a", model).tool(broken).memory(store).build()
    response = asyncio.run(agent.session("s").prompt("go").send())
    contents = [m["content"] for m in response.messages if m["role"] == "tool"]
    assert contents[0] == "Error: LookupError: no order Z"
    assert contents[1] == "Error: unknown tool 'missing'; available tools: broken."
    assert contents[2].startswith("Error: TypeError: ")
    assert contents[3] == "Error: the tool arguments must be a JSON object."
    assert model.calls[1][-4:] == response.messages[2:6]
    assert store.errors == []


@pytest.mark.parametrize(
    "reply",
    [
        "just text",
        {"role": "user", "content": "hi"},
        {"role": "assistant", "tool_calls": "lookup"},
        {"role": "assistant", "tool_calls": [{"name": "lookup_order", "arguments": {}}]},
        {"role": "assistant", "tool_calls": [{"id": "c", "arguments": {}}]},
        assistant(None, ("c", "lookup_order", {}), ("c", "lookup_order", {})),
    ],
)
def test_malformed_model_output_fails_the_run(reply: object) -> None:
    store = RecordingStore()
    with pytest.raises(InvalidModelOutputError):
        send(store, [reply], "turn")  # type: ignore[list-item]
    assert store.appends == []
    assert store.errors[0].messages == [PROMPT]


def test_a_reply_without_role_is_an_assistant_message() -> None:
    store = RecordingStore()
    send(store, [{"content": "fine"}], "run")
    assert store.appends[0][2] == [PROMPT, {"role": "assistant", "content": "fine"}]


@pytest.mark.parametrize("session_id", ["", " ", "\n\t"])
def test_empty_session_id_fails_before_any_store_call(session_id: str) -> None:
    store = RecordingStore()
    agent = AgentBuilder("a", ScriptedModel([])).memory(store).build()
    with pytest.raises(ValueError, match="session_id"):
        agent.session(session_id)
    assert store.calls == []


def test_session_without_memory() -> None:
    agent = AgentBuilder("a", ScriptedModel([])).build()
    with pytest.raises(MemoryNotConfiguredError, match="memory"):
        agent.session("s")


class _WithoutRecordError:
    def __init__(self, inner: RecordingStore) -> None:
        self.load, self.append, self.clear = inner.load, inner.append, inner.clear
