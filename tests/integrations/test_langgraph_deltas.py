"""List channels stored as deltas (``integrations/langgraph/deltas.py``): a
version extending its parent's list stores only the appended items, every
checkpoint still reads back whole, and no removal takes a row that a kept
value's chain needs."""

from __future__ import annotations

from typing import Any, cast

import pytest
from django.test import override_settings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.checkpoint.base import create_checkpoint, empty_checkpoint

from anvia_django.integrations.langgraph import DjangoSaver, deltas
from anvia_django.integrations.langgraph.models import (
    LangGraphBlob,
    LangGraphCheckpoint,
    LangGraphWrite,
)
from anvia_django.integrations.langgraph.places import as_bytes, blob_place, loaded
from anvia_django.persistence.codec import codec_for
from tests.encryption.support import encryption

SECRET = "the launch code is 0000"
THREADS = ("a", "b")


def put(saver: DjangoSaver, parent: Any, messages: list[str], run: str) -> Any:
    """A checkpoint after ``parent`` (a config, or a thread's first) whose
    "messages" are ``messages``: a new version when they changed."""
    before = saver.get_tuple(parent) if "checkpoint_id" in parent["configurable"] else None
    checkpoint = create_checkpoint(before.checkpoint if before else empty_checkpoint(), None, 1)
    versions = dict(checkpoint["channel_versions"])
    new: dict[str, Any] = {}
    if before is None or before.checkpoint["channel_values"].get("messages") != messages:
        new["messages"] = saver.get_next_version(cast(Any, versions.get("messages")), None)
        versions["messages"] = new["messages"]
    checkpoint["channel_versions"] = versions
    checkpoint["channel_values"] = {"messages": messages}
    return saver.put(parent, checkpoint, {"source": "loop", "step": 1, "run_id": run}, new)


def stored_items() -> int:
    """The items the "messages" rows hold, summed over the rows."""
    total = 0
    saver = DjangoSaver()
    codec = codec_for("default")
    for row in LangGraphBlob.objects.filter(channel="messages"):
        place = blob_place(row.checkpoint_ns, row.channel, row.version)
        typed = codec.open_checkpoint_value(row.thread_id, place, (row.type, as_bytes(row.blob)))
        total += len(loaded(saver.serde, typed))
    return total


@pytest.mark.django_db
def test_appended_items_are_stored_once_and_read_back_whole(monkeypatch: Any) -> None:
    monkeypatch.setattr(deltas, "FULL_EVERY", 4)
    saver = DjangoSaver()
    config: Any = {"configurable": {"thread_id": "t1", "checkpoint_ns": ""}}
    messages: list[str] = []
    for turn in range(10):
        messages = [*messages, f"{SECRET} #{turn}"]
        config = put(saver, config, messages, "run-1")
    # Anchors at versions 1, 5 and 9 (1 + 5 + 9 items), one item in each delta.
    assert stored_items() == 1 + 5 + 9 + 7
    depths = sorted(LangGraphBlob.objects.values_list("depth", flat=True))
    assert depths == [0, 0, 0, 1, 1, 1, 2, 2, 3, 3]
    listed = list(saver.list({"configurable": {"thread_id": "t1"}}))
    assert [len(found.checkpoint["channel_values"]["messages"]) for found in listed] == list(
        range(10, 0, -1)
    )
    # A list that does not extend its parent's is stored whole; a saver
    # that did not store the parent (another process) stores whole too.
    changed = put(saver, config, ["edited", *messages[1:]], "run-1")
    other = put(DjangoSaver(), changed, [*messages, "more"], "run-1")
    found = saver.get_tuple(other)
    assert found is not None
    assert found.checkpoint["channel_values"]["messages"] == [*messages, "more"]
    assert stored_items() == 1 + 5 + 9 + 7 + 10 + 11


@pytest.mark.django_db
def test_a_delta_whose_base_changed_is_stored_whole() -> None:
    # The saver remembers the base's digest; a base row no longer as it
    # stored it (another process replaced it) is not built on: the value is
    # stored whole, in the same put (on PostgreSQL, a second call of the
    # put function after the first stored nothing).
    saver = DjangoSaver()
    config: Any = {"configurable": {"thread_id": "t1", "checkpoint_ns": ""}}
    config = put(saver, config, ["one"], "run-1")
    config = put(saver, config, ["one", "two"], "run-1")
    assert LangGraphBlob.objects.filter(base_version__isnull=False).count() == 1
    LangGraphBlob.objects.filter(base_version__isnull=False).update(digest="not-as-stored")
    config = put(saver, config, ["one", "two", "three"], "run-1")
    newest = LangGraphBlob.objects.order_by("-version").first()
    assert newest is not None
    assert (newest.base_version, newest.depth) == (None, 0)
    assert LangGraphCheckpoint.objects.count() == 3
    found = saver.get_tuple(config)
    assert found is not None
    assert found.checkpoint["channel_values"]["messages"] == ["one", "two", "three"]
    # The chain starts again there: the next version is a delta on it.
    put(saver, config, ["one", "two", "three", "four"], "run-1")
    assert LangGraphBlob.objects.order_by("-version").values_list("base_version")[0] == (
        newest.version,
    )


@pytest.mark.django_db
def test_sealed_deltas_hold_no_plain_text() -> None:
    with override_settings(ANVIA_DJANGO=encryption()):
        saver = DjangoSaver()
        config: Any = {"configurable": {"thread_id": "t1", "checkpoint_ns": ""}}
        messages: list[str] = []
        for turn in range(3):
            messages = [*messages, f"{SECRET} #{turn}"]
            config = put(saver, config, messages, "run-1")
        assert LangGraphBlob.objects.filter(base_version__isnull=False).count() == 2
        for blob in LangGraphBlob.objects.values_list("blob", flat=True):
            assert SECRET.encode() not in bytes(cast(Any, blob))
        found = saver.get_tuple(config)
        assert found is not None
        assert found.checkpoint["channel_values"]["messages"] == messages


RUNS = ("run-1", "run-2", "run-3")
operations = st.tuples(
    # Mostly puts, so that chains grow between removals.
    st.sampled_from(
        ["put"] * 7 + ["prune", "prune", "delete_for_runs", "copy", "copy", "delete_thread"]
    ),
    st.sampled_from(THREADS),
    # Which of the thread's checkpoints is the parent: mostly its latest.
    st.one_of(st.just(-1), st.just(-1), st.integers(0, 20)),
    st.sampled_from(["append", "append", "append", "same", "edit"]),
    st.sampled_from(RUNS),
    st.booleans(),  # a second saver, which remembers nothing of the first's
    st.sampled_from(THREADS),  # a copy's target
)


@pytest.mark.django_db
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=st.lists(operations, min_size=6, max_size=30))
def test_every_remaining_checkpoint_reads_back(monkeypatch: Any, steps: list[Any]) -> None:
    monkeypatch.setattr(deltas, "FULL_EVERY", 3)
    for model in (LangGraphWrite, LangGraphBlob, LangGraphCheckpoint):
        model.objects.all().delete()
    first, second = DjangoSaver(), DjangoSaver()
    # What each thread holds: checkpoint id -> (messages, run), in put order.
    expected: dict[str, dict[str, tuple[list[str], str]]] = {thread: {} for thread in THREADS}
    counter = 0
    for kind, thread, choice, change, run, other, target in steps:
        if kind == "put":
            held = list(expected[thread])
            config: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
            parent: list[str] = []
            if held:
                parent_id = held[-1] if choice < 0 else held[choice % len(held)]
                config["configurable"]["checkpoint_id"] = parent_id
                parent = expected[thread][parent_id][0]
            counter += 1
            if change == "append":
                messages = [*parent, *(f"m{counter}.{n}" for n in range(counter % 3 + 1))]
            elif change == "edit" and parent:
                messages = [f"edited {counter}", *parent[1:]]
            else:
                messages = list(parent)
            made = put(second if other else first, config, messages, run)
            expected[thread][made["configurable"]["checkpoint_id"]] = (messages, run)
        elif kind == "prune":
            first.prune([thread])
            if expected[thread]:
                latest = max(expected[thread])
                expected[thread] = {latest: expected[thread][latest]}
        elif kind == "delete_thread":
            first.delete_thread(thread)
            expected[thread] = {}
        elif kind == "delete_for_runs":
            first.delete_for_runs([run])
            for each in THREADS:
                expected[each] = {
                    checkpoint_id: held
                    for checkpoint_id, held in expected[each].items()
                    if held[1] != run
                }
        else:
            first.copy_thread(thread, target)
            expected[target] = {**expected[thread], **expected[target]}
        for thread in THREADS:
            listed = {
                found.config["configurable"]["checkpoint_id"]: found.checkpoint[
                    "channel_values"
                ].get("messages", [])
                for found in first.list({"configurable": {"thread_id": thread}})
            }
            assert listed == {
                checkpoint_id: held[0] for checkpoint_id, held in expected[thread].items()
            }
            for checkpoint_id, (messages, _) in expected[thread].items():
                one = first.get_tuple(
                    {
                        "configurable": {
                            "thread_id": thread,
                            "checkpoint_ns": "",
                            "checkpoint_id": checkpoint_id,
                        }
                    }
                )
                assert one is not None
                assert one.checkpoint["channel_values"].get("messages", []) == messages
