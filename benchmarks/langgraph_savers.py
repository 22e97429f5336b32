"""``DjangoSaver`` beside LangGraph's official savers, in the same run.

    nice -n 10 env ANVIA_BENCH_DB=postgres python -m benchmarks.langgraph_savers \
        [ROUNDS] [--turns 200] [--long 10000]

A chat graph (``MessagesState``, one node answering each question, no model
and no network) runs once on an in-memory recording saver; what it asked its
saver to store, super-step by super-step, is then replayed on each saver, so
every saver stores the same calls. The official savers are
``langgraph-checkpoint-postgres`` ``PostgresSaver`` on the PostgreSQL run (the
same database, its own psycopg connection, as its documentation sets it up)
and ``langgraph-checkpoint-sqlite`` ``SqliteSaver`` on the SQLite run (its own
file beside the benchmark's). MariaDB has no official saver: its run shows
``DjangoSaver`` alone.

Lanes, µs per call, medians over the rounds (which alternate the savers'
order), and the ratio of each saver's fastest round (steadier on a shared
machine: the slow rounds are other work's):

- put + put_writes of one super-step of a 50-turn chat (two super-steps a turn:
  the input, then the answer), a fresh thread each round;
- get_tuple of the latest checkpoint of a 50-turn thread;
- list of 100 checkpoints of that thread (every tuple with its values);
- the async API of ``DjangoSaver`` for the first two (``aput``/``aput_writes``,
  ``aget_tuple``), with the official async saver beside it where there is one;
- on PostgreSQL, the first three again through Django's server-side binding
  (the settings' ``prepared`` alias: psycopg's server-side cursor, statements
  prepared on reuse), the driver settings ``PostgresSaver`` runs with.

Once per saver: the bytes its value columns hold after ``--turns`` turns (the
database's stored size of each column: ``pg_column_size`` on PostgreSQL,
after its compression; the byte length elsewhere), beside the transcript's
own JSON; and ``prune`` (keep_latest) then ``delete_thread`` of a thread of
``--long`` small checkpoints, timed once. The defaults (3 rounds, 50 turns,
500 checkpoints) run in seconds; the issue's sizes are ``--turns 200 --long 10000``.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import os
import random
import sqlite3
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any, cast

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchmarks.settings")
django.setup()

from django.conf import settings  # noqa: E402
from django.db import connection, connections  # noqa: E402
from langchain_core.messages import AIMessage, HumanMessage, messages_to_dict  # noqa: E402
from langchain_core.runnables import RunnableConfig  # noqa: E402
from langgraph.checkpoint.base import (  # noqa: E402
    BaseCheckpointSaver,
    create_checkpoint,
    empty_checkpoint,
)
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.graph import START, MessagesState, StateGraph  # noqa: E402

from anvia_django.integrations.langgraph import DjangoSaver  # noqa: E402
from anvia_django.integrations.langgraph.models import (  # noqa: E402
    LangGraphBlob,
    LangGraphCheckpoint,
    LangGraphWrite,
)
from anvia_django.integrations.langgraph.places import FOLLOWS_LATEST  # noqa: E402

from . import settings as bench_settings  # noqa: E402
from .database import create_fresh_database, pg_conninfo  # noqa: E402
from .settings import PREPARED_ALIAS  # noqa: E402

TIMED_TURNS = 50
LIST_SIZE = 100
ANVIA = "DjangoSaver"
ANVIA_PREPARED = "DjangoSaver, server-side binding"


WORDS = [
    *("order", "parcel", "arrive", "tuesday", "warehouse", "refund", "invoice"),
    *("account", "address", "courier", "delay", "tracking", "number", "payment"),
    *("card", "delivered", "missing", "damaged", "replace", "week"),
]


def text(seed: int) -> str:
    """About 400 characters of words drawn at random (seeded): a message that
    compresses about as well as prose, not as a repeated phrase would."""
    draw = random.Random(seed)
    words: list[str] = []
    while sum(len(word) + 1 for word in words) < 400:
        words.append(draw.choice(WORDS))
    return " ".join(words)


def question(turn: int) -> str:
    """400 such messages make the issue's 160 KB transcript."""
    return f"question {turn}: " + text(2 * turn)


def answer(turn: int) -> str:
    return f"answer {turn}: " + text(2 * turn + 1)


class Recorder(InMemorySaver):
    """What a graph asks its saver to store, in order, as deep copies."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        self.calls.append(
            ("put", copy.deepcopy((config, checkpoint, metadata, dict(new_versions))))
        )
        return super().put(config, checkpoint, metadata, new_versions)

    def put_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        self.calls.append(("put_writes", copy.deepcopy((config, list(writes), task_id, task_path))))
        super().put_writes(config, writes, task_id, task_path)


def chat_steps(turns: int) -> tuple[list[list[tuple[str, tuple[Any, ...]]]], int]:
    """The saver calls of a ``turns``-turn chat, grouped by super-step (a put
    and the writes that follow it), and the size of the transcript's JSON."""

    def reply(state: MessagesState) -> dict[str, Any]:
        turn = len(state["messages"]) // 2
        return {"messages": [AIMessage(answer(turn), id=f"a-{turn}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("reply", reply)
    builder.add_edge(START, "reply")
    recorder = Recorder()
    graph = builder.compile(checkpointer=recorder)
    config: RunnableConfig = {"configurable": {"thread_id": "recorded"}}
    for turn in range(turns):
        graph.invoke(
            cast(Any, {"messages": [HumanMessage(question(turn), id=f"q-{turn}")]}), config
        )
    transcript = graph.get_state(config).values["messages"]
    size = len(json.dumps(messages_to_dict(transcript)).encode())
    steps: list[list[tuple[str, tuple[Any, ...]]]] = []
    for call in recorder.calls:
        if call[0] == "put" or not steps:
            steps.append([])
        steps[-1].append(call)
    return steps, size


def on_thread(args: tuple[Any, ...], thread_id: str) -> tuple[Any, ...]:
    config = copy.copy(args[0])
    configurable = {**config["configurable"], "thread_id": thread_id}
    if configurable.get("checkpoint_id"):
        # What a graph's run puts with after DjangoSaver's get_tuple of the
        # latest: DjangoSaver checks the parent is still the latest (the
        # official savers ignore the key, as LangGraph's own "__" keys).
        configurable[FOLLOWS_LATEST] = True
    config["configurable"] = configurable
    return (config, *args[1:])


def replay(
    saver: BaseCheckpointSaver[Any], step: list[tuple[str, tuple[Any, ...]]], thread: str
) -> None:
    for method, args in step:
        getattr(saver, method)(*on_thread(args, thread))


async def areplay(
    saver: BaseCheckpointSaver[Any], step: list[tuple[str, tuple[Any, ...]]], thread: str
) -> None:
    for method, args in step:
        await getattr(saver, "a" + method)(*on_thread(args, thread))


@contextmanager
def official_saver() -> Iterator[tuple[str, BaseCheckpointSaver[Any] | None, Any]]:
    """The official sync saver of this database, its async one (or None)."""
    if settings.BACKEND == "postgres":
        from langgraph.checkpoint.postgres import PostgresSaver
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

        with PostgresSaver.from_conn_string(pg_conninfo()) as saver:
            saver.setup()
            yield "PostgresSaver", saver, lambda: AsyncPostgresSaver.from_conn_string(pg_conninfo())
    elif settings.BACKEND == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        path = official_sqlite_file()
        for suffix in ("", "-wal", "-shm"):
            path_ = path + suffix
            if os.path.exists(path_):
                os.unlink(path_)
        conn = sqlite3.connect(path, check_same_thread=False)
        try:
            lite = SqliteSaver(conn)
            lite.setup()
            yield "SqliteSaver", lite, lambda: AsyncSqliteSaver.from_conn_string(path)
        finally:
            conn.close()
    else:
        yield "", None, None


def official_sqlite_file() -> str:
    return str(bench_settings.SQLITE_FILE.with_name("anvia-bench-langgraph-official.sqlite3"))


def stored_bytes(system: str, thread_id: str) -> int:
    """Bytes of the value columns of a thread's rows, as the database stores them."""
    if system == ANVIA:
        tables = [
            (LangGraphCheckpoint._meta.db_table, ("checkpoint", "metadata")),
            (LangGraphBlob._meta.db_table, ("blob",)),
            (LangGraphWrite._meta.db_table, ("blob",)),
        ]
    elif system == "PostgresSaver":
        tables = [
            ("checkpoints", ("checkpoint", "metadata")),
            ("checkpoint_blobs", ("blob",)),
            ("checkpoint_writes", ("blob",)),
        ]
    else:
        tables = [("checkpoints", ("checkpoint", "metadata")), ("writes", ("value",))]
    if settings.BACKEND == "postgres":
        size = "coalesce(pg_column_size({}), 0)"
    elif settings.BACKEND == "mariadb":
        size = "coalesce(length({}), 0)"
    else:
        size = "coalesce(length(CAST({} AS BLOB)), 0)"
    quote = connection.ops.quote_name if system != "SqliteSaver" else (lambda name: f'"{name}"')
    total = 0
    for table, columns in tables:
        sql = (
            f"SELECT coalesce(sum({' + '.join(size.format(quote(c)) for c in columns)}), 0) "
            f"FROM {table} WHERE thread_id = %s"
        )
        if system == "SqliteSaver":
            conn = sqlite3.connect(official_sqlite_file())
            try:
                total += int(conn.execute(sql.replace("%s", "?"), (thread_id,)).fetchone()[0])
            finally:
                conn.close()
        else:
            with connection.cursor() as cursor:
                cursor.execute(sql, [thread_id])
                total += int(cursor.fetchone()[0])
    return total


def long_thread(saver: BaseCheckpointSaver[Any], thread_id: str, count: int) -> None:
    """``count`` small checkpoints on one thread, each after the last."""
    config: Any = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    checkpoint = empty_checkpoint()
    version = None
    for step in range(count):
        version = saver.get_next_version(version, None)
        checkpoint = create_checkpoint(checkpoint, None, step)
        checkpoint["channel_values"] = {"count": step}
        checkpoint["channel_versions"] = {"count": version}
        config = saver.put(
            config,
            checkpoint,
            {"source": "loop", "step": step},
            dict(checkpoint["channel_versions"]),
        )


def timed(call: Callable[[int], Any], calls: int) -> float:
    started = time.perf_counter()
    for i in range(calls):
        call(i)
    return (time.perf_counter() - started) / calls * 1e6


def atimed(call: Callable[[int], Any], calls: int) -> float:
    async def run() -> float:
        started = time.perf_counter()
        for i in range(calls):
            await call(i)
        return (time.perf_counter() - started) / calls * 1e6

    return asyncio.run(run())


def main(rounds: int, turns: int, long: int) -> None:
    create_fresh_database()
    steps, size = chat_steps(TIMED_TURNS)
    big_steps, transcript = chat_steps(turns) if turns != TIMED_TURNS else (steps, size)
    results: dict[tuple[str, str], list[float]] = {}
    once: dict[tuple[str, str], float] = {}
    with ExitStack() as stack:
        name, official, official_async = stack.enter_context(official_saver())
        savers: list[tuple[str, BaseCheckpointSaver[Any]]] = [(ANVIA, DjangoSaver())]
        if official is not None:
            savers.append((name, official))
        for _system, saver in savers:
            for step in steps:
                replay(saver, step, "history")
        latest: RunnableConfig = {"configurable": {"thread_id": "history", "checkpoint_ns": ""}}
        expected = savers[0][1].get_tuple(latest)
        assert expected is not None
        assert len(list(savers[0][1].list(latest, limit=LIST_SIZE))) == LIST_SIZE
        # The same tables through Django's server-side binding (psycopg's
        # Cursor, statements prepared on reuse), a setting of Django's own:
        # the timed lanes only, its history the default alias's.
        timed_savers = list(savers)
        if PREPARED_ALIAS in settings.DATABASES:
            timed_savers.insert(1, (ANVIA_PREPARED, DjangoSaver(using=PREPARED_ALIAS)))
        for round_number in range(rounds):
            order = timed_savers if round_number % 2 == 0 else list(reversed(timed_savers))
            for system, saver in order:
                thread = f"put-{round_number}" + ("-prepared" if system == ANVIA_PREPARED else "")

                def put_step(i: int, saver: Any = saver, thread: str = thread) -> None:
                    replay(saver, steps[i], thread)

                def get(i: int, saver: Any = saver) -> None:
                    found = saver.get_tuple(latest)
                    assert (
                        found.checkpoint["channel_values"] == expected.checkpoint["channel_values"]
                    )

                def listed(i: int, saver: Any = saver) -> None:
                    assert len(list(saver.list(latest, limit=LIST_SIZE))) == LIST_SIZE

                results.setdefault((system, "put"), []).append(timed(put_step, len(steps)))
                results.setdefault((system, "get"), []).append(timed(get, 50))
                results.setdefault((system, "list"), []).append(timed(listed, 5))
            asynchronous(results, savers[0][1], official_async, name, steps, latest, round_number)
        for system, saver in savers:
            for step in big_steps:
                replay(saver, step, "long-chat")
            once[system, "bytes"] = stored_bytes(system, "long-chat")
            long_thread(saver, "many", long)
            if system != "SqliteSaver":  # SqliteSaver has no prune
                started = time.perf_counter()
                saver.prune(["many"])
                once[system, "prune"] = (time.perf_counter() - started) * 1e3
                long_thread(saver, "many", long)
            started = time.perf_counter()
            saver.delete_thread("many")
            once[system, "delete"] = (time.perf_counter() - started) * 1e3
    connections.close_all()
    report(rounds, turns, long, transcript, [s for s, _ in savers], results, once)
    if (ANVIA_PREPARED, "put") in results:
        prepared_report(results, savers[1][0])


def asynchronous(
    results: dict[tuple[str, str], list[float]],
    ours: BaseCheckpointSaver[Any],
    official_async: Any,
    name: str,
    steps: list[list[tuple[str, tuple[Any, ...]]]],
    latest: Any,
    round_number: int,
) -> None:
    """The async API: DjangoSaver's, and the official async saver's in a
    context of its own (it opens its own connection)."""

    async def lanes(system: str, saver: BaseCheckpointSaver[Any]) -> None:
        thread = f"aput-{round_number}"
        started = time.perf_counter()
        for step in steps:
            await areplay(saver, step, thread)
        results.setdefault((system, "aput"), []).append(
            (time.perf_counter() - started) / len(steps) * 1e6
        )
        started = time.perf_counter()
        for _ in range(50):
            assert await saver.aget_tuple(latest) is not None
        results.setdefault((system, "aget"), []).append((time.perf_counter() - started) / 50 * 1e6)

    async def run() -> None:
        await lanes(ANVIA, ours)
        if official_async is not None:
            async with official_async() as saver:
                await lanes(f"Async{name}", saver)

    asyncio.run(run())


def report(
    rounds: int,
    turns: int,
    long: int,
    transcript: int,
    systems: list[str],
    results: dict[tuple[str, str], list[float]],
    once: dict[tuple[str, str], float],
) -> None:
    from .database import server_version

    print(
        f"{server_version()}: µs per call, medians over {rounds} rounds "
        f"(load average {' '.join(f'{load:.2f}' for load in os.getloadavg())})"
    )
    print()
    official = systems[1] if len(systems) > 1 else None
    head = f"| call | {ANVIA} |" + (
        f" {official} | ratio | ratio of the fastest rounds |" if official else ""
    )
    print(head)
    print("|---|---:|" + ("---:|---:|---:|" if official else ""))
    lanes = [
        ("put", f"put + put_writes, one super-step of a {TIMED_TURNS}-turn chat"),
        ("get", "get_tuple, the latest"),
        ("list", f"list of {LIST_SIZE} checkpoints"),
    ]
    for lane, label in lanes:
        mine = statistics.median(results[ANVIA, lane])
        line = f"| {label} | {mine:,.0f} |"
        if official:
            theirs = statistics.median(results[official, lane])
            fastest = min(results[ANVIA, lane]) / min(results[official, lane])
            line += f" {theirs:,.0f} | {mine / theirs:.2f} | {fastest:.2f} |"
        print(line)
    for lane, label, sync_lane in (
        ("aput", "async: aput + aput_writes", "put"),
        ("aget", "async: aget_tuple", "get"),
    ):
        mine = statistics.median(results[ANVIA, lane])
        line = f"| {label} | {mine:,.0f} |"
        if official and (f"Async{official}", lane) in results:
            theirs = statistics.median(results[f"Async{official}", lane])
            fastest = min(results[ANVIA, lane]) / min(results[f"Async{official}", lane])
            line += f" {theirs:,.0f} (async) | {mine / theirs:.2f} | {fastest:.2f} |"
        print(line)
        hop = mine / statistics.median(results[ANVIA, sync_lane])
        print(f"|   (DjangoSaver async / its sync) | {hop:.2f}x |" + (" | | |" if official else ""))
    print()
    print(f"After {turns} turns ({2 * turns} messages; transcript JSON {transcript:,} bytes):")
    print()
    print(
        "| saver | bytes stored | / transcript | prune of "
        f"{long:,} (ms) | delete_thread of {long:,} (ms) |"
    )
    print("|---|---:|---:|---:|---:|")
    for system in systems:
        stored = once[system, "bytes"]
        prune = once.get((system, "prune"))
        print(
            f"| {system} | {stored:,.0f} | {stored / transcript:.1f}x | "
            f"{'n/a' if prune is None else f'{prune:,.0f}'} | {once[system, 'delete']:,.0f} |"
        )
    print()


def prepared_report(results: dict[tuple[str, str], list[float]], official: str) -> None:
    print(
        f"{ANVIA_PREPARED} (OPTIONS server_side_binding and prepare_threshold, "
        "the same tables), timed in the same rounds:"
    )
    print()
    print(f"| call | {ANVIA_PREPARED} | {official} | ratio | ratio of the fastest rounds |")
    print("|---|---:|---:|---:|---:|")
    for lane, label in (("put", "put + put_writes"), ("get", "get_tuple"), ("list", "list")):
        mine = statistics.median(results[ANVIA_PREPARED, lane])
        theirs = statistics.median(results[official, lane])
        fastest = min(results[ANVIA_PREPARED, lane]) / min(results[official, lane])
        print(f"| {label} | {mine:,.0f} | {theirs:,.0f} | {mine / theirs:.2f} | {fastest:.2f} |")
    print()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("rounds", nargs="?", type=int, default=3)
    parser.add_argument("--turns", type=int, default=50, help="turns before bytes are counted")
    parser.add_argument("--long", type=int, default=500, help="checkpoints pruned and deleted")
    options = parser.parse_args()
    main(options.rounds, options.turns, options.long)
