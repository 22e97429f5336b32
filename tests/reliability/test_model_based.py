"""DjangoMemoryStore behaves exactly like the reference InProcessMemoryStore.

A hypothesis state machine runs random sequences of append (and retried
append), load, clear, record_error, list and get over a few sessions and
users against both stores side by side. Every call must give the same
result on both, or fail with the same error type; after every step the
whole visible state must match: the summaries and failed runs of every
session, and the transcripts of the sessions the step named (a stray write
to another session shows in its summary; every transcript is compared again
when an example ends). Refs differ between the stores by design, so they
are paired through the session they belong to.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)

from anvia_django.core.memory import (
    InProcessMemoryStore,
    MemoryAppendInput,
    MemoryContext,
    MemoryConversation,
    MemoryConversationListOptions,
    MemoryConversationSummary,
    MemoryErrorInput,
    Message,
)
from anvia_django.models import Conversation, FailedRun, MemoryMessage
from anvia_django.store import DjangoMemoryStore
from tests.helpers import run

from .budget import scaled
from .report import record

pytestmark = pytest.mark.django_db

SESSIONS = ["s-0", "s-1", "s-2", "s-3"]
USERS: list[str | None] = [None, "alice", "bob"]
RUN_IDS = ["run-a", "run-b", "run-c"]
LIST_LIMITS = [-1, 0, 1, 2, 3, 100, True]
ERRORS: list[BaseException] = [ValueError("model said no"), TimeoutError(), KeyError("k")]

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)
valid_messages = st.builds(
    lambda role, content, extra: {"role": role, "content": content, **extra},
    st.sampled_from(["user", "assistant", "tool", "system"]),
    st.text(max_size=20),
    st.dictionaries(st.sampled_from(["name", "tool_calls", "meta"]), json_values, max_size=2),
)
# Rare inputs that both stores must refuse the same way.
invalid_messages: st.SearchStrategy[Any] = st.sampled_from(
    [
        {"content": "no role"},
        {"role": ""},
        {"role": "user", "content": "nul \x00"},
        {"role": "user", "score": float("nan")},
        {"role": "user", "n": 2**64},
        "not an object",
    ]
)
message_lists = st.lists(
    st.one_of(valid_messages, valid_messages, valid_messages, invalid_messages), max_size=3
)
metadata = st.none() | st.dictionaries(st.sampled_from(["plan", "tag"]), json_scalars, max_size=2)


@dataclass(frozen=True)
class Outcome:
    value: Any = None
    error: type[BaseException] | None = None


async def outcome_of(call: Callable[[], Awaitable[Any]]) -> Outcome:
    try:
        return Outcome(value=await call())
    except Exception as exc:  # the error type is the observable result
        return Outcome(error=type(exc))


class StoresAgree(RuleBasedStateMachine):
    load_limit: int | None = None
    # Every session a rule can name: all of them are compared when an example ends.
    sessions: ClassVar[list[str]] = SESSIONS

    def __init__(self) -> None:
        super().__init__()
        # Each example starts from empty tables (the test's transaction
        # rolls everything back at the end anyway).
        FailedRun.objects.all().delete()
        MemoryMessage.objects.all().delete()
        Conversation.objects.all().delete()
        self.django = DjangoMemoryStore(load_limit=self.load_limit)
        self.reference = InProcessMemoryStore(load_limit=self.load_limit)
        self.last_append: MemoryAppendInput | None = None
        # session id -> (django ref, reference ref) while the conversation lives
        self.live_refs: dict[str, tuple[str, str]] = {}
        self.dead_refs: list[tuple[str, str]] = []
        self.operations = 0
        # Sessions named since the last check, and whether a call ran since.
        self.touched: set[str] = set()
        self.unchecked = False
        self.summaries: dict[str, MemoryConversationSummary] = {}

    # Calling both stores

    def both(self, call: Callable[[Any], Awaitable[Any]]) -> tuple[Any, Any]:
        """Run ``call`` on each store; require the same outcome kind and error type."""
        self.operations += 2
        self.unchecked = True
        ours = run(outcome_of, lambda: call(self.django))
        theirs = run(outcome_of, lambda: call(self.reference))
        assert ours.error == theirs.error, (ours, theirs)
        return ours.value, theirs.value

    def touch(self, *sessions: str) -> None:
        """Mark ``sessions`` for the per-conversation comparisons after this step."""
        self.touched.update(sessions)

    # Rules

    @initialize()
    def start(self) -> None:
        self.check_state()

    @rule(
        session=st.sampled_from(SESSIONS),
        user=st.sampled_from(USERS),
        run_id=st.sampled_from(RUN_IDS),
        turn=st.integers(min_value=0, max_value=3),
        messages=message_lists,
        meta=metadata,
    )
    def append(
        self,
        session: str,
        user: str | None,
        run_id: str,
        turn: int,
        messages: list[Message],
        meta: dict[str, Any] | None,
    ) -> None:
        request = MemoryAppendInput(MemoryContext(session, user, meta), run_id, turn, messages)
        self.touch(session)
        self.both(lambda store: store.append(request))
        self.last_append = request

    @rule()
    def retry_last_append(self) -> None:
        # A caller retrying after an ambiguous failure: must not duplicate.
        if self.last_append is not None:
            request = self.last_append
            self.touch(request.context.session_id)
            self.both(lambda store: store.append(request))

    @rule(session=st.sampled_from(SESSIONS), user=st.sampled_from(USERS))
    def load(self, session: str, user: str | None) -> None:
        context = MemoryContext(session, user)
        self.touch(session)
        ours, theirs = self.both(lambda store: store.load(context))
        assert ours == theirs

    @rule(session=st.sampled_from(SESSIONS), user=st.sampled_from(USERS))
    def clear(self, session: str, user: str | None) -> None:
        context = MemoryContext(session, user)
        # A clear may end a lineage other sessions show: compare them all.
        self.touch(*self.sessions)
        self.both(lambda store: store.clear(context))

    @rule(
        session=st.sampled_from(SESSIONS),
        user=st.sampled_from(USERS),
        run_id=st.sampled_from(RUN_IDS),
        error=st.sampled_from(ERRORS),
        messages=message_lists,
        meta=metadata,
    )
    def record_error(
        self,
        session: str,
        user: str | None,
        run_id: str,
        error: BaseException,
        messages: list[Message],
        meta: dict[str, Any] | None,
    ) -> None:
        request = MemoryErrorInput(MemoryContext(session, user, meta), run_id, error, messages)
        self.touch(session)
        self.both(lambda store: store.record_error(request))

    @rule(limit=st.sampled_from(LIST_LIMITS), user=st.sampled_from([*USERS, "nobody"]))
    def list_conversations(self, limit: int, user: str | None) -> None:
        options = MemoryConversationListOptions(limit=limit, user_id=user)
        ours, theirs = self.both(lambda store: store.inspector.list_conversations(options))
        if ours is not None:
            self.assert_same_summaries(ours, theirs)

    @rule(session=st.sampled_from(SESSIONS))
    def get_live(self, session: str) -> None:
        self.check_state()  # refreshes live_refs
        if session in self.live_refs:
            ours_ref, theirs_ref = self.live_refs[session]
            ours = run(self.django.inspector.get_conversation, ours_ref)
            theirs = run(self.reference.inspector.get_conversation, theirs_ref)
            self.operations += 2
            assert ours is not None
            assert theirs is not None
            self.assert_same_conversation(ours, theirs)

    @rule(data=st.data())
    def get_dead_or_foreign(self, data: st.DataObject) -> None:
        # A ref from before a clear, the other store's ref, or garbage: None on both.
        candidates = list(self.dead_refs)
        candidates += [(theirs, ours) for ours, theirs in self.live_refs.values()]
        candidates += [("", ""), ("../x", "../x"), ("A" * 40, "A" * 40)]
        ours_ref, theirs_ref = data.draw(st.sampled_from(candidates))
        self.operations += 2
        assert run(self.django.inspector.get_conversation, ours_ref) is None
        assert run(self.reference.inspector.get_conversation, theirs_ref) is None

    # What must hold after every step

    @invariant()
    def stores_agree(self) -> None:
        self.check_state()
        self.check_conversations(self.touched)
        self.touched.clear()
        self.unchecked = False

    def check_state(self) -> None:
        """The summaries and failed runs of every session agree; refreshes the refs."""
        everything = MemoryConversationListOptions(limit=1000)
        ours = run(self.django.inspector.list_conversations, everything)
        theirs = run(self.reference.inspector.list_conversations, everything)
        self.assert_same_summaries(ours, theirs)
        refs = {o.session_id: (o.ref, t.ref) for o, t in zip(ours, theirs, strict=True)}
        for session, pair in self.live_refs.items():
            if refs.get(session) != pair:
                self.dead_refs.append(pair)
        self.live_refs = refs
        self.summaries = {summary.session_id: summary for summary in ours}
        self.assert_same_failed_runs()

    def check_conversations(self, sessions: set[str]) -> None:
        """The stored conversations of ``sessions`` are whole and consistent."""
        for session in sessions & self.summaries.keys():
            summary = self.summaries[session]
            conversation = run(self.django.inspector.get_conversation, summary.ref)
            assert conversation is not None
            messages = conversation.messages
            assert [m.position for m in messages] == list(range(len(messages)))
            assert summary.message_count == len(messages)
            assert summary.created_at <= summary.updated_at
            assert all(summary.created_at <= m.created_at <= summary.updated_at for m in messages)

    def assert_same_summaries(
        self, ours: list[MemoryConversationSummary], theirs: list[MemoryConversationSummary]
    ) -> None:
        def visible(summary: MemoryConversationSummary) -> tuple[Any, ...]:
            return (summary.session_id, summary.user_id, summary.metadata, summary.message_count)

        assert [visible(s) for s in ours] == [visible(s) for s in theirs]
        moments = [s.updated_at for s in ours]
        assert moments == sorted(moments, reverse=True)
        for o, t in zip(ours, theirs, strict=True):
            if o.session_id in self.live_refs:
                assert (o.ref, t.ref) == self.live_refs[o.session_id], "a ref changed"
            assert (o.ref, t.ref) not in self.dead_refs, "a cleared ref came back"

    def assert_same_conversation(
        self, ours: MemoryConversation, theirs: MemoryConversation
    ) -> None:
        def visible(conversation: MemoryConversation) -> list[tuple[Any, ...]]:
            return [(m.position, m.run_id, m.turn, m.message) for m in conversation.messages]

        assert (ours.session_id, ours.user_id, ours.metadata, ours.message_count) == (
            theirs.session_id,
            theirs.user_id,
            theirs.metadata,
            theirs.message_count,
        )
        assert visible(ours) == visible(theirs)

    def assert_same_failed_runs(self) -> None:
        ours: dict[str, list[tuple[Any, ...]]] = {}
        # Instances, not values: with encryption at rest on they open sealed records.
        for failed in FailedRun.objects.select_related("conversation").order_by("pk"):
            ours.setdefault(failed.conversation.session_id, []).append(
                (failed.run_id, failed.error_type, failed.error_message, failed.messages)
            )
        theirs = {
            session: [
                (r.run_id, r.error_type, r.error_message, r.messages)
                for r in self.reference.failed_runs(session)
            ]
            for session in SESSIONS
            if self.reference.failed_runs(session)
        }
        assert ours == theirs

    def teardown(self) -> None:
        # Runs after a failure too: compare in full only after a checked step.
        if not self.unchecked:
            self.check_state()
            self.check_conversations(set(self.sessions))
        record("model_based", sequences=1, operations=self.operations)


class StoresAgreeWithLoadLimit(StoresAgree):
    load_limit = 3


MACHINE_SETTINGS = settings(
    max_examples=scaled(ci=20, long=400, smoke=10),
    stateful_step_count=scaled(ci=25, long=60),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.mark.parametrize("machine", [StoresAgree, StoresAgreeWithLoadLimit])
def test_django_store_matches_the_reference_store(machine: type[StoresAgree]) -> None:
    run_state_machine_as_test(machine, settings=MACHINE_SETTINGS)
