"""W1..W7 as issue 6 lists them, W10 (a job per ``asyncio.run``) and W11 (search); each
returns rows for the results table."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from asgiref.sync import sync_to_async
from django.conf import settings

from anvia_django.core.memory.types import (
    MemoryAppendInput,
    MemoryContext,
    MemoryConversationListOptions,
    Message,
)
from anvia_django.store import DjangoMemoryStore

from .database import empty_tables
from .fixtures import bulk_conversations, bulk_messages, chat_message, turn_batch
from .raw import Baseline
from .timing import Row, measure


@dataclass(frozen=True)
class Sizes:
    # 50, not 200 (before 2026-12-03): with five peers a full run of 200 took
    # about 80 minutes on two shared cores; ratios are what runs compare.
    sessions: int = 50
    messages_per_session: int = 20
    concurrency: int = 16
    long_session: int = 1_000
    long_loads: int = 20
    short_loads: int = 1_000
    list_small: int = 10_000
    list_large: int = 100_000
    list_calls: int = 100
    api_conversations: int = 10_000
    api_requests: int = 100
    memory_small: int = 10_000
    memory_large: int = 100_000
    write_repeats: int = 5
    slow_peer_repeats: int = 3
    """Repeats of a peer more than 3x slower than the store on a workload."""
    one_session_writers: int = 8
    one_session_appends: int = 50
    read_repeats: int = 7
    jobs: int = 200
    """W10: jobs that are each their own ``asyncio.run``."""
    search_messages: int = 1_000_000


QUICK = Sizes(
    sessions=20,
    messages_per_session=10,
    long_session=200,
    long_loads=5,
    short_loads=100,
    list_small=1_000,
    list_large=10_000,
    list_calls=20,
    api_conversations=1_000,
    api_requests=20,
    memory_small=1_000,
    memory_large=10_000,
    write_repeats=3,
    read_repeats=3,
    one_session_appends=10,
    jobs=20,
    search_messages=10_000,
)


SMOKE = Sizes(
    sessions=4,
    messages_per_session=5,
    concurrency=4,
    long_session=50,
    long_loads=1,
    short_loads=10,
    list_small=200,
    list_large=1_000,
    list_calls=3,
    api_conversations=200,
    api_requests=3,
    memory_small=200,
    memory_large=1_000,
    write_repeats=1,
    slow_peer_repeats=1,
    one_session_writers=4,
    one_session_appends=3,
    read_repeats=1,
    jobs=3,
    search_messages=1_000,
)
"""Every workload and peer once, at sizes that still run each code path: for
CI, so the harness cannot rot. Its figures mean nothing."""


@dataclass
class Bench:
    store: DjangoMemoryStore
    baseline: Baseline
    sizes: Sizes
    notes: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    """Checks the store or the raw driver failed: the run reports them and exits 1."""
    no_peers: bool = False
    only: frozenset[str] = frozenset()
    """Workloads to run (``--only``); empty for all."""


# One append of the W1/W2 schedule: (session, run id, turn, messages).
Append = tuple[str, str, int, list[Message]]


def single_message_schedule(sizes: Sizes) -> list[Append]:
    """W1: every session gets one message per call, sessions interleaved.

    Run ids change every four messages and two calls share a turn, as the
    runtime's per-message save policy produces them.
    """
    return [
        (f"s{s}", f"run-{k // 4}", k % 4 // 2 + 1, [chat_message(k)])
        for k in range(sizes.messages_per_session)
        for s in range(sizes.sessions)
    ]


def batch_schedule(sizes: Sizes) -> list[Append]:
    """W3: one call per turn of four messages."""
    return [
        (f"s{s}", f"run-{k}", 1, turn_batch(k))
        for k in range(sizes.messages_per_session // 4)
        for s in range(sizes.sessions)
    ]


def user_of(session: str) -> str:
    return f"user-{int(session[1:]) % 10}"


async def appends(bench: Bench) -> list[Row]:
    """W1-W3, W8, W9: the store beside the raw driver and the peers."""
    from .appends import append_rows
    from .peers import available_peers

    peers = [] if bench.no_peers else available_peers()
    if not bench.no_peers and settings.BACKEND == "mariadb":
        bench.notes.append(
            "MariaDB: no peer library ran (their async MySQL drivers, aiomysql or asyncmy,"
            " are not in the bench extra); the store is compared with the raw driver only."
        )
    return await append_rows(
        bench.store, bench.baseline, peers, bench.sizes, bench.notes, bench.errors, bench.only
    )


async def loads(bench: Bench) -> list[Row]:
    sizes = bench.sizes
    empty_tables()
    bulk_messages("long", sizes.long_session)
    short_sessions = [f"short-{i}" for i in range(200)]
    for session in short_sessions:
        bulk_messages(session, 20)
    rows = []

    long_context = MemoryContext("long")

    async def store_long() -> None:
        for _ in range(sizes.long_loads):
            await bench.store.load(long_context)

    async def raw_long() -> None:
        for _ in range(sizes.long_loads):
            await bench.baseline.load("long")

    store_s, raw_s = await measure(store_long, raw_long, sizes.read_repeats)
    rows.append(
        Row(
            "W4",
            f"load a {sizes.long_session:,}-message session",
            sizes.long_loads,
            store_s,
            raw_s,
            sizes.read_repeats,
        )
    )

    contexts = [MemoryContext(short_sessions[i % 200]) for i in range(sizes.short_loads)]

    async def store_short() -> None:
        for context in contexts:
            await bench.store.load(context)

    async def raw_short() -> None:
        for context in contexts:
            await bench.baseline.load(context.session_id)

    store_s, raw_s = await measure(store_short, raw_short, sizes.read_repeats)
    rows.append(
        Row("W4", "load 20-message sessions", sizes.short_loads, store_s, raw_s, sizes.read_repeats)
    )
    return rows


async def lists(bench: Bench) -> list[Row]:
    sizes = bench.sizes
    empty_tables()
    rows: list[Row] = []
    loaded = 0
    overall: dict[int, float] = {}
    for total in (sizes.list_small, sizes.list_large):
        bulk_conversations(loaded, total)
        loaded = total
        for user_id in (None, "user-7"):
            options = MemoryConversationListOptions(limit=50, user_id=user_id)

            async def store_list(options: MemoryConversationListOptions = options) -> None:
                for _ in range(sizes.list_calls):
                    await bench.store.inspector.list_conversations(options)

            async def raw_list(user_id: str | None = user_id) -> None:
                for _ in range(sizes.list_calls):
                    await bench.baseline.list(50, user_id)

            store_s, raw_s = await measure(store_list, raw_list, sizes.read_repeats)
            who = "overall" if user_id is None else "for one user"
            rows.append(
                Row(
                    "W5",
                    f"list 50 newest of {total:,} conversations, {who}",
                    sizes.list_calls,
                    store_s,
                    raw_s,
                    sizes.read_repeats,
                )
            )
            overall[total if user_id is None else -total] = store_s
    for sign, who in ((1, "overall"), (-1, "for one user")):
        rows.append(
            Row(
                "W5",
                f"list at {sizes.list_large:,} vs at {sizes.list_small:,} conversations, {who}",
                sizes.list_calls,
                overall[sign * sizes.list_large],
                overall[sign * sizes.list_small],
                sizes.read_repeats,
                baseline=f"store at {sizes.list_small:,}",
            )
        )
    return rows


async def plans(bench: Bench) -> list[tuple[str, str, str]]:
    """EXPLAIN the store's list and load queries on the W5 data (large size)."""

    from .explain import store_query_plans

    bulk_messages("long", bench.sizes.long_session)
    return await sync_to_async(store_query_plans)("long", "user-7")


async def api(bench: Bench) -> list[Row]:
    """W6: list and detail requests through Django's test client."""
    from .api import api_rows

    return await api_rows(bench)


async def memory(bench: Bench) -> list[Row]:
    """W7: peak memory of the paged API and the export command, by length."""

    from .api import memory_rows

    return await sync_to_async(memory_rows)(bench.sizes)


async def jobs(bench: Bench) -> list[Row]:
    """W10: a job that is its own ``asyncio.run`` (a Celery task, a management
    command): append a message and load the session, against the same calls
    made in one long-lived event loop. Both run in one worker thread, as a
    job runner's thread would (``asyncio.run`` cannot nest in the harness's
    own loop)."""
    empty_tables()
    count = bench.sizes.jobs
    store = bench.store

    async def job(number: int) -> None:
        context = MemoryContext(f"job-{number % 50}")
        await store.append(MemoryAppendInput(context, f"run-{number}", 1, [_job_message]))
        await store.load(context)

    def each_its_own_loop() -> None:
        for number in range(count):
            asyncio.run(job(number))

    def one_loop() -> None:
        async def all_jobs() -> None:
            for number in range(count):
                await job(number)

        asyncio.run(all_jobs())

    async def per_job() -> None:
        await asyncio.to_thread(each_its_own_loop)

    async def long_loop() -> None:
        await asyncio.to_thread(one_loop)

    job_s, loop_s = await measure(per_job, long_loop, bench.sizes.write_repeats)
    return [
        Row(
            "W10",
            "a job per asyncio.run: append + load (vs the same jobs in one long-lived loop)",
            count,
            job_s,
            loop_s,
            bench.sizes.write_repeats,
            target=1.5,
            baseline="one event loop",
        )
    ]


_job_message: Message = {"role": "user", "content": "a job's message"}


async def search(bench: Bench) -> list[Row]:
    """W11: content search among ``search_messages`` messages."""
    from .search import search_rows

    return await sync_to_async(search_rows)(bench.sizes.search_messages, bench.sizes.read_repeats)
