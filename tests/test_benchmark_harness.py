"""The benchmark harness keeps going when a peer library fails.

No database and no clock: fake contenders that append to dicts, so these
check what the harness does with a failure, not how fast anything is.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from anvia_django.core.memory.types import Message
from benchmarks import appends
from benchmarks.appends import Case, Contender, expect_in_order, measure_case, time_one
from benchmarks.report import render
from benchmarks.timing import Row

SCHEDULE = [(f"s{i % 2}", "run-1", 1, [{"role": "user", "content": f"m{i}"}]) for i in range(6)]


def fake(
    name: str,
    *,
    is_peer: bool = True,
    fail_on_call: int | None = None,
    drop_first: bool = False,
) -> Contender:
    stored: dict[str, list[Message]] = {}
    calls = 0

    async def append(session: str, lane: int, run_id: str, turn: int, batch: list[Message]) -> None:
        nonlocal calls
        calls += 1
        if calls == fail_on_call:
            raise RuntimeError("database is locked\n[SQL: INSERT ...]")
        stored.setdefault(session, []).extend(batch)

    async def load(session: str) -> list[Message]:
        return stored.get(session, [])[1 if drop_first else 0 :]

    async def reset() -> None:
        stored.clear()

    return Contender(name, append, load, reset, is_peer=is_peer)


def case() -> Case:
    return Case("W1", "six appends", [SCHEDULE], expect_in_order(SCHEDULE))


def test_a_failing_peer_is_reported_and_the_others_keep_their_medians() -> None:
    failed: dict[str, str] = {}
    problems: list[str] = []
    # The peer's eighth call is the second call of its second repeat.
    contenders = [
        fake("store", is_peer=False),
        fake("raw", is_peer=False),
        fake("peer", fail_on_call=8),
    ]

    times = asyncio.run(measure_case(contenders, case(), 3, problems, failed))

    assert {name: len(values) for name, values in times.items()} == {"store": 3, "raw": 3}
    assert failed == {"peer": "repeat 2 of 3: RuntimeError: database is locked"}
    assert problems == []


def test_a_peer_storing_the_wrong_messages_is_failed_not_the_run() -> None:
    failed: dict[str, str] = {}
    problems: list[str] = []
    contenders = [fake("store", is_peer=False), fake("peer", drop_first=True)]

    times = asyncio.run(measure_case(contenders, case(), 2, problems, failed))

    assert set(times) == {"store"}
    assert failed["peer"].startswith("wrong messages stored: session s0")
    assert problems == []


def test_a_peer_far_slower_than_the_store_runs_fewer_repeats(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seconds = {"store": 1.0, "slow": 3.5, "close": 2.9}

    async def time_one(contender: Contender, case: Case) -> float:
        await contender.reset()
        for session, run_id, turn, batch in case.lanes[0]:
            await contender.append(session, 0, run_id, turn, batch)
        return seconds[contender.name]

    monkeypatch.setattr(appends, "time_one", time_one)
    contenders = [fake("store", is_peer=False), fake("slow"), fake("close")]

    times = asyncio.run(measure_case(contenders, case(), 5, [], {}, slow_repeats=3))

    assert {name: len(values) for name, values in times.items()} == {
        "store": 5,
        "slow": 3,
        "close": 5,
    }


def test_the_store_failing_stops_the_measurement() -> None:
    contenders = [fake("store", is_peer=False, fail_on_call=2), fake("peer")]

    with pytest.raises(RuntimeError, match="database is locked"):
        asyncio.run(measure_case(contenders, case(), 2, [], {}))


def test_the_other_lanes_stop_when_one_fails() -> None:
    cancelled: list[int] = []

    async def append(session: str, lane: int, run_id: str, turn: int, batch: list[Message]) -> None:
        if lane == 0:
            raise RuntimeError("database is locked")
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.append(lane)
            raise

    async def nothing(*_: Any) -> Any:
        return []

    contender = Contender("peer", append, nothing, nothing, is_peer=True)
    lanes = [[item] for item in SCHEDULE[:3]]

    with pytest.raises(RuntimeError):
        asyncio.run(time_one(contender, Case("W2", "three lanes", lanes, lambda _: None)))
    assert sorted(cancelled) == [1, 2]


def result(backend: str, rows: list[Row], errors: tuple[str, ...] = ()) -> dict[str, Any]:
    note = "Append correctness: every session matched."
    return {"backend": backend, "server": backend, "baseline": "raw", "plans": []} | {
        "rows": [row.as_dict() for row in rows],
        "notes": [note],
        "errors": list(errors),
    }


def test_the_report_marks_failed_peers_and_gives_each_note_once() -> None:
    row = Row("W2", "16 tasks", 10, 2.0, 1.0, 5, peers={"A": 3.0}, failed={"B": "locked"})
    stopped = result("postgres", [row], ("W5 stopped: OperationalError: gone",))
    text = render([result("sqlite", [row]), stopped], "cmd", {"mariadb": "died"})

    assert "| sqlite | W2 | 16 tasks | 2.00x | 1.00x | 3.00x | failed | yes |" in text
    assert "- mariadb: no results (died)." in text
    assert "- sqlite W2: B failed (locked)." in text
    assert "- postgres: W5 stopped: OperationalError: gone" in text
    assert text.count("Append correctness") == 1
