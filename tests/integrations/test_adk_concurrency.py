"""Two workers append to one ADK session at the same moment, round after
round: in each round both read the same revision, so exactly one append
lands and the other raises ``StaleSessionError`` having written nothing.
Nothing is lost, nothing interleaved; positions stay gap-free."""

from __future__ import annotations

import pytest

from anvia_django.integrations import adk
from tests.concurrently import Job, run_at_once
from tests.helpers import run, stored

from . import adk_workers
from .adk_support import needs_adk

pytestmark = needs_adk

WORKERS = 2
ROUNDS = 6


@pytest.mark.django_db(transaction=True)
def test_racing_appends_each_land_or_raise_stale(processes: bool) -> None:
    service = adk.DjangoSessionService()
    run(service.create_session, app_name=adk_workers.APP, user_id="u", session_id="raced")
    jobs: list[Job] = [(adk_workers.append_rounds, (w, "raced", ROUNDS)) for w in range(WORKERS)]
    outcomes = run_at_once(jobs, processes=processes, timeout=300)

    landed: list[tuple[int, str]] = []
    for round in range(ROUNDS):
        this_round = [o for worker in outcomes for o in worker if o[0] == round]
        assert sorted(outcome for _, _, outcome in this_round) == ["landed", "stale"]
        landed += [(round, event_id) for _, event_id, outcome in this_round if outcome == "landed"]

    session = run(service.get_session, app_name=adk_workers.APP, user_id="u", session_id="raced")
    assert session is not None
    assert [e.id for e in session.events] == [event_id for _, event_id in landed]
    assert [position for position, *_ in stored("raced")] == list(range(ROUNDS))
    # The state is what the landed events said, and only they.
    winners = {int(e.invocation_id[1]): int(e.invocation_id.split("-r")[1]) for e in session.events}
    assert {k: v for k, v in session.state.items() if k.startswith("w")} == {
        f"w{worker}": last for worker, last in winners.items()
    }
    last_worker = int(session.events[-1].invocation_id[1])
    assert session.state["app:last"] == session.state["user:last"] == last_worker
