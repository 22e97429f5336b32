"""What encryption at rest costs an append and a load, beside the OpenAI
Agents SDK's ``EncryptedSession`` on the same workload.

    ANVIA_BENCH_DB=postgres python -m benchmarks.encryption_cost [ROUNDS]

One process, one connection, autocommit (each append its own transaction).
Rounds alternate encryption off and on, so drift in the machine hits both;
figures are medians of the rounds, with the ratio of the best rounds
beside them (on a busy machine, noise only adds). What matters is each
system's on/off ratio within this one run:

- append: 2 messages (a user turn and the answer, 200 and 400 characters)
  to one of 50 sessions, each of its own user (one data key per user);
- load: the whole transcript of a 20-message session of those sizes;
- load, large: the same with 3,000-character messages (tool results,
  pasted documents).

Then the floor: sealing and opening one message with AES-GCM alone (nonce,
associated data, base64), and the Agents SDK's Fernet token, measured in
isolation. Not the full benchmark harness (benchmarks/run.py): no
concurrency.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchmarks.settings")
django.setup()

from django.db import connection  # noqa: E402
from django.test import override_settings  # noqa: E402

from anvia_django.core.memory import MemoryAppendInput, MemoryContext  # noqa: E402
from anvia_django.core.memory.types import Message  # noqa: E402
from anvia_django.persistence import append_messages, load_messages  # noqa: E402

from .database import create_fresh_database  # noqa: E402
from .encryption_floor import floor_lines  # noqa: E402
from .encryption_peers import AgentsSessions  # noqa: E402

KEY = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="  # a benchmark key, never a real one
ENCRYPTED = {"ENCRYPTION": {"KEYS": {"k1": KEY}, "CURRENT": "k1"}}
SESSIONS = 50
CALLS = 200
SIZES = {"load": (200, 400), "load, large": (3000, 3000)}
ANVIA = "anvia-django"


def _turn(i: int, question: int = 200, answer: int = 400) -> list[Message]:
    return [
        {"role": "user", "content": f"question {i} " + "x" * question},
        {"role": "assistant", "content": f"answer {i} " + "y" * answer},
    ]


def _anvia_append(mode: str, round_number: int) -> Callable[[int], None]:
    def call(i: int) -> None:
        append_messages(
            MemoryAppendInput(
                context=MemoryContext(
                    f"{mode}-{i % SESSIONS}", user_id=f"user-{mode}-{i % SESSIONS}"
                ),
                run_id=f"run-{round_number}-{i}",
                turn=1,
                messages=_turn(i),
            )
        )

    return call


def _anvia_load(mode: str, what: str) -> Callable[[int], None]:
    context = MemoryContext(f"{what}-{mode}", user_id=f"loader-{mode}")

    def call(i: int) -> None:
        assert len(load_messages(context)) == 20

    return call


def _anvia_seed(mode: str) -> None:
    for what, (question, answer) in SIZES.items():
        for turn in range(10):
            append_messages(
                MemoryAppendInput(
                    context=MemoryContext(f"{what}-{mode}", user_id=f"loader-{mode}"),
                    run_id=f"seed-{turn}",
                    turn=1,
                    messages=_turn(turn, question, answer),
                )
            )


def _agents_append(
    agents: AgentsSessions, mode: str, round_number: int
) -> Callable[[int], Awaitable[None]]:
    sessions = [agents.session(mode, f"append-{n}") for n in range(SESSIONS)]

    async def call(i: int) -> None:
        await sessions[i % SESSIONS].add_items(_turn(i))

    return call


def _agents_load(agents: AgentsSessions, mode: str, what: str) -> Callable[[int], Awaitable[None]]:
    session = agents.session(mode, what)

    async def call(i: int) -> None:
        assert len(await session.get_items()) == 20

    return call


def _agents_seed(agents: AgentsSessions, mode: str) -> None:
    for what, (question, answer) in SIZES.items():
        for turn in range(10):
            agents.run(agents.session(mode, what).add_items(_turn(turn, question, answer)))


def _timed(call: Callable[[int], None]) -> float:
    started = time.perf_counter()
    for i in range(CALLS):
        call(i)
    return (time.perf_counter() - started) / CALLS * 1e6


def _anvia_round(mode: str, round_number: int, results: dict[str, list[float]]) -> None:
    with override_settings(ANVIA_DJANGO=ENCRYPTED if mode == "on" else {}):
        # Changing the setting makes the process forget its keys, as a
        # restart would: read them again before the clock starts.
        warm_up = _anvia_append(mode, -1 - round_number)
        for i in range(SESSIONS):
            warm_up(i)
        for what in SIZES:
            _anvia_load(mode, what)(0)
        results.setdefault(f"{ANVIA} append {mode}", []).append(
            _timed(_anvia_append(mode, round_number))
        )
        for what in SIZES:
            results.setdefault(f"{ANVIA} {what} {mode}", []).append(_timed(_anvia_load(mode, what)))


def _agents_round(
    agents: AgentsSessions, mode: str, round_number: int, results: dict[str, list[float]]
) -> None:
    name = agents.name
    results.setdefault(f"{name} append {mode}", []).append(
        agents.timed(CALLS, _agents_append(agents, mode, round_number))
    )
    for what in SIZES:
        results.setdefault(f"{name} {what} {mode}", []).append(
            agents.timed(CALLS, _agents_load(agents, mode, what))
        )


def main(rounds: int) -> None:
    create_fresh_database()
    agents = AgentsSessions(KEY)
    agents.open()
    try:
        for mode in ("off", "on"):
            with override_settings(ANVIA_DJANGO=ENCRYPTED if mode == "on" else {}):
                _anvia_seed(mode)
            _agents_seed(agents, mode)
        results: dict[str, list[float]] = {}
        for round_number in range(rounds):
            modes = ("off", "on") if round_number % 2 == 0 else ("on", "off")
            for mode in modes:
                _anvia_round(mode, round_number, results)
                _agents_round(agents, mode, round_number, results)
        _report(rounds, results, [ANVIA, agents.name])
    finally:
        agents.close()
    for line in floor_lines():
        print(line)


def _report(rounds: int, results: dict[str, list[float]], systems: list[str]) -> None:
    print(
        f"{connection.vendor}: µs per call, median over {rounds} rounds of {CALLS} "
        f"(load average {' '.join(_load_average())})"
    )
    print()
    print("| system | call | encryption off | encryption on | on / off | best on / best off |")
    print("|---|---|---:|---:|---:|---:|")
    for system in systems:
        for what in ("append", *SIZES):
            offs, ons = results[f"{system} {what} off"], results[f"{system} {what} on"]
            off, on = statistics.median(offs), statistics.median(ons)
            print(
                f"| {system} | {what} | {off:,.0f} | {on:,.0f} | {on / off:.2f} "
                f"| {min(ons) / min(offs):.2f} |"
            )
    print()


def _load_average() -> list[str]:
    """The machine's load average (1, 5, 15 minutes): other work on it
    slows both arms, but unevenly; the best rounds suffer least."""
    try:
        with open("/proc/loadavg") as loadavg:
            return loadavg.read().split()[:3]
    except OSError:
        return ["unknown"]


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 6)
