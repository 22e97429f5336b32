"""Append workloads: the store, the raw driver and the peers, interleaved.

W1  one message per call, sessions interleaved, one task
W2  the same from 16 asyncio tasks under plain ``asyncio.gather`` (an arq
    or consumer worker: no request, no ``async_to_sync`` around them)
W3  turn batches of four messages per call
W8  eight writers appending to one session at once
W9  the W1 schedule from 4 tasks, and the speed-up from 1 to 16 tasks
    (W1 over W2) of the store and each peer beside the raw driver's

Every contender runs every repeat, in a rotating order, on emptied tables;
after its first repeat each one's stored sessions are read back through its
own API and compared with what was appended.

A peer that raises, stalls or stores the wrong messages is marked failed for
that workload, with its error, and sits out the rest of that workload's
repeats; the store's and the other contenders' rows are kept. The store or
the raw driver storing the wrong messages is an error of the run, reported
beside the rows; either one raising ends the append workloads.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from django.conf import settings

from anvia_django.core.memory.types import MemoryAppendInput, MemoryContext, Message
from anvia_django.store import DjangoMemoryStore

from .database import empty_tables
from .peers import Peer
from .raw import Baseline
from .settings import PREPARED_ALIAS
from .timing import Row
from .workloads import QUICK, SMOKE, Append, Sizes, batch_schedule, single_message_schedule, user_of

STALL_SECONDS = float(os.environ.get("ANVIA_BENCH_STALL_SECONDS", 600))
"""A contender that takes longer for one measurement fails the run, named."""
SLOW_PEER_FACTOR = 3.0
"""Beyond this many times the store's time, more repeats would not change
which of the two is faster: such a peer's cell runs fewer of them."""
STORE = "anvia-django"
STORE_PREPARED = "anvia-django, prepared statements"
"""The store on PostgreSQL with server-side binding and prepared statements."""
RAW = "raw driver"


@dataclass
class Contender:
    name: str
    append: Callable[[str, int, str, int, list[Message]], Awaitable[None]]
    """``(session, lane, run id, turn, messages)``; lane is the task's number."""
    load: Callable[[str], Awaitable[list[Message]]]
    reset: Callable[[], Awaitable[None]]
    prepare: Callable[[str, int, list[Message]], None] | None = None
    is_peer: bool = False


def store_contender(store: DjangoMemoryStore, name: str = STORE) -> Contender:
    async def append(s: str, lane: int, run_id: str, turn: int, messages: list[Message]) -> None:
        await store.append(
            MemoryAppendInput(MemoryContext(s, user_id=user_of(s)), run_id, turn, messages)
        )

    async def load(s: str) -> list[Message]:
        return await store.load(MemoryContext(s, user_id=user_of(s)))

    return Contender(name, append, load, _empty_app_tables)


def raw_contender(baseline: Baseline) -> Contender:
    async def append(s: str, lane: int, run_id: str, turn: int, messages: list[Message]) -> None:
        await baseline.append(s, user_of(s), run_id, turn, messages)

    return Contender(RAW, append, baseline.load, _empty_app_tables)


def peer_contender(peer: Peer) -> Contender:
    async def append(s: str, lane: int, run_id: str, turn: int, messages: list[Message]) -> None:
        await peer.append(s, lane, messages)

    prepare = getattr(peer, "prepare", None)
    return Contender(peer.name, append, peer.load, peer.reset, prepare, is_peer=True)


def describe(error: BaseException) -> str:
    """One line for the report: the type and the first line of the message."""
    lines = str(error).strip().splitlines()
    text = f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__
    return text if len(text) <= 300 else text[:297] + "..."


async def _empty_app_tables() -> None:
    empty_tables()


def split(schedule: list[Append], tasks: int) -> list[list[Append]]:
    """Give each task whole sessions, so no two tasks race on one session."""
    parts: list[list[Append]] = [[] for _ in range(tasks)]
    for item in schedule:
        parts[int(item[0][1:]) % tasks].append(item)
    return parts


def one_session_writers(writers: int, per_writer: int) -> list[list[Append]]:
    """W8: each writer's own numbered messages, all to session ``s0``."""
    return [
        [
            ("s0", f"run-w{w}", 1, [{"role": "user", "content": f"writer {w} message {i}"}])
            for i in range(per_writer)
        ]
        for w in range(writers)
    ]


@dataclass
class Case:
    workload: str
    what: str
    lanes: list[list[Append]]
    """One list of appends per concurrent task."""
    check: Callable[[dict[str, list[Message]]], str | None]
    """Given each session's stored messages, an error or ``None``."""

    @property
    def calls(self) -> int:
        return sum(len(lane) for lane in self.lanes)

    @property
    def sessions(self) -> list[str]:
        return sorted({item[0] for lane in self.lanes for item in lane})


def expect_in_order(schedule: list[Append]) -> Callable[[dict[str, list[Message]]], str | None]:
    expected: dict[str, list[Message]] = {}
    for session, _, _, messages in schedule:
        expected.setdefault(session, []).extend(messages)

    def check(stored: dict[str, list[Message]]) -> str | None:
        for session, messages in expected.items():
            if stored.get(session) != messages:
                got = stored.get(session)
                return f"session {session}: {len(got or [])} messages stored, not the appended ones"
        return None

    return check


def expect_each_writer_in_order(
    lanes: list[list[Append]],
) -> Callable[[dict[str, list[Message]]], str | None]:
    def check(stored: dict[str, list[Message]]) -> str | None:
        messages = stored.get("s0", [])
        total = sum(len(lane) for lane in lanes)
        if len(messages) != total:
            return f"{len(messages)} messages stored, {total} appended"
        for lane in lanes:
            mine = [m for _, _, _, batch in lane for m in batch]
            seen = [m for m in messages if m in mine]
            if seen != mine:
                return f"the messages of {lane[0][1]} are stored out of order"
        return None

    return check


def tasks_case(workload: str, what: str, schedule: list[Append], tasks: int) -> Case:
    lanes = [schedule] if tasks == 1 else split(schedule, tasks)
    return Case(workload, what, lanes, expect_in_order(schedule))


async def time_one(contender: Contender, case: Case) -> float:
    async def lane_work(number: int, lane: list[Append]) -> None:
        for session, run_id, turn, messages in lane:
            await contender.append(session, number, run_id, turn, messages)

    await contender.reset()
    if contender.prepare is not None:
        for number, lane in enumerate(case.lanes):
            for session, _, _, messages in lane:
                contender.prepare(session, number, messages)
    started = time.perf_counter()
    lanes = [asyncio.ensure_future(lane_work(n, lane)) for n, lane in enumerate(case.lanes)]
    try:
        done, pending = await asyncio.wait(
            lanes, timeout=STALL_SECONDS, return_when=asyncio.FIRST_EXCEPTION
        )
        elapsed = time.perf_counter() - started
        for lane_task in done:
            if (error := lane_task.exception()) is not None:
                raise error
        if pending:
            raise RuntimeError(
                f"{contender.name} did not finish {case.workload} in {STALL_SECONDS:g} s"
            )
        return elapsed
    finally:
        # The other lanes would go on after one raises: stop them before the
        # next contender's reset empties the tables under them.
        for lane_task in lanes:
            lane_task.cancel()
        await asyncio.gather(*lanes, return_exceptions=True)


async def verify(contender: Contender, case: Case) -> str | None:
    stored = {session: await contender.load(session) for session in case.sessions}
    return case.check(stored)


async def measure_case(
    contenders: list[Contender],
    case: Case,
    repeats: int,
    problems: list[str],
    failed: dict[str, str],
    slow_repeats: int | None = None,
) -> dict[str, list[float]]:
    """Seconds of each repeat per contender, order rotated every repeat.

    A peer that fails is entered in ``failed`` (name -> error) and left out
    of the later repeats and of the result; peers already in it do not run.
    A peer more than ``SLOW_PEER_FACTOR`` times the store's time in the first
    repeat runs ``slow_repeats`` in all, when given.
    """
    times: dict[str, list[float]] = {c.name: [] for c in contenders if c.name not in failed}
    wanted = dict.fromkeys(times, repeats)
    for repeat in range(repeats):
        shift = repeat % len(contenders)
        for contender in contenders[shift:] + contenders[:shift]:
            if contender.name in failed or len(times[contender.name]) >= wanted[contender.name]:
                continue
            try:
                times[contender.name].append(await time_one(contender, case))
                problem = await verify(contender, case) if repeat == 0 else None
            except Exception as error:
                if not contender.is_peer:
                    raise
                failed[contender.name] = f"repeat {repeat + 1} of {repeats}: {describe(error)}"
                continue
            if problem is not None:
                if contender.is_peer:
                    failed[contender.name] = f"wrong messages stored: {problem}"
                else:
                    problems.append(f"{case.workload} {contender.name}: {problem}")
        if repeat == 0 and slow_repeats is not None:
            store = next(c.name for c in contenders if not c.is_peer)
            for contender in contenders:
                mine = times.get(contender.name)
                if contender.is_peer and mine and mine[0] > SLOW_PEER_FACTOR * times[store][0]:
                    wanted[contender.name] = min(repeats, slow_repeats)
    return {name: values for name, values in times.items() if name not in failed}


def cases(sizes: Sizes) -> list[Case]:
    size = f"({sizes.sessions} sessions x {sizes.messages_per_session} messages)"
    single = single_message_schedule(sizes)
    writers = one_session_writers(sizes.one_session_writers, sizes.one_session_appends)
    return [
        tasks_case("W1", f"append 1 message per call {size}", single, 1),
        tasks_case(
            "W2",
            f"append 1 message per call, {sizes.concurrency} asyncio tasks {size}",
            single,
            sizes.concurrency,
        ),
        tasks_case("W9", f"append 1 message per call, 4 asyncio tasks {size}", single, 4),
        tasks_case("W3", f"append turn batches of 4 messages {size}", batch_schedule(sizes), 1),
        Case(
            "W8",
            f"{len(writers)} writers appending to one session at once"
            f" ({sizes.one_session_appends} messages each)",
            writers,
            expect_each_writer_in_order(writers),
        ),
    ]


async def append_rows(
    store: DjangoMemoryStore,
    baseline: Baseline,
    peers: list[Peer],
    sizes: Sizes,
    notes: list[str],
    errors: list[str],
    only: frozenset[str] = frozenset(),
) -> list[Row]:
    contenders = [store_contender(store), raw_contender(baseline)]
    if PREPARED_ALIAS in settings.DATABASES:
        prepared = DjangoMemoryStore(using=PREPARED_ALIAS)
        contenders.append(store_contender(prepared, STORE_PREPARED))
    opened: list[Peer] = []
    not_opened: dict[str, str] = {}
    try:
        for peer in peers:
            try:
                await peer.open(sizes.concurrency)
            except Exception as error:
                not_opened[peer.name] = f"setup: {describe(error)}"
                print(f"       {peer.name} failed to open: {describe(error)}", flush=True)
                continue
            opened.append(peer)
            contenders.append(peer_contender(peer))
        rows = []
        medians: dict[str, dict[str, float]] = {}
        failures: dict[str, dict[str, str]] = {}
        problems: list[str] = []
        for case in cases(sizes):
            # W9's speed-up row needs W1 and W2.
            wanted = only | ({"W1", "W2"} if "W9" in only else set())
            if only and case.workload not in wanted:
                continue
            print(f"     {case.workload} {case.what} ...", flush=True)
            started = time.monotonic()
            # --quick and --smoke stay short: the peers join W1 only, which
            # still runs (and checks) every peer's code.
            with_peers = sizes not in (QUICK, SMOKE) or case.workload == "W1"
            joined = contenders if with_peers else contenders[:2]
            failed = dict(not_opened) if with_peers else {}
            times = await measure_case(
                joined, case, sizes.write_repeats, problems, failed, sizes.slow_peer_repeats
            )
            result = {name: statistics.median(values) for name, values in times.items()}
            for name, why in failed.items():
                if name not in not_opened:
                    print(f"       {name} failed: {why}", flush=True)
            each = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in result.items())
            print(f"       {time.monotonic() - started:.0f} s (medians: {each})", flush=True)
            medians[case.workload] = result
            failures[case.workload] = failed
            peer_times = {k: v for k, v in result.items() if k not in (STORE, RAW)}
            fewer = {k: len(v) for k, v in times.items() if len(v) < sizes.write_repeats}
            rows.append(
                Row(
                    case.workload,
                    case.what,
                    case.calls,
                    result[STORE],
                    result[RAW],
                    sizes.write_repeats,
                    peers=peer_times,
                    failed=failed,
                    peer_repeats=fewer,
                )
            )
        if "W1" in medians and "W2" in medians:
            rows.append(speed_up_row(medians, failures, sizes))
        # The rows stay: a wrong result is reported beside its timings.
        errors += [f"wrong messages stored: {problem}" for problem in problems]
        if not problems:
            notes.append(
                "Append correctness: the sessions of the store, the raw driver and every peer"
                " not marked failed were read back through each one's own API and matched what"
                " was appended (order, content; W8: each writer's order)."
            )
        return rows
    finally:
        for peer in opened:
            try:
                await peer.close()
            except Exception as error:
                # Its rows are measured already; a failed close only leaks.
                print(f"       {peer.name} failed to close: {describe(error)}", flush=True)


def speed_up_row(
    medians: dict[str, dict[str, float]], failures: dict[str, dict[str, str]], sizes: Sizes
) -> Row:
    """Time at 16 tasks over time at 1 task: below 1 is a speed-up.

    The ratio to the raw driver's is the inverse of the share of its
    speed-up that a contender keeps: at most 1.25x keeps 80% of it.
    """
    one, many = medians["W1"], medians["W2"]
    slowdown = {name: many[name] / one[name] for name in one if name in many}
    failed = {
        name: f"in {workload}: {error}"
        for workload in ("W2", "W1")
        for name, error in failures[workload].items()
    }
    return Row(
        "W9",
        f"time at {sizes.concurrency} tasks over time at 1 task (W2 / W1)",
        1,
        slowdown.pop(STORE),
        slowdown.pop(RAW),
        sizes.write_repeats,
        peers=slowdown,
        unit="x",
        failed=failed,
    )
