"""A 50-turn Pydantic AI history: load and append through ``DjangoMemory``'s
path, beside the hand-written glue it replaces, in the same run.

    ANVIA_BENCH_DB=postgres python -m benchmarks.pydantic_ai [ROUNDS]

The glue is what a Django team writes without the store: each run's
``result.new_messages_json()`` (``ModelMessagesTypeAdapter`` JSON) as one row
of its own table, appended with the raw driver (sqlite3, psycopg,
MySQLdb) in autocommit, and loaded by reading a conversation's rows in
order and validating each with the same adapter. It has none of the store's
guarantees (no idempotent retry, no gap-free positions, no scope, nothing
in the admin).

anvia-django's lanes are what the capability does, without the agent:

- append: one turn of a run (the prompt, a tool call, its return, the
  answer: 4 messages) through ``messages_to_stored`` and one
  ``append_messages`` (save="run"), to one of 50 sessions;
- load: a 50-turn session (200 messages) through ``load_messages`` and
  ``stored_to_messages``, whose result is what a run starts from.

The store's lanes run on Django's connection in this thread (the
capability's ``await store.append(...)`` adds one hop to a database thread,
measured in benchmarks W1/W4). Rounds alternate the lanes' order; figures
are medians over the rounds, with the best rounds' ratio beside them.
pya-memory is not a lane: it needs ``pydantic-ai<2``.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchmarks.settings")
django.setup()

from django.conf import settings  # noqa: E402
from django.db import connection  # noqa: E402
from pydantic_ai.messages import (  # noqa: E402
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.usage import RequestUsage  # noqa: E402

from anvia_django.core.memory import MemoryAppendInput, MemoryContext  # noqa: E402
from anvia_django.integrations.pydantic_ai import (  # noqa: E402
    messages_to_stored,
    stored_to_messages,
)
from anvia_django.persistence import append_messages, load_messages  # noqa: E402

from .database import create_fresh_database, mysql_connect, pg_conninfo  # noqa: E402

TURNS = 50
SESSIONS = 50
CALLS = {"append": 200, "load": 20}
ANVIA = "anvia-django"
GLUE = "glue (raw driver)"
START = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


def turn(run: int) -> list[ModelMessage]:
    """One run's messages, sized like a support chat: a 200-character
    question, a tool call, a 400-character tool result, a 400-character answer."""
    at = START + timedelta(minutes=run)
    run_id, conversation_id = f"run-{run:06d}", "conversation-1"
    return [
        ModelRequest(
            parts=[UserPromptPart(f"question {run} " + "q" * 200, timestamp=at)],
            timestamp=at,
            instructions="You answer questions about orders. Be brief.",
            run_id=run_id,
            conversation_id=conversation_id,
        ),
        ModelResponse(
            parts=[ToolCallPart("lookup_order", {"order": str(run)}, tool_call_id=f"call-{run}")],
            usage=RequestUsage(input_tokens=420 + run, output_tokens=18),
            model_name="gpt-5.2",
            timestamp=at,
            provider_name="openai",
            provider_response_id=f"resp-{run}-1",
            finish_reason="tool_call",
            run_id=run_id,
            conversation_id=conversation_id,
        ),
        ModelRequest(
            parts=[
                ToolReturnPart("lookup_order", "r" * 400, tool_call_id=f"call-{run}", timestamp=at)
            ],
            timestamp=at,
            instructions="You answer questions about orders. Be brief.",
            run_id=run_id,
            conversation_id=conversation_id,
        ),
        ModelResponse(
            parts=[TextPart(f"answer {run} " + "a" * 400)],
            usage=RequestUsage(input_tokens=860 + run, output_tokens=95),
            model_name="gpt-5.2",
            timestamp=at,
            provider_name="openai",
            provider_response_id=f"resp-{run}-2",
            finish_reason="stop",
            run_id=run_id,
            conversation_id=conversation_id,
        ),
    ]


class Glue:
    """One table of runs, one row per run: ``new_messages_json()`` as text."""

    def __init__(self) -> None:
        self.backend = settings.BACKEND
        if self.backend == "postgres":
            import psycopg

            self.conn: Any = psycopg.connect(pg_conninfo(), autocommit=True)
            self.mark = "%s"
            key = "id bigserial PRIMARY KEY"
        elif self.backend == "mariadb":
            self.conn = mysql_connect()
            self.conn.autocommit(True)
            self.mark = "%s"
            key = "id bigint AUTO_INCREMENT PRIMARY KEY"
        else:
            import sqlite3

            self.conn = sqlite3.connect(settings.DATABASES["default"]["NAME"], isolation_level=None)
            self.mark = "?"
            key = "id integer PRIMARY KEY AUTOINCREMENT"
        body = (
            "messages text NOT NULL" if self.backend != "mariadb" else "messages longtext NOT NULL"
        )
        self.execute("DROP TABLE IF EXISTS glue_runs")
        self.execute(
            f"CREATE TABLE glue_runs ({key}, conversation_id varchar(64) NOT NULL, {body})"
        )
        self.execute("CREATE INDEX glue_runs_conversation ON glue_runs (conversation_id, id)")

    def execute(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        cursor = self.conn.cursor()
        cursor.execute(sql, params)
        rows = cursor.fetchall() if cursor.description else []
        cursor.close()
        return list(rows)

    def append(self, conversation_id: str, messages: list[ModelMessage]) -> None:
        data = ModelMessagesTypeAdapter.dump_json(messages).decode()
        self.execute(
            f"INSERT INTO glue_runs (conversation_id, messages) VALUES ({self.mark}, {self.mark})",
            (conversation_id, data),
        )

    def load(self, conversation_id: str) -> list[ModelMessage]:
        rows = self.execute(
            f"SELECT messages FROM glue_runs WHERE conversation_id = {self.mark} ORDER BY id",
            (conversation_id,),
        )
        messages: list[ModelMessage] = []
        for (data,) in rows:
            messages.extend(ModelMessagesTypeAdapter.validate_json(data))
        return messages

    def close(self) -> None:
        self.execute("DROP TABLE IF EXISTS glue_runs")
        self.conn.close()


def anvia_append(round_number: int) -> Callable[[int], None]:
    def call(i: int) -> None:
        messages = turn(10_000 * (round_number + 1) + i)
        append_messages(
            MemoryAppendInput(
                MemoryContext(f"append-{i % SESSIONS}"),
                messages[0].run_id or "",
                2,
                messages_to_stored(messages),
            )
        )

    return call


def glue_append(glue: Glue, round_number: int) -> Callable[[int], None]:
    def call(i: int) -> None:
        glue.append(f"append-{i % SESSIONS}", turn(10_000 * (round_number + 1) + i))

    return call


def anvia_load(expected: list[ModelMessage]) -> Callable[[int], None]:
    context = MemoryContext("history")

    def call(i: int) -> None:
        assert stored_to_messages(load_messages(context)) == expected

    return call


def glue_load(glue: Glue, expected: list[ModelMessage]) -> Callable[[int], None]:
    def call(i: int) -> None:
        assert glue.load("history") == expected

    return call


def seed(glue: Glue) -> list[ModelMessage]:
    history: list[ModelMessage] = []
    for run in range(TURNS):
        messages = turn(run)
        history += messages
        append_messages(
            MemoryAppendInput(
                MemoryContext("history"), messages[0].run_id or "", 2, messages_to_stored(messages)
            )
        )
        glue.append("history", messages)
    # What both return: Pydantic AI's own round trip of the history.
    return ModelMessagesTypeAdapter.validate_json(ModelMessagesTypeAdapter.dump_json(history))


def timed(call: Callable[[int], None], calls: int) -> float:
    started = time.perf_counter()
    for i in range(calls):
        call(i)
    return (time.perf_counter() - started) / calls * 1e6


def main(rounds: int) -> None:
    create_fresh_database()
    glue = Glue()
    try:
        expected = seed(glue)
        results: dict[str, list[float]] = {}
        for round_number in range(rounds):
            lanes = [
                (ANVIA, "append", anvia_append(round_number)),
                (GLUE, "append", glue_append(glue, round_number)),
                (ANVIA, "load", anvia_load(expected)),
                (GLUE, "load", glue_load(glue, expected)),
            ]
            if round_number % 2:
                lanes.reverse()
            for system, what, call in lanes:
                call(0)  # warm: prepared statements, caches
                results.setdefault(f"{system} {what}", []).append(timed(call, CALLS[what]))
        codec = codec_costs(expected)
        report(rounds, results, codec)
    finally:
        glue.close()


def codec_costs(history: list[ModelMessage]) -> dict[str, float]:
    """µs to encode and decode the 200-message history, without a database."""
    stored = messages_to_stored(history)
    data = ModelMessagesTypeAdapter.dump_json(history)

    def best(call: Callable[[], object]) -> float:
        runs = []
        for _ in range(5):
            started = time.perf_counter()
            for _ in range(10):
                call()
            runs.append((time.perf_counter() - started) / 10 * 1e6)
        return min(runs)

    return {
        "anvia encode": best(lambda: messages_to_stored(history)),
        "anvia decode": best(lambda: stored_to_messages(stored)),
        "glue encode": best(lambda: ModelMessagesTypeAdapter.dump_json(history)),
        "glue decode": best(lambda: ModelMessagesTypeAdapter.validate_json(data)),
    }


def report(rounds: int, results: dict[str, list[float]], codec: dict[str, float]) -> None:
    print(
        f"{connection.vendor}: µs per call, median over {rounds} rounds "
        f"(load average {' '.join(_load_average())})"
    )
    print()
    print("| call | anvia-django | glue | anvia / glue | best / best |")
    print("|---|---:|---:|---:|---:|")
    for what, label in (
        ("append", "append a run's 4 messages"),
        ("load", f"load a {TURNS}-turn history ({TURNS * 4} messages)"),
    ):
        ours, theirs = results[f"{ANVIA} {what}"], results[f"{GLUE} {what}"]
        mine, glue = statistics.median(ours), statistics.median(theirs)
        print(
            f"| {label} | {mine:,.0f} | {glue:,.0f} | {mine / glue:.2f} "
            f"| {min(ours) / min(theirs):.2f} |"
        )
    print()
    print(
        f"Codec alone, the whole history: encode {codec['anvia encode']:,.0f} µs "
        f"(glue {codec['glue encode']:,.0f}), decode {codec['anvia decode']:,.0f} µs "
        f"(glue {codec['glue decode']:,.0f})."
    )
    print()


def _load_average() -> list[str]:
    try:
        with open("/proc/loadavg") as loadavg:
            return loadavg.read().split()[:3]
    except OSError:
        return ["unknown"]


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 6)
