"""What the conformance suite does not see: each channel value is stored
once per version, a read costs a fixed number of queries, and with
encryption at rest on the rows hold no plain text, a value moved to another
row does not open, and deleting a thread destroys its key."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from langgraph.checkpoint.base import empty_checkpoint

from anvia_django.encryption.envelope import DecryptionError
from anvia_django.encryption.keys import owner_of_thread
from anvia_django.integrations.langgraph import DjangoSaver
from anvia_django.integrations.langgraph.models import (
    LangGraphBlob,
    LangGraphCheckpoint,
    LangGraphWrite,
)
from anvia_django.models import DataKey
from anvia_django.persistence.codec.reencrypt import renew_keys
from anvia_django.persistence.dialects import PostgreSQLDialect, dialect_for
from anvia_django.persistence.dialects.checkpoints import forget_missing_checkpoint_functions
from tests.encryption.support import KEY_1, KEY_2, encryption

SECRET = "the launch code is 0000"
THREAD_1: Any = {"configurable": {"thread_id": "t1"}}
THREAD_2: Any = {"configurable": {"thread_id": "t2"}}


def step(saver: DjangoSaver, parent: Any, values: dict[str, Any], versions: dict[str, int]) -> Any:
    """A checkpoint after ``parent`` whose channels hold ``values`` at
    ``versions``, of which those newer than the parent's are new."""
    previous = saver.get_tuple(parent)
    known = previous.checkpoint["channel_versions"] if previous else {}
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = values
    checkpoint["channel_versions"] = dict(versions)
    new: dict[str, Any] = {c: v for c, v in versions.items() if known.get(c) != v}
    return saver.put(parent, checkpoint, {"source": "loop", "step": len(known)}, new)


def statements(captured: CaptureQueriesContext) -> int:
    """The statements on the saver's tables and functions (not the data
    keys' of a run with encryption on, nor the test transaction's savepoints)."""
    return sum("langgraph" in query["sql"] for query in captured.captured_queries)


def checkpoint_id(config: Any) -> str:
    return str(config["configurable"]["checkpoint_id"])


def grow(saver: DjangoSaver, thread_id: str, turns: int, *, after: Any = None) -> list[Any]:
    """``turns`` checkpoints: "messages" changes every time, "system" never;
    from the thread's start, or after ``after`` (a config of the thread)."""
    config: Any = after or {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    done = 0
    if after is not None:
        previous = saver.get_tuple(after)
        assert previous is not None
        done = len(previous.checkpoint["channel_values"]["messages"])
    configs = []
    for turn in range(done + 1, done + turns + 1):
        values = {"system": "be brief", "messages": [f"{SECRET} #{n}" for n in range(turn)]}
        config = step(saver, config, values, {"system": 1, "messages": turn})
        configs.append(config)
    return configs


@pytest.mark.django_db
def test_a_value_is_stored_once_per_version() -> None:
    saver = DjangoSaver()
    configs = grow(saver, "t1", 5)

    stored = sorted(LangGraphBlob.objects.filter(thread_id="t1").values_list("channel", "version"))
    assert stored == [("messages", str(n)) for n in range(1, 6)] + [("system", "1")]
    # Every checkpoint reads back whole, the unchanged channel included.
    for turn, config in enumerate(configs, 1):
        found = saver.get_tuple(config)
        assert found is not None
        values = found.checkpoint["channel_values"]
        assert values == {
            "system": "be brief",
            "messages": [f"{SECRET} #{n}" for n in range(turn)],
        }


@pytest.mark.django_db
def test_a_put_is_one_statement_on_postgresql_and_a_tasks_writes_one_everywhere() -> None:
    # PostgreSQL: anvia_django_langgraph_put (migration 0016); elsewhere, or
    # under the generic dialect, a transaction of steps.
    saver = DjangoSaver()
    (parent,) = grow(saver, "t1", 1)
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"system": "be brief", "messages": ["one", "two"]}
    checkpoint["channel_versions"] = {"system": 1, "messages": 2}
    with CaptureQueriesContext(connection) as put:
        config = saver.put(parent, checkpoint, {"source": "loop", "step": 1}, {"messages": 2})
    with CaptureQueriesContext(connection) as writes:
        saver.put_writes(config, [("messages", "pending"), ("other", 1)], "task-1")
    if isinstance(dialect_for("default"), PostgreSQLDialect):
        assert statements(put) == 1
    else:
        assert statements(put) > 1
    assert statements(writes) == 1
    latest = saver.get_tuple(THREAD_1)
    assert latest is not None
    assert checkpoint_id(latest.config) == checkpoint_id(config)
    assert latest.checkpoint["channel_values"] == checkpoint["channel_values"]
    assert latest.pending_writes == [("task-1", "messages", "pending"), ("task-1", "other", 1)]


@pytest.mark.postgres
@pytest.mark.django_db
@pytest.mark.parametrize("dropped", ["read", "put"])
def test_without_a_function_puts_and_reads_run_in_steps(
    dropped: str, caplog: pytest.LogCaptureFixture
) -> None:
    if not isinstance(dialect_for("default"), PostgreSQLDialect):
        pytest.skip("the functions are PostgreSQL's dialect's")
    # As before ``migrate`` created it; the test's transaction restores it.
    saver = DjangoSaver()
    configs = grow(saver, "t1", 2)
    with connection.cursor() as cursor:
        cursor.execute(f"DROP FUNCTION anvia_django_langgraph_{dropped}")
    try:
        with CaptureQueriesContext(connection) as read:
            latest = saver.get_tuple(THREAD_1)  # without its function: in steps
        configs += grow(saver, "t1", 2, after=configs[-1])
        again = saver.get_tuple(THREAD_1)
    finally:
        forget_missing_checkpoint_functions()
    assert latest is not None
    assert again is not None
    assert checkpoint_id(latest.config) == checkpoint_id(configs[1])
    assert checkpoint_id(again.config) == checkpoint_id(configs[-1])
    assert again.checkpoint["channel_values"]["messages"] == [f"{SECRET} #{n}" for n in range(4)]
    assert LangGraphCheckpoint.objects.count() == 4
    # Read in steps: the row, the failed call (in its savepoint), then three queries.
    assert statements(read) == (1 + 4 if dropped == "read" else 2)
    # Said once, not on every call.
    assert [record.getMessage() for record in caplog.records].count(
        "The database of alias 'default' lacks the LangGraph functions of migration 0016: "
        "checkpoints are stored and read in steps until `manage.py migrate` has run "
        "(and this process has restarted, unless it ran it)."
    ) == 1


@pytest.mark.django_db
def test_reads_cost_a_fixed_number_of_queries(django_assert_num_queries: Any) -> None:
    saver = DjangoSaver()
    configs = grow(saver, "t1", 12)
    saver.put_writes(configs[-1], [("messages", "pending")], "task-1")

    # The row, its values, the chains of the values stored as deltas, its
    # writes; on PostgreSQL the row, then the rest in one call of
    # anvia_django_langgraph_read (migration 0016).
    with CaptureQueriesContext(connection) as read:
        latest = saver.get_tuple(THREAD_1)
    assert statements(read) == (2 if isinstance(dialect_for("default"), PostgreSQLDialect) else 4)
    assert latest is not None
    assert latest.pending_writes == [("task-1", "messages", "pending")]
    assert latest.checkpoint["channel_values"]["messages"] == [f"{SECRET} #{n}" for n in range(12)]
    with django_assert_num_queries(4):  # however many checkpoints
        listed = list(saver.list(THREAD_1))
    assert [checkpoint_id(found.config) for found in listed] == list(map(checkpoint_id, configs))[
        ::-1
    ]
    assert [len(found.checkpoint["channel_values"]["messages"]) for found in listed] == list(
        range(12, 0, -1)
    )


@pytest.mark.django_db
def test_sealed_rows_hold_no_plain_text_and_do_not_move() -> None:
    with override_settings(ANVIA_DJANGO=encryption()):
        saver = DjangoSaver()
        configs = grow(saver, "t1", 2)
        saver.put_writes(configs[-1], [("messages", SECRET)], "task-1")
        grow(saver, "t2", 1)

        raw = [
            bytes(blob)
            for model in (LangGraphBlob, LangGraphWrite)
            for blob in model.objects.values_list("blob", flat=True)
            if blob is not None
        ]
        assert raw
        assert not any(b"launch code" in blob or b"be brief" in blob for blob in raw)
        assert set(LangGraphBlob.objects.values_list("type", flat=True)) == {"sealed"}
        latest = saver.get_tuple(configs[-1])
        assert latest is not None
        assert latest.checkpoint["channel_values"]["messages"] == [f"{SECRET} #0", f"{SECRET} #1"]
        assert latest.pending_writes == [("task-1", "messages", SECRET)]

        # A value of t2 copied over the one t1 holds at the same place.
        other = LangGraphBlob.objects.get(thread_id="t2", channel="messages")
        LangGraphBlob.objects.filter(thread_id="t1", channel="messages", version="1").update(
            blob=other.blob
        )
        with pytest.raises(DecryptionError, match="thread 't1'"):
            saver.get_tuple(configs[0])


@pytest.mark.django_db
def test_deleting_a_sealed_thread_destroys_its_key(
    django_capture_on_commit_callbacks: Any,
) -> None:
    with override_settings(ANVIA_DJANGO=encryption()):
        saver = DjangoSaver()
        grow(saver, "t1", 2)
        grow(saver, "t2", 1)
        owners = {owner_of_thread("t1"), owner_of_thread("t2")}
        assert set(DataKey.objects.values_list("owner", flat=True)) >= owners

        with django_capture_on_commit_callbacks(execute=True):
            saver.delete_thread("t1")

        assert not LangGraphCheckpoint.objects.filter(thread_id="t1").exists()
        assert not LangGraphBlob.objects.filter(thread_id="t1").exists()
        left = set(DataKey.objects.values_list("owner", flat=True))
        assert owner_of_thread("t1") not in left
        assert owner_of_thread("t2") in left
        assert saver.get_tuple(THREAD_2) is not None


@pytest.mark.django_db
def test_reencryption_leaves_a_threads_key_in_place() -> None:
    """``rotate-keys --reencrypt`` seals no checkpoint again: renewing (and
    later retiring) a thread's key would lose its values."""
    with override_settings(ANVIA_DJANGO=encryption(k1=KEY_1)):
        saver = DjangoSaver()
        configs = grow(saver, "t1", 2)
    with override_settings(ANVIA_DJANGO=encryption("k2", k1=KEY_1, k2=KEY_2)):
        renew_keys("default", batch_size=10)

        assert DataKey.objects.filter(owner=owner_of_thread("t1")).count() == 1
        found = saver.get_tuple(configs[-1])
        assert found is not None
        assert found.checkpoint["channel_values"]["system"] == "be brief"


@pytest.mark.django_db
def test_deleting_a_run_deletes_the_values_only_its_checkpoints_named() -> None:
    saver = DjangoSaver()
    config: Any = {"configurable": {"thread_id": "t1", "checkpoint_ns": ""}}
    kept = step(
        saver, config, {"system": "be brief", "messages": ["a"]}, {"system": 1, "messages": 1}
    )
    run_2: Any = {"configurable": {**kept["configurable"]}, "metadata": {"run_id": "run-2"}}
    step(saver, run_2, {"system": "be brief", "messages": ["a", "b"]}, {"system": 1, "messages": 2})

    saver.delete_for_runs(["run-2"])

    stored = sorted(LangGraphBlob.objects.values_list("channel", "version"))
    assert stored == [("messages", "1"), ("system", "1")]  # "system" 1 was shared
    found = saver.get_tuple(THREAD_1)
    assert found is not None
    assert found.checkpoint["channel_values"] == {"system": "be brief", "messages": ["a"]}
