"""``clear`` beside appends and failed-run records, in separate processes.

On MariaDB a clear leaves delete-marked entries in the unique session-id
index, which the writers' ``INSERT .. ON DUPLICATE KEY UPDATE`` locks: the
database then kills one of the transactions with a deadlock (1213). The
store runs such a write again (persistence/reconnect.py), so no deadlock
may reach a caller. Eight processes append to 4 sessions and record a
failed run after every third append while a ninth clears them, for
``DURATION`` seconds; then each writer appends once more to every session.
Four sessions, not more, so that the writers meet on the same index
entries: 8 seconds on MariaDB see 13-16 deadlocks retried (20 sessions saw
0 or 1 in 30 seconds), and on MariaDB the test fails if it saw none. That a
retried deadlock reaches no caller is also tested deterministically, with
injected deadlocks, in test_faults.py.

Afterwards every session must hold whole appends at positions 0..n-1, and
each writer's appends in it must be the newest of those that returned to
it (what a clear removed was written before that clear), ending with the
final one. The same on PostgreSQL.

Its length comes from the reliability budget: 8 seconds at the CI size
(the one pair of the matrix that runs PostgreSQL and MariaDB), 3 seconds
in the smoke size, two minutes in the long mode.
"""

from __future__ import annotations

import pytest
from django.db import connection, connections

from anvia_django.models import FailedRun
from tests.concurrently import PROCESSES, apply
from tests.test_concurrency import kept_appends

from . import clear_workers
from .budget import scaled
from .report import record

WRITERS = 8
SESSIONS = 4
DURATION = scaled(ci=8, long=120, smoke=3)


@pytest.mark.server
@pytest.mark.django_db(transaction=True)
def test_clear_beside_appends_and_failed_runs() -> None:
    session_ids = [f"cleared-{n}" for n in range(SESSIONS)]
    database_name = connection.settings_dict["NAME"]
    connections.close_all()
    # The nine processes set Django up, then begin together at the gate.
    with PROCESSES.Manager() as manager, PROCESSES.Pool(WRITERS + 1) as pool:
        clears_done, gate = manager.Event(), manager.Barrier(WRITERS + 1)
        writers = [
            apply(
                pool,
                clear_workers.write_and_fail,
                (database_name, session_ids, writer, DURATION, clears_done, gate),
            )
            for writer in range(WRITERS)
        ]
        clearer = apply(
            pool,
            clear_workers.clear_until,
            (database_name, session_ids, DURATION, clears_done, gate),
        )
        # An error in any process (a deadlock reaching a caller) fails here.
        clears, conflicts = clearer.get(timeout=DURATION + 600)
        results = [writer.get(timeout=DURATION + 600) for writer in writers]

    appends = kept = 0
    for session_id in session_ids:
        stored = kept_appends(session_id)  # positions 0..n-1, appends whole
        for writer, (returned, _) in enumerate(results):
            got = stored.get(writer, [])
            assert got, f"writer {writer}'s final append to {session_id} is missing"
            # A writer appends in order and a clear removes all before it:
            # what is left is the newest of what returned, the final one last.
            assert got == returned[session_id][-len(got) :], f"writer {writer} in {session_id}"
            kept += len(got)
        finals = FailedRun.objects.filter(conversation__session_id=session_id)
        # Each writer's last failed run in the session came after every clear.
        assert finals.values("run_id").distinct().count() == WRITERS
    for returned, writer_conflicts in results:
        appends += sum(len(indices) for indices in returned.values())
        conflicts += writer_conflicts
    assert clears >= SESSIONS
    if connection.vendor == "mysql":
        assert conflicts > 0, "no deadlock met: the race this test is for did not happen"
    record(
        "clear beside writers",
        runs=1,
        writers=WRITERS,
        sessions=SESSIONS,
        seconds=DURATION,
        appends=appends,
        kept_appends=kept,
        clears=clears,
        retried_conflicts=conflicts,
    )
