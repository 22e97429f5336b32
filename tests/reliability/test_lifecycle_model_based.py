"""The model-based test, with rewind, fork, compaction and run records.

Extends ``StoresAgree`` (``test_model_based``): random sequences of every
call, the new ones included, against DjangoMemoryStore and the reference
InProcessMemoryStore side by side. Same outcome (or error type) for every
call; after every step the same conversations and failed runs, and for the
sessions the step named (all of them after a clear or a rewind) the same
transcripts, loads (through summaries), lineage and run records.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import initialize, rule, run_state_machine_as_test

from anvia_django.core.memory import (
    MemoryAppendInput,
    MemoryCompactionInput,
    MemoryContext,
    MemoryForkInput,
    MemoryRunInput,
    Message,
    TokenUsage,
)
from anvia_django.models import AgentRun, Conversation
from anvia_django.persistence import conversation_lineage

from .budget import scaled
from .report import record
from .test_model_based import MACHINE_SETTINGS, RUN_IDS, SESSIONS, USERS, StoresAgree

pytestmark = pytest.mark.django_db

# Mostly inside a short transcript, sometimes out of range on either side.
POSITIONS = st.integers(min_value=0, max_value=6) | st.sampled_from([-1, 40])
STARTED = datetime(2026, 12, 1, tzinfo=UTC)
# Sessions only forks create (and the other calls then find): with the
# shared sessions alone, most forks would land on a session in use.
FORKS = ["f-0", "f-1"]
ALL_SESSIONS = SESSIONS + FORKS


async def summarise(previous: str | None, messages: list[Message]) -> str:
    roles = ",".join(str(m.get("role")) for m in messages)
    return f"[{previous}] {len(messages)}: {roles}"


def load_function(context: MemoryContext) -> Callable[[Any], Awaitable[list[Message]]]:
    def load(store: Any) -> Awaitable[list[Message]]:
        return store.load_compacted(context)  # type: ignore[no-any-return]

    return load


class LifecycleStoresAgree(StoresAgree):
    sessions = ALL_SESSIONS
    runs_made = 0
    # How often each new call changed something, summed over all examples:
    # a test that never compacted would prove nothing about compaction.
    done: ClassVar[Counter[str]] = Counter()

    @initialize(
        owners=st.lists(st.sampled_from(USERS), min_size=2, max_size=2),
        sizes=st.lists(st.integers(min_value=2, max_value=6), min_size=2, max_size=2),
        rewind_to=st.integers(min_value=0, max_value=3),
        fork_at=st.integers(min_value=0, max_value=4),
        keep=st.integers(min_value=1, max_value=3),
    )
    def some_history(
        self, owners: list[str | None], sizes: list[int], rewind_to: int, fork_at: int, keep: int
    ) -> None:
        # Every example starts with two sessions of at least four messages,
        # one of them rewound, forked and compacted (as trusted server code),
        # so the random steps that follow work on every kind of state.
        for session, owner, size in zip(SESSIONS, owners, sizes, strict=False):
            self.a_run(session, owner, size)
            self.a_run(session, owner, size)
        self.rewind(SESSIONS[0], None, rewind_to)
        self.fork(SESSIONS[1], None, FORKS[0], fork_at, None)
        self.compact(SESSIONS[1], None, keep, None)

    @rule(
        session=st.sampled_from(SESSIONS),
        user=st.sampled_from(USERS),
        count=st.integers(min_value=2, max_value=6),
    )
    def a_run(self, session: str, user: str | None, count: int) -> None:
        # Whole valid runs, so sessions grow long enough to rewind, fork and compact.
        self.runs_made += 1
        messages: list[Message] = [{"role": "user", "content": f"q{self.runs_made}"}]
        messages += [{"role": "assistant", "content": f"a{n}"} for n in range(count - 1)]
        request = MemoryAppendInput(MemoryContext(session, user), f"r{self.runs_made}", 1, messages)
        self.touch(session)
        self.both(lambda store: store.append(request))

    @rule(session=st.sampled_from(ALL_SESSIONS), user=st.sampled_from(USERS), position=POSITIONS)
    def rewind(self, session: str, user: str | None, position: int) -> None:
        context = MemoryContext(session, user)
        self.touch(*self.sessions)  # forks from the cut part show it
        ours, theirs = self.both(lambda store: store.rewind(context, position))
        assert ours == theirs
        self.done["rewinds"] += bool(ours)

    @rule(
        source=st.sampled_from(SESSIONS),
        user=st.sampled_from(USERS),
        into=st.sampled_from(FORKS) | st.sampled_from(ALL_SESSIONS),
        position=POSITIONS,
        owner=st.sampled_from(USERS),
    )
    def fork(
        self, source: str, user: str | None, into: str, position: int, owner: str | None
    ) -> None:
        request = MemoryForkInput(MemoryContext(source, user), into, position, owner)
        self.touch(source, into)
        ours, theirs = self.both(lambda store: store.fork(request))
        self.done["forks"] += ours is not None
        if ours is not None:
            assert (ours.session_id, ours.user_id, ours.metadata, ours.message_count) == (
                theirs.session_id,
                theirs.user_id,
                theirs.metadata,
                theirs.message_count,
            )

    @rule(session=st.sampled_from(FORKS))
    def clear_fork(self, session: str) -> None:
        context = MemoryContext(session)
        self.touch(*self.sessions)  # its source's lineage lists it
        self.both(lambda store: store.clear(context))

    @rule(
        session=st.sampled_from(ALL_SESSIONS),
        user=st.sampled_from(USERS),
        keep=st.integers(min_value=1, max_value=3),
        keep_tokens=st.none() | st.integers(min_value=5, max_value=60),
    )
    def compact(self, session: str, user: str | None, keep: int, keep_tokens: int | None) -> None:
        request = MemoryCompactionInput(MemoryContext(session, user), summarise, keep, keep_tokens)
        self.touch(session)
        ours, theirs = self.both(lambda store: store.compact(request))
        assert ours == theirs
        self.done["compactions"] += ours is not None

    @rule(
        session=st.sampled_from(SESSIONS),
        user=st.sampled_from(USERS),
        run_id=st.sampled_from(RUN_IDS),
        status=st.sampled_from(["succeeded", "failed", "lost"]),
        tokens=st.none() | st.integers(min_value=0, max_value=10**6),
    )
    def record_run(
        self, session: str, user: str | None, run_id: str, status: Any, tokens: int | None
    ) -> None:
        request = MemoryRunInput(
            MemoryContext(session, user),
            run_id,
            status,
            STARTED,
            STARTED + timedelta(seconds=1),
            usage=TokenUsage(tokens, 1),
            message_count=1,
        )
        self.touch(session)
        self.both(lambda store: store.record_run(request))

    def check_conversations(self, sessions: set[str]) -> None:
        super().check_conversations(sessions)
        self.loads_and_lineage_agree(sessions)
        self.run_records_agree(sessions)

    def loads_and_lineage_agree(self, sessions: set[str]) -> None:
        for session in sorted(sessions):
            ours, theirs = self.both(load_function(MemoryContext(session)))
            assert ours == theirs
            row = Conversation.objects.filter(session_id=session).values_list("pk").first()
            if row is None:
                continue
            mine = conversation_lineage(row[0])
            reference = self.reference.lineage(session)

            def visible(lineage: Any) -> Any:
                source = lineage.forked_from
                return (
                    None if source is None else (source.session_id, source.position),
                    [(f.session_id, f.position) for f in lineage.forks],
                )

            assert visible(mine) == visible(reference)

    def run_records_agree(self, sessions: set[str]) -> None:
        for session in sorted(sessions):
            stored = sorted(
                AgentRun.objects.filter(conversation__session_id=session).values_list(
                    "run_id", "status", "input_tokens", "total_tokens", "failed_run__error_type"
                )
            )
            reference = sorted(
                (r.run_id, r.status, r.usage.input_tokens, r.usage.total_tokens, r.error_type)
                for r in self.reference.runs(session)
            )
            assert stored == reference


LIFECYCLE_SETTINGS = settings(
    MACHINE_SETTINGS,
    # The suite's longest test: 6 examples of 50 steps at the CI size, on
    # PostgreSQL and MariaDB (a new search each run); the long mode searches.
    max_examples=scaled(ci=6, long=200, smoke=5),
    stateful_step_count=scaled(ci=50, long=100),
)


class LifecycleStoresAgreeWithLoadLimit(LifecycleStoresAgree):
    load_limit = 3


@pytest.mark.parametrize("machine", [LifecycleStoresAgree, LifecycleStoresAgreeWithLoadLimit])
def test_django_store_matches_the_reference_store_with_the_new_calls(
    machine: type[LifecycleStoresAgree],
) -> None:
    machine.done.clear()
    run_state_machine_as_test(machine, settings=LIFECYCLE_SETTINGS)
    assert min(machine.done[kind] for kind in ("rewinds", "forks", "compactions")) > 0, machine.done
    record("model_based_lifecycle", **machine.done)
