"""A quick measure of what encryption at rest costs an append and a load.

    ANVIA_BENCH_DB=postgres python -m benchmarks.encryption_cost [ROUNDS]

One process, one connection, autocommit (each append its own transaction).
Rounds alternate encryption off and on, so drift in the machine hits both:

- append: 2 messages (a user turn and the answer) to one of 50 sessions,
  each of its own user (so one data key per user);
- load: the whole transcript of a 20-message session.

Reports the median per call of each. Not the full benchmark harness
(benchmarks/run.py): no peers, no concurrency.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchmarks.settings")
django.setup()

from django.db import connection  # noqa: E402
from django.test import override_settings  # noqa: E402

from anvia_django.core.memory import MemoryAppendInput, MemoryContext  # noqa: E402
from anvia_django.persistence import append_messages, load_messages  # noqa: E402

from .database import create_fresh_database  # noqa: E402

KEY = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="  # a benchmark key, never a real one
ENCRYPTED = {"ENCRYPTION": {"KEYS": {"k1": KEY}, "CURRENT": "k1"}}
SESSIONS = 50
CALLS = 200


def _append(mode: str, round_number: int) -> Callable[[int], None]:
    def call(i: int) -> None:
        session = f"{mode}-{i % SESSIONS}"
        append_messages(
            MemoryAppendInput(
                context=MemoryContext(session, user_id=f"user-{mode}-{i % SESSIONS}"),
                run_id=f"run-{round_number}-{i}",
                turn=1,
                messages=[
                    {"role": "user", "content": f"question {i} " + "x" * 200},
                    {"role": "assistant", "content": f"answer {i} " + "y" * 400},
                ],
            )
        )

    return call


def _load(mode: str) -> Callable[[int], None]:
    context = MemoryContext(f"load-{mode}", user_id=f"loader-{mode}")

    def call(i: int) -> None:
        assert len(load_messages(context)) == 20

    return call


def _seed(mode: str) -> None:
    for turn in range(10):
        append_messages(
            MemoryAppendInput(
                context=MemoryContext(f"load-{mode}", user_id=f"loader-{mode}"),
                run_id=f"seed-{turn}",
                turn=1,
                messages=[
                    {"role": "user", "content": "q" * 200},
                    {"role": "assistant", "content": "a" * 400},
                ],
            )
        )


def _timed(call: Callable[[int], None]) -> float:
    started = time.perf_counter()
    for i in range(CALLS):
        call(i)
    return (time.perf_counter() - started) / CALLS * 1e6


def main(rounds: int) -> None:
    create_fresh_database()
    _seed("off")
    with override_settings(ANVIA_DJANGO=ENCRYPTED):
        _seed("on")
    results: dict[str, list[float]] = {}
    for round_number in range(rounds):
        for mode in ("off", "on") if round_number % 2 == 0 else ("on", "off"):
            settings = ENCRYPTED if mode == "on" else {}
            with override_settings(ANVIA_DJANGO=settings):
                results.setdefault(f"append {mode}", []).append(_timed(_append(mode, round_number)))
                results.setdefault(f"load {mode}", []).append(_timed(_load(mode)))
    print(f"{connection.vendor}: median µs per call over {rounds} rounds of {CALLS}")
    for what in ("append", "load"):
        off = statistics.median(results[f"{what} off"])
        on = statistics.median(results[f"{what} on"])
        print(f"  {what:6}  off {off:8.1f}  on {on:8.1f}  ({(on / off - 1) * 100:+.0f}%)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 6)
