"""A failing database never leaves half a write behind.

For append, clear and record_error, a clean run first counts the SQL
statements the call sends; then the call is repeated once per statement
with a ``DatabaseError`` injected at that statement. Each time the error
must reach the caller, every table must be exactly as before, and no
"after commit" signal may go out. With ``transaction=True`` the calls run
their own real transactions (BEGIN ... COMMIT), and the COMMIT itself is
made to fail too. Lost connections between calls are survived.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import DatabaseError, OperationalError, connection, connections, transaction
from django.dispatch import Signal
from django.utils import timezone

from anvia_django import signals
from anvia_django.core.memory import MemoryContext, MemoryErrorInput, Message
from anvia_django.core.memory.branches import MemoryForkInput
from anvia_django.core.memory.compaction import MemoryCompactionInput
from anvia_django.core.memory.run_records import MemoryRunInput
from anvia_django.models import AgentRun, Conversation, FailedRun, MemoryMessage
from anvia_django.persistence import append_messages, pop_last_message, reconnect
from anvia_django.store import DjangoMemoryStore
from tests.helpers import append_input, assistant, run, snapshot, user, writes

from .report import record

STORE = DjangoMemoryStore()


class InjectedFault(DatabaseError):
    """What the fault injector raises, so no real error is mistaken for it."""


class StatementFaults:
    """``connection.execute_wrapper`` that counts statements and fails the k-th."""

    def __init__(
        self, fail_at: int | None = None, error: type[DatabaseError] = InjectedFault
    ) -> None:
        self.fail_at = fail_at
        self.error = error
        self.statements: list[str] = []

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        self.statements.append(sql)
        if len(self.statements) == self.fail_at:
            raise self.error(f"injected at statement {self.fail_at}")
        return execute(sql, params, many, context)


class DropConnection(StatementFaults):
    """Closes the client socket just before the k-th statement."""

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        self.statements.append(sql)
        if len(self.statements) == self.fail_at:
            connection.connection.close()
        return execute(sql, params, many, context)


class LostAnswer:
    """``connection.execute_wrapper`` that runs a write in autocommit (its own
    transaction), then raises as if the connection died before the answer
    arrived. Not ``BEGIN``: SQLite's goes through the wrapper while Django
    still reports autocommit, and failing it would leave a transaction open."""

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        result = execute(sql, params, many, context)
        if connection.get_autocommit() and writes(sql):
            raise InjectedFault("the answer to a committed statement was lost")
        return result


@dataclass(frozen=True)
class Scenario:
    name: str
    call: Callable[[], None]
    """The store call under test."""
    signal: Signal
    """What the call announces after a successful commit."""


def existing_history() -> None:
    """Rows in every table, in the session under test and in another one."""
    for session in ("busy", "bystander"):
        run(STORE.append, append_input(session, [user("hi"), assistant("hello")], user_id="u"))
        run(STORE.append, append_input(session, [user("again")], run_id="run-2", user_id="u"))
        failure = MemoryErrorInput(MemoryContext(session, "u"), "run-3", TimeoutError(), [])
        run(STORE.record_error, failure)


SCENARIOS = [
    Scenario(
        "append to a new session",
        lambda: run(STORE.append, append_input("new", [user("a"), assistant("b")], user_id="u")),
        signals.messages_appended,
    ),
    Scenario(
        "append to an existing session, new metadata",
        lambda: run(
            STORE.append,
            append_input("busy", [user("c")], run_id="run-4", user_id="u", metadata={"k": 1}),
        ),
        signals.messages_appended,
    ),
    Scenario(
        "clear a session with messages and failed runs",
        lambda: run(STORE.clear, MemoryContext("busy", "u")),
        signals.conversation_cleared,
    ),
    Scenario(
        "record_error on a new session",
        lambda: run(
            STORE.record_error,
            MemoryErrorInput(MemoryContext("new", "u"), "run-9", ValueError("x"), [user("q")]),
        ),
        signals.run_failed,
    ),
    Scenario(
        "record_error on an existing session",
        lambda: run(
            STORE.record_error,
            MemoryErrorInput(MemoryContext("busy", "u"), "run-9", ValueError("x"), [user("q")]),
        ),
        signals.run_failed,
    ),
]


def reset() -> None:
    FailedRun.objects.all().delete()
    MemoryMessage.objects.all().delete()
    Conversation.objects.all().delete()
    existing_history()


@pytest.fixture
def sent() -> Iterator[list[str]]:
    """Names of the memory signals sent while the test runs."""
    names: list[str] = []
    receivers = []
    for name in ("messages_appended", "conversation_cleared", "run_failed"):

        def receiver(name: str = name, **kwargs: Any) -> None:
            names.append(name)

        getattr(signals, name).connect(receiver, weak=False)
        receivers.append((getattr(signals, name), receiver))
    yield names
    for signal, receiver in receivers:
        signal.disconnect(receiver)


def count_statements(scenario: Scenario) -> int:
    reset()
    before = snapshot()
    counter = StatementFaults()
    with connection.execute_wrapper(counter):
        scenario.call()
    assert snapshot() != before, "the clean run must write"
    return len(counter.statements)


def inject_at_every_statement(scenario: Scenario, sent: list[str]) -> int:
    total = count_statements(scenario)
    assert total >= 1
    for fail_at in range(1, total + 1):
        reset()
        before = snapshot()
        sent.clear()
        with connection.execute_wrapper(StatementFaults(fail_at)), pytest.raises(InjectedFault):
            scenario.call()
        assert snapshot() == before, f"statement {fail_at} of {total} left a partial write"
        assert sent == [], f"a signal went out although statement {fail_at} failed"
    # The connection is still good for the same call.
    reset()
    scenario.call()
    return total


@pytest.mark.django_db
@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_a_fault_at_any_statement_changes_nothing(scenario: Scenario, sent: list[str]) -> None:
    faults = inject_at_every_statement(scenario, sent)
    record("faults", injected=faults, scenarios=1)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_a_fault_at_any_statement_of_a_real_transaction_changes_nothing(
    scenario: Scenario, sent: list[str]
) -> None:
    faults = inject_at_every_statement(scenario, sent)
    record("faults", injected=faults, scenarios=1)


class FailingCommit:
    """A replacement for ``connection._commit`` that raises the first time."""

    def __init__(self, *, after_committing: bool) -> None:
        self.real_commit: Callable[[], None] = connection._commit  # type: ignore[attr-defined]
        self.after_committing = after_committing
        self.calls = 0

    def __call__(self) -> None:
        self.calls += 1
        first = self.calls == 1
        if not first or self.after_committing:
            self.real_commit()  # after_committing: the server committed, the client never hears
        if first:
            raise InjectedFault("injected at COMMIT")


def assert_a_failed_commit_changes_nothing(
    scenario: Scenario, sent: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A COMMIT that fails leaves every table as it was and sends no signal."""
    before = snapshot()
    sent.clear()
    failing = FailingCommit(after_committing=False)
    monkeypatch.setattr(connection, "_commit", failing)
    try:
        scenario.call()
    except InjectedFault:
        pass
    else:
        if not failing.calls:
            pytest.skip(
                "one statement in autocommit: its commit is the statement's, "
                "which the statement-fault tests fail"
            )
        pytest.fail("the failed COMMIT did not reach the caller")
    assert snapshot() == before
    assert sent == []
    record("faults", injected=1, scenarios=1)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_a_failed_commit_changes_nothing(
    scenario: Scenario, sent: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    reset()
    assert_a_failed_commit_changes_nothing(scenario, sent, monkeypatch)


@pytest.mark.django_db(transaction=True)
def test_an_append_retried_after_an_ambiguous_commit_is_not_duplicated(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The commit reached the server but the caller saw an error: it retries.
    reset()
    request = append_input("busy", [user("c"), assistant("d")], run_id="run-4", user_id="u")
    monkeypatch.setattr(connection, "_commit", FailingCommit(after_committing=True))
    # Where the append is one statement in autocommit, its answer is what is lost.
    with connection.execute_wrapper(LostAnswer()), pytest.raises(InjectedFault):
        run(STORE.append, request)
    monkeypatch.undo()
    after_first = snapshot()
    run(STORE.append, request)
    assert snapshot() == after_first
    loaded = run(STORE.load, MemoryContext("busy"))
    assert loaded[-2:] == [user("c"), assistant("d")]
    assert loaded.count(user("c")) == 1
    record("faults", injected=1, scenarios=1)


def kill_connection(kind: str) -> None:
    if kind == "closed":
        connection.close()
    elif connection.vendor == "postgresql":
        pid = connection.connection.info.backend_pid
        with connections["other"].cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
    elif connection.vendor == "mysql":
        thread_id = connection.connection.thread_id()
        with connections["other"].cursor() as cursor:
            cursor.execute("KILL CONNECTION %s", [thread_id])
    else:
        pytest.skip("SQLite has no server to kill the connection on")


LOST = MemoryContext("busy", "u")
"""The session each call after a lost connection works on (see ``reset``)."""


def _append() -> None:
    run(STORE.append, append_input("busy", [user("after")], run_id="run-5", user_id="u"))
    assert run(STORE.load, LOST)[-1] == user("after")


def _load() -> None:
    assert run(STORE.load, LOST)[0] == user("hi")


def _clear() -> None:
    run(STORE.clear, LOST)
    assert run(STORE.load, LOST) == []


def _record_error() -> None:
    run(STORE.record_error, MemoryErrorInput(LOST, "run-5", ValueError(), []))
    assert FailedRun.objects.filter(run_id="run-5").count() == 1


def _record_run() -> None:
    now = timezone.now()
    run(STORE.record_run, MemoryRunInput(LOST, "run-5", "succeeded", now, now, message_count=1))
    assert AgentRun.objects.filter(run_id="run-5").count() == 1


def _rewind() -> None:
    assert run(STORE.rewind, LOST, 2) == 1
    assert run(STORE.load, LOST) == [user("hi"), assistant("hello")]


def _fork() -> None:
    fork = run(STORE.fork, MemoryForkInput(LOST, "forked", 2))
    assert fork.message_count == 2
    assert run(STORE.load, MemoryContext("forked")) == [user("hi"), assistant("hello")]


async def _summarise(previous: str | None, messages: list[Message]) -> str:
    return f"{len(messages)} messages"


def _compact(*, kill_before_writing: str | None = None) -> None:
    async def summarise(previous: str | None, messages: list[Message]) -> str:
        if kill_before_writing is not None:
            # Between the plan and the write: the write meets the dead connection.
            await sync_to_async(kill_connection)(kill_before_writing)
        return await _summarise(previous, messages)

    assert run(STORE.compact, MemoryCompactionInput(LOST, summarise, keep_messages=1)) == 1
    assert run(STORE.load_compacted, LOST)[1:] == [user("again")]


def _load_compacted() -> None:
    assert run(STORE.load_compacted, LOST)[0] == user("hi")


def _load_entries() -> None:
    assert [entry.position for entry in run(STORE.load_entries, LOST)] == [0, 1, 2]


def _pop_last_message() -> None:
    assert pop_last_message(LOST) == user("again")
    assert run(STORE.load, LOST) == [user("hi"), assistant("hello")]


NEXT_CALLS: dict[str, Callable[[], None]] = {
    "append": _append,
    "load": _load,
    "clear": _clear,
    "record_error": _record_error,
    "record_run": _record_run,
    "rewind": _rewind,
    "fork": _fork,
    "compact": _compact,
    "load_compacted": _load_compacted,
    "load_entries": _load_entries,
    "pop_last_message": _pop_last_message,
}


@pytest.mark.django_db(transaction=True, databases=["default", "other"])
@pytest.mark.parametrize("kind", ["closed", "killed by the server"])
@pytest.mark.parametrize("operation", list(NEXT_CALLS))
def test_the_next_call_after_a_lost_connection_works(kind: str, operation: str) -> None:
    # Every store method (and pop_last_message, which the integrations use)
    # recovers alike, whether it is safe to repeat or not: nothing of a call
    # that meets a connection already dead can have reached the database.
    reset()
    kill_connection(kind)
    NEXT_CALLS[operation]()
    record("faults", lost_connections=1)


@pytest.mark.django_db(transaction=True, databases=["default", "other"])
def test_a_summary_written_after_the_connection_died_during_summarising() -> None:
    # The plan and the write of a compaction are separate calls: the model
    # may take long enough for the connection to die in between.
    reset()
    _compact(kill_before_writing="killed by the server")
    record("faults", lost_connections=1)


@pytest.mark.django_db(transaction=True)
def test_an_operational_error_on_a_healthy_connection_is_not_retried() -> None:
    # Neither a lost connection nor a deadlock: the caller's to handle.
    reset()
    before = snapshot()
    faults = StatementFaults(fail_at=1, error=OperationalError)
    with connection.execute_wrapper(faults), pytest.raises(OperationalError):
        run(STORE.append, append_input("busy", [user("c")], run_id="run-4", user_id="u"))
    assert len(faults.statements) == 1
    assert snapshot() == before


@pytest.mark.django_db(transaction=True)
def test_an_error_on_a_connection_the_call_opened_itself_is_not_retried() -> None:
    # A fresh connection cannot have been stale, so its failure is a real one.
    reset()
    before = snapshot()
    connection.close()
    faults = StatementFaults(fail_at=1, error=OperationalError)
    with connection.execute_wrapper(faults), pytest.raises(OperationalError):
        run(STORE.append, append_input("busy", [user("c")], run_id="run-4", user_id="u"))
    assert len(faults.statements) == 1
    assert snapshot() == before


@pytest.mark.server
@pytest.mark.django_db(transaction=True)
def test_a_connection_lost_in_the_middle_of_an_append_is_retried_once() -> None:
    request = append_input("busy", [user("c"), assistant("d")], run_id="run-4", user_id="u")
    total = count_statements(
        Scenario("append", lambda: run(STORE.append, request), signals.messages_appended)
    )
    for drop_at in range(1, total + 1):
        reset()
        before = MemoryMessage.objects.count()
        with connection.execute_wrapper(DropConnection(drop_at)):
            run(STORE.append, request)
        assert MemoryMessage.objects.count() == before + 2, f"dropped at statement {drop_at}"
        assert run(STORE.load, MemoryContext("busy"))[-2:] == request.messages
    record("faults", lost_connections=total)


class Conflicts:
    """``connection.execute_wrapper`` that fails the first ``times`` statements
    with ``error()``, as a deadlock on a busy database would."""

    def __init__(self, times: int, error: Callable[[], DatabaseError]) -> None:
        self.times = times
        self.error = error
        self.raised: list[DatabaseError] = []

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        if len(self.raised) < self.times:
            self.raised.append(self.error())
            raise self.raised[-1]
        return execute(sql, params, many, context)


def mysql_deadlock() -> DatabaseError:
    return OperationalError(1213, "Deadlock found when trying to get lock; try restarting")


def mysql_lock_wait_timeout() -> DatabaseError:
    return OperationalError(1205, "Lock wait timeout exceeded; try restarting transaction")


class SQLStateError(Exception):
    """What psycopg raises: the SQLSTATE in ``sqlstate``."""

    def __init__(self, sqlstate: str) -> None:
        super().__init__(sqlstate)
        self.sqlstate = sqlstate


def postgresql_error(sqlstate: str) -> Callable[[], DatabaseError]:
    def error() -> DatabaseError:
        # Django's wrapper, the driver's error as its cause.
        wrapped = OperationalError(f"SQLSTATE {sqlstate}")
        wrapped.__cause__ = SQLStateError(sqlstate)
        return wrapped

    return error


CONFLICTS = {
    "MySQL deadlock": mysql_deadlock,
    "MySQL lock wait timeout": mysql_lock_wait_timeout,
    "PostgreSQL deadlock": postgresql_error("40P01"),
    "PostgreSQL serialization failure": postgresql_error("40001"),
}


# Every scenario, and every kind of conflict, once (the kinds in turn):
# the retry does not depend on which write meets which conflict.
PAIRED = [(scenario, list(CONFLICTS)[n % len(CONFLICTS)]) for n, scenario in enumerate(SCENARIOS)]
PAIRED_IDS = [f"{scenario.name}-{conflict}" for scenario, conflict in PAIRED]


@pytest.fixture
def no_pause(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reconnect, "CONFLICT_PAUSE", 0.0)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("scenario", "conflict"), PAIRED, ids=PAIRED_IDS)
def test_a_write_that_meets_a_deadlock_runs_again(
    scenario: Scenario, conflict: str, sent: list[str], no_pause: None
) -> None:
    reset()
    scenario.call()
    expected = _outcome()
    reset()
    sent.clear()
    attempts = reconnect.conflict_attempts(CONFLICTS[conflict]())
    conflicts = Conflicts(attempts - 1, CONFLICTS[conflict])
    with connection.execute_wrapper(conflicts):
        scenario.call()
    assert len(conflicts.raised) == attempts - 1 > 0
    assert _outcome() == expected  # exactly what one clean call writes
    assert len(sent) == 1
    record("faults", injected=len(conflicts.raised), scenarios=1)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("scenario", "conflict"), PAIRED, ids=PAIRED_IDS)
def test_a_deadlock_at_every_attempt_reaches_the_caller_unchanged(
    scenario: Scenario, conflict: str, sent: list[str], no_pause: None
) -> None:
    reset()
    before = snapshot()
    sent.clear()
    conflicts = Conflicts(100, CONFLICTS[conflict])
    with connection.execute_wrapper(conflicts), pytest.raises(OperationalError) as raised:
        scenario.call()
    # Bounded: a lock wait timeout, which waited long already, runs twice.
    expected = 2 if conflict == "MySQL lock wait timeout" else 6
    assert len(conflicts.raised) == expected
    assert raised.value is conflicts.raised[-1]
    assert snapshot() == before
    assert sent == []


@pytest.mark.django_db(transaction=True)
def test_a_deadlock_inside_the_callers_transaction_is_not_retried(no_pause: None) -> None:
    # The database rolled the caller's transaction back: the caller must know.
    reset()
    before = snapshot()
    conflicts = Conflicts(1, mysql_deadlock)
    with (
        pytest.raises(OperationalError),
        transaction.atomic(),
        connection.execute_wrapper(conflicts),
    ):
        append_messages(append_input("busy", [user("c")], run_id="run-4", user_id="u"))
    assert len(conflicts.raised) == 1
    assert snapshot() == before


def test_the_pauses_between_attempts_are_random_and_bounded() -> None:
    pauses = [reconnect.conflict_pause(attempt) for attempt in range(1, 6) for _ in range(50)]
    assert all(0 <= pause < reconnect.CONFLICT_PAUSE * 2**6 for pause in pauses)
    assert len(set(pauses)) > 200  # jitter: callers that met one deadlock part


def _outcome() -> tuple[dict[str, int], list[list[Message]]]:
    """What a scenario's call leaves, ids and times aside: the rows of each
    table, and the transcripts of the sessions it touches."""
    counts = {table: len(rows) for table, rows in snapshot().items()}
    return counts, [run(STORE.load, MemoryContext(session)) for session in ("busy", "new")]
