"""Bad input: a clear ValueError naming the problem, and nothing written.

The same inputs are refused on every backend, including the ones that only
some databases could store (U+0000, lone surrogates), and the reference
``InProcessMemoryStore`` refuses each of them with the same message.
Every case goes through ``append``; the message cases also through
``record_error``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from django.test import override_settings

from anvia_django.core.memory import (
    InProcessMemoryStore,
    InvalidMemoryInputError,
    MemoryAppendInput,
    MemoryCompactionInput,
    MemoryContext,
    MemoryConversationListOptions,
    MemoryErrorInput,
    MemoryForkInput,
    MemoryRunInput,
    Message,
)
from anvia_django.store import DjangoMemoryStore

from .helpers import append_input, run, snapshot, user
from .reliability.report import record

pytestmark = pytest.mark.django_db

LONG = "x" * 256
TEN_MB = "x" * (10 * 1024 * 1024)


def nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = [value]
    return value


def deep_object(depth: int = 10_000) -> Any:
    value: Any = {}
    for _ in range(depth):
        value = {"a": value}
    return value


CASES: list[tuple[str, Any, str]] = [
    # (case id, the append input, what the error must name)
    ("message is a string", append_input("s", ["hello"]), "messages[0]"),  # type: ignore[list-item]
    ("message without role", append_input("s", [{"content": "x"}]), "role"),
    ("empty role", append_input("s", [{"role": "", "content": "x"}]), "role"),
    ("role not a string", append_input("s", [{"role": 3}]), "role"),
    ("role too long", append_input("s", [{"role": LONG}]), "role"),
    ("set value", append_input("s", [{"role": "user", "tags": {"a"}}]), '["tags"]'),
    ("bytes value", append_input("s", [{"role": "user", "content": b"x"}]), '["content"]'),
    ("tuple value", append_input("s", [{"role": "user", "content": (1, 2)}]), '["content"]'),
    ("object value", append_input("s", [{"role": "user", "x": object()}]), '["x"]'),
    ("non-string key", append_input("s", [{"role": "user", 1: "x"}]), "int key"),  # type: ignore[dict-item]
    ("NaN", append_input("s", [{"role": "user", "score": float("nan")}]), "NaN"),
    ("infinity", append_input("s", [{"role": "user", "score": float("-inf")}]), "NaN"),
    ("huge integer", append_input("s", [{"role": "user", "n": 2**64}]), "64 bits"),
    ("U+0000", append_input("s", [{"role": "user", "content": "a\x00b"}]), "U+0000"),
    ("U+0000 in key", append_input("s", [{"role": "user", "a\x00": 1}]), "U+0000"),
    ("lone surrogate", append_input("s", [{"role": "user", "content": "\ud800"}]), "surrogate"),
    ("deep nesting", append_input("s", [{"role": "user", "c": nested(10_000)}]), "nested"),
    (
        "deep nesting in objects",
        append_input("s", [{"role": "user", "c": deep_object()}]),
        "nested",
    ),
    ("10 MB message", append_input("s", [user(TEN_MB)]), "maximum is"),
    ("float key", append_input("s", [{"role": "user", 1.5: "x"}]), "float key"),  # type: ignore[dict-item]
    ("None key", append_input("s", [{"role": "user", None: "x"}]), "NoneType key"),  # type: ignore[dict-item]
    ("nested non-string key", append_input("s", [{"role": "user", "a": {2: 1}}]), "int key"),
    ("bytes in a list", append_input("s", [{"role": "user", "parts": [b"x"]}]), "bytes"),
    ("frozenset value", append_input("s", [{"role": "user", "t": frozenset()}]), "frozenset"),
    ("huge negative integer", append_input("s", [{"role": "user", "n": -(2**63) - 1}]), "64 bits"),
    ("huge integer in a list", append_input("s", [{"role": "user", "n": [1, 10**30]}]), "64 bits"),
    ("positive infinity", append_input("s", [{"role": "user", "x": float("inf")}]), "NaN"),
    ("NaN in a nested list", append_input("s", [{"role": "user", "x": [[float("nan")]]}]), "NaN"),
    ("lone surrogate in key", append_input("s", [{"role": "user", "\udfff": 1}]), "surrogate"),
    ("lone surrogate in role", append_input("s", [{"role": "us\ud800er"}]), "surrogate"),
    ("U+0000 in role", append_input("s", [{"role": "a\x00"}]), "U+0000"),
    ("messages a tuple", append_input("s", (user("x"),)), "messages"),  # type: ignore[arg-type]
    ("messages None", append_input("s", None), "messages"),  # type: ignore[arg-type]
    ("messages a string", append_input("s", "hello"), "messages"),  # type: ignore[arg-type]
    ("message None", append_input("s", [None]), "messages[0]"),  # type: ignore[list-item]
    ("U+0000 in session id", append_input("s\x00", [user("x")]), "session_id"),
    ("lone surrogate in user id", append_input("s", [user("x")], user_id="\ud800"), "user_id"),
    ("run id not a string", append_input("s", [user("x")], run_id=5), "run_id"),  # type: ignore[arg-type]
    ("float turn", append_input("s", [user("x")], turn=1.0), "turn"),  # type: ignore[arg-type]
    ("turn beyond 64 bits", append_input("s", [user("x")], turn=2**63), "turn"),
    ("messages not a list", append_input("s", {"role": "user"}), "messages"),  # type: ignore[arg-type]
    ("empty session id", append_input("", [user("x")]), "session_id"),
    ("blank session id", append_input("  ", [user("x")]), "session_id"),
    ("session id too long", append_input(LONG, [user("x")]), "session_id"),
    ("session id not a string", append_input(7, [user("x")]), "session_id"),  # type: ignore[arg-type]
    ("user id too long", append_input("s", [user("x")], user_id=LONG), "user_id"),
    ("empty run id", append_input("s", [user("x")], run_id=""), "run_id"),
    ("run id too long", append_input("s", [user("x")], run_id=LONG), "run_id"),
    ("turn zero", append_input("s", [user("x")], turn=0), "turn"),
    ("negative turn", append_input("s", [user("x")], turn=-1), "turn"),
    ("turn not an int", append_input("s", [user("x")], turn="1"), "turn"),  # type: ignore[arg-type]
    ("turn is a bool", append_input("s", [user("x")], turn=True), "turn"),
    ("turn beyond 32 bits", append_input("s", [user("x")], turn=2**31), "turn"),
    ("metadata not an object", append_input("s", [user("x")], metadata=[1]), "metadata"),  # type: ignore[arg-type]
    ("NaN in metadata", append_input("s", [user("x")], metadata={"a": float("nan")}), "metadata"),
    (
        "huge integer deep inside",
        append_input("s", [{"role": "user", "a": {"b": [1, {"c": 2**70}]}}]),
        'messages[0]["a"]["b"][1]["c"]: integer does not fit',
    ),
    (
        "non-string key deep inside",
        append_input("s", [{"role": "user", "a": [{"x": {3: 1}}]}]),
        'messages[0]["a"][0]["x"]: has a int key',
    ),
    (
        "second message bad",
        append_input("s", [user("ok"), {"role": "user", "n": 2**70}]),
        "messages[1]",
    ),
]


@pytest.mark.parametrize(("payload", "names"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_append_is_refused_and_writes_nothing(payload: MemoryAppendInput, names: str) -> None:
    store = DjangoMemoryStore()
    run(store.append, append_input("s", [user("existing")]))
    before = snapshot()
    with pytest.raises(InvalidMemoryInputError) as caught:
        run(store.append, payload)
    assert isinstance(caught.value, ValueError)
    assert names in str(caught.value)
    assert snapshot() == before
    # The reference store gives the very same answer.
    reference = InProcessMemoryStore()
    with pytest.raises(InvalidMemoryInputError) as same:
        run(reference.append, payload)
    assert str(same.value) == str(caught.value)
    assert run(reference.inspector.list_conversations, MemoryConversationListOptions(10)) == []
    record("bad input", inputs=1, refused=1, written_on_error=0)


def only_messages_are_bad(payload: MemoryAppendInput) -> bool:
    """The case keeps the default (valid) context, run id and turn."""
    default = append_input("s", [])
    return type(payload.turn) is int and (payload.context, payload.run_id, payload.turn) == (
        default.context,
        default.run_id,
        default.turn,
    )


MESSAGE_CASES = [c for c in CASES if only_messages_are_bad(c[1])]


@pytest.mark.parametrize(
    ("payload", "names"), [c[1:] for c in MESSAGE_CASES], ids=[c[0] for c in MESSAGE_CASES]
)
def test_bad_failed_run_messages_are_refused_and_write_nothing(
    payload: MemoryAppendInput, names: str
) -> None:
    store = DjangoMemoryStore()
    run(store.append, append_input("s", [user("existing")]))
    before = snapshot()
    failure = MemoryErrorInput(payload.context, "run-1", RuntimeError("boom"), payload.messages)
    with pytest.raises(InvalidMemoryInputError) as caught:
        run(store.record_error, failure)
    assert names in str(caught.value)
    assert snapshot() == before
    with pytest.raises(InvalidMemoryInputError) as same:
        run(InProcessMemoryStore().record_error, failure)
    assert str(same.value) == str(caught.value)
    record("bad input", inputs=1, refused=1, written_on_error=0)


def test_errors_never_echo_message_content() -> None:
    secret = "my card is 4111 1111 1111 1111 \x00"
    with pytest.raises(InvalidMemoryInputError) as caught:
        run(DjangoMemoryStore().append, append_input("s", [{"role": "user", "content": secret}]))
    assert "4111" not in str(caught.value)


def test_oversized_message_is_refused() -> None:
    with override_settings(ANVIA_DJANGO={"MAX_MESSAGE_BYTES": 1000}):
        with pytest.raises(InvalidMemoryInputError, match="maximum is 1000"):
            run(DjangoMemoryStore().append, append_input("s", [user("é" * 600)]))
        run(DjangoMemoryStore().append, append_input("s", [user("e" * 900)]))


@pytest.mark.parametrize(
    "context",
    [MemoryContext(""), MemoryContext("s", user_id=""), MemoryContext("s", metadata="x")],  # type: ignore[arg-type]
    ids=["empty session", "empty user", "metadata string"],
)
def test_bad_context_is_refused_by_every_operation(context: MemoryContext) -> None:
    store = DjangoMemoryStore()
    for call in (
        lambda: run(store.load, context),
        lambda: run(store.clear, context),
        lambda: run(store.record_error, MemoryErrorInput(context, "r", ValueError(), [])),
        lambda: run(store.rewind, context, 0),
        lambda: run(store.fork, MemoryForkInput(context, "elsewhere", 0)),
        lambda: run(store.compact, MemoryCompactionInput(context, _summarise, keep_messages=1)),
        lambda: run(store.record_run, MemoryRunInput(context, "r", "failed", _NOW, _NOW)),
    ):
        with pytest.raises(InvalidMemoryInputError):
            call()
    assert all(rows == [] for rows in snapshot().values())


_NOW = datetime(2026, 12, 1, tzinfo=UTC)


async def _summarise(previous: str | None, messages: list[Message]) -> str:
    return "never called"


def test_the_edges_of_what_is_accepted_round_trip() -> None:
    store = DjangoMemoryStore()
    edge = {
        "role": "user",
        "ints": [2**63 - 1, -(2**63), 0],
        "floats": [1e308, -0.0, 5e-324, 0.1],
        "text": "emoji 👩‍👩‍👧 and \u2028 and \ufeff and tabs\t\n",
        "nested": nested(90),
        "empty": [{}, [], ""],
        "keys": {"": 1, "a.b": 2, "$x": 3},
    }
    run(store.append, append_input("s", [edge], user_id="u" * 255, run_id="r" * 255))
    assert run(store.load, MemoryContext("s" * 1)) == [edge]
    record("bad input", inputs=1, round_trips=1)


def test_a_message_just_under_the_default_bound_round_trips() -> None:
    # 8 MB is the default bound; a message of 8 MB minus a little is kept exactly.
    big = user("é" * (4 * 1024 * 1024 - 64))
    store = DjangoMemoryStore()
    run(store.append, append_input("big", [big]))
    assert run(store.load, MemoryContext("big")) == [big]
    record("bad input", inputs=1, round_trips=1)
