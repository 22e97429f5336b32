"""Bad input: a clear ValueError naming the problem, and nothing written.

The same inputs are refused on every backend, including the ones that only
some databases could store (U+0000, lone surrogates).
"""

from __future__ import annotations

from typing import Any

import pytest
from django.test import override_settings

from anvia_django.core.memory import (
    InvalidMemoryInputError,
    MemoryAppendInput,
    MemoryContext,
    MemoryErrorInput,
)
from anvia_django.store import DjangoMemoryStore

from .helpers import append_input, run, snapshot, user

pytestmark = pytest.mark.django_db

LONG = "x" * 256


def nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = [value]
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
    ("metadata not an object", append_input("s", [user("x")], metadata=[1]), "metadata"),  # type: ignore[arg-type]
    ("NaN in metadata", append_input("s", [user("x")], metadata={"a": float("nan")}), "metadata"),
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
    ):
        with pytest.raises(InvalidMemoryInputError):
            call()
    assert snapshot() == {"conversations": [], "messages": [], "failed_runs": []}


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
