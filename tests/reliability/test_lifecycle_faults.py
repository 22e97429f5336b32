"""Faults at every statement of the new write paths: runs, rewind, fork, compaction.

The same method as ``test_faults``: count a clean call's statements, then
repeat the call with a ``DatabaseError`` injected at each one (and at the
COMMIT); every table must stay as it was and no signal may go out.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection

from anvia_django import signals
from anvia_django.core.memory import (
    MemoryCompactionInput,
    MemoryContext,
    MemoryForkInput,
    MemoryRunInput,
    Message,
    TokenUsage,
)
from tests.helpers import append_input, assistant, run, snapshot, user

from .report import record
from .test_faults import (
    STORE,
    FailingCommit,
    InjectedFault,
    Scenario,
    assert_a_failed_commit_changes_nothing,
    inject_at_every_statement,
)
from .test_faults import reset as reset_history

SIGNALS = (
    "messages_appended",
    "conversation_cleared",
    "run_failed",
    "messages_rewound",
    "conversation_forked",
    "conversation_compacted",
)
STARTED = datetime(2026, 12, 1, 9, tzinfo=UTC)


async def summarise(previous: str | None, messages: list[Message]) -> str:
    return f"{previous or ''}+{len(messages)}"


def compact(keep: int) -> None:
    request = MemoryCompactionInput(MemoryContext("busy", "u"), summarise, keep_messages=keep)
    assert run(STORE.compact, request) is not None


def rewind(position: int) -> None:
    run(STORE.rewind, MemoryContext("busy", "u"), position)


def fork(session_id: str, position: int) -> None:
    run(STORE.fork, MemoryForkInput(MemoryContext("busy", "u"), session_id, position))


def reset() -> None:
    """The faults suite's history, plus a run record and a summary in "busy"."""
    reset_history()
    for index in range(4):
        messages = [user(f"q{index}"), assistant(f"a{index}")]
        run(STORE.append, append_input("busy", messages, run_id=f"more-{index}", user_id="u"))
    run(STORE.record_run, run_input("run-1", "succeeded"))
    compact(keep=4)  # covers positions 0..6 of 11


def run_input(run_id: str, status: Any) -> MemoryRunInput:
    return MemoryRunInput(
        MemoryContext("busy", "u"),
        run_id,
        status,
        STARTED,
        STARTED + timedelta(seconds=3),
        model="m",
        usage=TokenUsage(5, 6),
        message_count=2,
    )


SCENARIOS = [
    Scenario(
        "record a new run",
        lambda: run(STORE.record_run, run_input("run-2", "succeeded")),
        signals.run_failed,  # unused: a run record sends no signal
    ),
    Scenario(
        "record a failed run, linked to its error",
        lambda: run(STORE.record_run, run_input("run-3", "failed")),
        signals.run_failed,
    ),
    Scenario(
        "rewind into the summarised range",
        lambda: rewind(2),
        signals.messages_rewound,
    ),
    Scenario(
        "fork with messages and a summary",
        lambda: fork("branch", 9),
        signals.conversation_forked,
    ),
    Scenario(
        "compact again",
        lambda: compact(keep=2),
        signals.conversation_compacted,
    ),
]


@pytest.fixture
def sent() -> Iterator[list[str]]:
    names: list[str] = []
    receivers = []
    for name in SIGNALS:

        def receiver(name: str = name, **kwargs: Any) -> None:
            names.append(name)

        getattr(signals, name).connect(receiver, weak=False)
        receivers.append((getattr(signals, name), receiver))
    yield names
    for signal, receiver in receivers:
        signal.disconnect(receiver)


@pytest.fixture(autouse=True)
def richer_history(monkeypatch: pytest.MonkeyPatch) -> None:
    from . import test_faults

    monkeypatch.setattr(test_faults, "reset", reset)


@pytest.mark.django_db
@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_a_fault_at_any_statement_changes_nothing(scenario: Scenario, sent: list[str]) -> None:
    record("faults", injected=inject_at_every_statement(scenario, sent), scenarios=1)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_a_fault_at_any_statement_of_a_real_transaction_changes_nothing(
    scenario: Scenario, sent: list[str]
) -> None:
    record("faults", injected=inject_at_every_statement(scenario, sent), scenarios=1)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_a_failed_commit_changes_nothing(
    scenario: Scenario, sent: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    reset()
    assert_a_failed_commit_changes_nothing(scenario, sent, monkeypatch)


@pytest.mark.django_db(transaction=True)
def test_a_run_record_retried_after_an_ambiguous_commit_is_kept_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reset()
    monkeypatch.setattr(connection, "_commit", FailingCommit(after_committing=True))
    with pytest.raises(InjectedFault):
        run(STORE.record_run, run_input("run-2", "succeeded"))
    after_first = snapshot()
    run(STORE.record_run, run_input("run-2", "succeeded"))
    assert snapshot() == after_first
    record("faults", injected=1, scenarios=1)
