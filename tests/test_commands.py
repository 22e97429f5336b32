"""``manage.py anvia_memory``: every subcommand, its bad input, and its batching."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import timedelta
from io import StringIO
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anvia_django import signals
from anvia_django.core.memory import MemoryContext, MemoryErrorInput
from anvia_django.management.durations import parse_age
from anvia_django.models import Conversation, FailedRun, MemoryMessage
from anvia_django.persistence import (
    ConversationFilter,
    ExportedAdkState,
    ExportedMessage,
    append_messages,
    erase_user_conversations,
    get_conversation_with_messages,
    iter_export_records,
    record_failed_run,
)
from anvia_django.persistence.transcript import deletion as deletion_module
from tests.helpers import append_input, assistant, snapshot, user

pytestmark = pytest.mark.django_db


def seed(session_id: str, *, user_id: str | None = None, turns: int = 1) -> Conversation:
    for turn in range(1, turns + 1):
        append_messages(
            append_input(
                session_id,
                [user(f"question {turn}"), assistant(f"answer {turn}")],
                run_id=f"run-{turn}",
                user_id=user_id,
            )
        )
    return Conversation.objects.get(session_id=session_id)


def age(conversation: Conversation, days: int) -> None:
    Conversation.objects.filter(pk=conversation.pk).update(
        updated_at=timezone.now() - timedelta(days=days)
    )


def memory(*args: str, **options: Any) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("anvia_memory", *args, stdout=out, stderr=err, **options)
    return out.getvalue(), err.getvalue()


# --- list -------------------------------------------------------------------


def test_list_is_newest_first_and_honours_user_and_limit() -> None:
    old, middle, new = seed("s-old", user_id="u1"), seed("s-mid", user_id="u2"), seed("s-new")
    age(old, 3)
    age(middle, 2)
    age(new, 1)

    out, _ = memory("list")
    lines = out.splitlines()
    assert lines[0].startswith("UPDATED")
    assert [line.split()[-1] for line in lines[1:]] == ["s-new", "s-mid", "s-old"]

    out, _ = memory("list", "--user", "u1")
    assert [line.split()[-1] for line in out.splitlines()[1:]] == ["s-old"]

    out, _ = memory("list", "--limit", "2")
    assert [line.split()[-1] for line in out.splitlines()[1:]] == ["s-new", "s-mid"]


def test_list_says_so_when_there_is_nothing() -> None:
    assert memory("list")[0].strip() == "No conversations."


@pytest.mark.parametrize("limit", ["0", "-3", "many", "1.5"])
def test_list_refuses_a_bad_limit(limit: str) -> None:
    with pytest.raises(CommandError, match="--limit"):
        memory("list", "--limit", limit)


def test_bad_arguments_exit_non_zero_from_the_shell() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "django", "anvia_memory", "prune", "--older-than", "soon"],
        capture_output=True,
        text=True,
        env={"DJANGO_SETTINGS_MODULE": "tests.settings", "PATH": ""},
        cwd=Path(__file__).resolve().parent.parent,
        check=False,
    )
    assert result.returncode != 0
    assert "--older-than" in result.stderr


def test_an_action_is_required() -> None:
    with pytest.raises(CommandError):
        memory()


# --- show -------------------------------------------------------------------


def test_show_renders_the_transcript_with_tool_calls_by_session_id_or_ref() -> None:
    append_messages(
        append_input(
            "s-tools",
            [
                user("Where is order A1?"),
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{"id": "c1", "name": "lookup", "arguments": {"id": "A1"}}],
                },
                {"role": "tool", "tool_call_id": "c1", "name": "lookup", "content": "shipped"},
                assistant("It has shipped."),
            ],
            user_id="u1",
        )
    )
    ref = Conversation.objects.get(session_id="s-tools").ref

    by_session, _ = memory("show", "s-tools")
    by_ref, _ = memory("show", "--", ref)  # a ref may start with "-"
    assert by_session == by_ref
    assert f"Ref       {ref}" in by_session
    assert "[0] turn 1 user: Where is order A1?" in by_session
    assert '-> lookup({"id": "A1"}) [call c1]' in by_session
    assert "[2] turn 1 tool lookup (call c1): shipped" in by_session
    assert "[3] turn 1 assistant: It has shipped." in by_session


def test_show_refuses_an_unknown_session() -> None:
    with pytest.raises(CommandError, match="No conversation"):
        memory("show", "nobody")


def test_show_refuses_an_empty_session_id() -> None:
    with pytest.raises(CommandError, match="must not be empty"):
        memory("show", "  ")


# --- export -----------------------------------------------------------------


def read_jsonl(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines()]


def test_export_writes_each_conversation_then_its_messages() -> None:
    first = seed("s-1", user_id="u1", turns=2)
    seed("s-2", user_id="u2")

    out, err = memory("export")
    records = read_jsonl(out)
    assert [(r["type"], r["sessionId"]) for r in records] == [
        ("conversation", "s-1"),
        *[("message", "s-1")] * 4,
        ("conversation", "s-2"),
        *[("message", "s-2")] * 2,
    ]
    header = records[0]
    assert header["ref"] == first.ref
    assert header["userId"] == "u1"
    assert header["messageCount"] == 4
    assert header["updatedAt"].endswith("+00:00")
    assert [r["position"] for r in records[1:5]] == [0, 1, 2, 3]
    assert records[1]["message"] == user("question 1")
    assert records[3]["runId"] == "run-2"
    # stdout carries nothing but JSON Lines; the summary goes to stderr.
    assert err.strip() == "Exported 2 conversations (6 messages)."


def test_export_of_one_user_or_one_session() -> None:
    seed("s-1", user_id="u1")
    seed("s-2", user_id="u2")
    seed("s-3", user_id="u1")
    by_user = read_jsonl(memory("export", "--user", "u1")[0])
    assert {r["sessionId"] for r in by_user} == {"s-1", "s-3"}
    ref = Conversation.objects.get(session_id="s-2").ref
    for session in ("s-2", ref):
        assert {
            r["sessionId"] for r in read_jsonl(memory("export", f"--session={session}")[0])
        } == {"s-2"}


def test_export_to_a_file(tmp_path: Path) -> None:
    seed("s-1")
    target = tmp_path / "memory.jsonl"
    out, _ = memory("export", "--output", str(target))
    assert out.strip() == f"Exported 1 conversation (2 messages) to {target}."
    assert len(read_jsonl(target.read_text(encoding="utf-8"))) == 3
    assert list(tmp_path.iterdir()) == [target]


def test_a_failed_export_leaves_no_file_and_keeps_an_old_one(tmp_path: Path) -> None:
    seed("s-1")
    seed("s-2")
    target = tmp_path / "memory.jsonl"
    target.write_text("previous export\n", encoding="utf-8")
    real = iter_export_records

    def failing(*args: Any, **kwargs: Any) -> Any:
        for index, record in enumerate(real(*args, **kwargs)):
            if index == 3:
                raise RuntimeError("connection lost")
            yield record

    with (
        mock.patch("anvia_django.management.memory_ops.iter_export_records", failing),
        pytest.raises(RuntimeError),
    ):
        memory("export", "--output", str(target))
    assert target.read_text(encoding="utf-8") == "previous export\n"
    assert list(tmp_path.iterdir()) == [target]


def test_export_refuses_an_unknown_session_and_a_missing_directory(tmp_path: Path) -> None:
    seed("s-1")
    with pytest.raises(CommandError, match="No conversation"):
        memory("export", "--session", "nobody", "--output", str(tmp_path / "x.jsonl"))
    with pytest.raises(CommandError, match="not a directory"):
        memory("export", "--output", str(tmp_path / "missing" / "x.jsonl"))
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(CommandError):
        memory("export", "--session", "s-1", "--user", "u1")


def test_export_streams_in_pages_of_batch_size() -> None:
    for index in range(7):
        seed(f"s-{index}", turns=3)  # 6 messages each, 42 in all
    with CaptureQueriesContext(connection) as queries:
        records = iter_export_records(ConversationFilter(), batch_size=4)
        first = next(records)
        # Nothing beyond the first pages has been read yet.
        assert len(queries) == 2
        assert first.session_id == "s-0"
        rest = list(records)
    assert len(rest) == 7 + 42 - 1
    # Conversation pages: 4 + 3 + an empty one. Message pages per conversation
    # page: 24 rows -> 6 full pages + an empty one, 18 rows -> 5 pages.
    assert len(queries) == 3 + 7 + 5
    assert all("LIMIT 4" in query["sql"] for query in queries.captured_queries)


def test_export_query_count_does_not_grow_with_conversations_within_a_page(
    django_assert_num_queries: Any,
) -> None:
    for index in range(30):
        seed(f"s-{index}")
    # One conversation page, one message page (60 < 100), one empty page.
    with django_assert_num_queries(3):
        records = list(iter_export_records(ConversationFilter(), batch_size=100))
    assert len(records) == 90


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    sizes=st.lists(st.integers(min_value=0, max_value=6), max_size=6),
    batch_size=st.integers(min_value=1, max_value=5),
)
def test_export_matches_the_inspector_for_any_page_size(sizes: list[int], batch_size: int) -> None:
    from django.db import transaction

    with transaction.atomic():
        for index, size in enumerate(sizes):
            session = f"p-{index}"
            if size == 0:
                record_failed_run(  # a conversation without messages
                    MemoryErrorInput(MemoryContext(session), "r", RuntimeError("x"), [])
                )
            else:
                append_messages(append_input(session, [user(str(n)) for n in range(size)]))
        records = list(iter_export_records(ConversationFilter(), batch_size=batch_size))
        expected: list[Any] = []
        for conversation in Conversation.objects.order_by("id"):
            full = get_conversation_with_messages(conversation.ref)
            assert full is not None
            expected.append((full.session_id, full.message_count))
            expected.extend((full.session_id, m.position, m.message) for m in full.messages)
        actual = [
            (r.session_id, r.message.position, r.message.message)
            if isinstance(r, ExportedMessage)
            else (r.session_id, r.message_count)
            for r in records
            if not isinstance(r, ExportedAdkState)  # none here: no ADK session
        ]
        assert actual == expected
        transaction.set_rollback(True)


# --- clear ------------------------------------------------------------------


def test_clear_one_session_with_yes() -> None:
    seed("s-1")
    keep = seed("s-2")
    out, _ = memory("clear", "--session", "s-1", "--yes")
    assert out.strip() == "Deleted 1 conversation (2 messages)."
    assert list(Conversation.objects.values_list("session_id", flat=True)) == ["s-2"]
    assert MemoryMessage.objects.filter(conversation=keep).count() == 2


def test_clear_by_ref() -> None:
    conversation = seed("s-1")
    memory("clear", f"--session={conversation.ref}", "--no-input")
    assert not Conversation.objects.exists()


@pytest.mark.usefixtures("default_scope")
@pytest.mark.parametrize("action", ["clear", "show"])
def test_a_session_id_of_several_scopes_is_refused_until_a_ref_is_given(action: str) -> None:
    seed("shared", user_id="alice")
    bob = append_input("shared", [user("bob's")], user_id="bob")
    append_messages(bob)
    before = snapshot()
    with pytest.raises(CommandError, match="several conversations, one per scope") as refused:
        memory(action, "--session", "shared", "--yes") if action == "clear" else memory(
            action, "shared"
        )
    assert snapshot() == before
    bobs = Conversation.objects.get(session_id="shared", user_id="bob")
    assert bobs.ref in str(refused.value)
    if action == "clear":
        memory("clear", f"--session={bobs.ref}", "--yes")  # a ref may start with "-"
        assert list(Conversation.objects.values_list("user_id", flat=True)) == ["alice"]


def test_clear_asks_and_a_no_changes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    seed("s-1", user_id="u1")
    before = snapshot()
    questions: list[str] = []

    def answer(question: str) -> str:
        questions.append(question)
        return "no"

    monkeypatch.setattr("builtins.input", answer)
    with pytest.raises(CommandError, match="Cancelled; nothing was deleted"):
        memory("clear", "--user", "u1")
    assert snapshot() == before
    assert questions == [
        "Delete 1 conversation (2 messages) of user 'u1'? Type 'yes' to continue: "
    ]

    monkeypatch.setattr("builtins.input", lambda question: "yes")
    memory("clear", "--user", "u1")
    assert not Conversation.objects.exists()


def test_clear_treats_end_of_input_as_no(monkeypatch: pytest.MonkeyPatch) -> None:
    seed("s-1")

    def closed(question: str) -> str:
        raise EOFError

    monkeypatch.setattr("builtins.input", closed)
    with pytest.raises(CommandError, match="Cancelled"):
        memory("clear", "--session", "s-1")
    assert Conversation.objects.count() == 1


def test_erasure_deletes_every_session_of_the_user_and_only_those(
    django_capture_on_commit_callbacks: Any,
) -> None:
    for index in range(5):
        seed(f"mine-{index}", user_id="erase-me", turns=2)
    record_failed_run(
        MemoryErrorInput(MemoryContext("mine-0"), "run-x", RuntimeError("boom"), [user("q")])
    )
    other = seed("theirs", user_id="keep-me")
    anonymous = seed("anonymous")
    cleared: list[str] = []

    def receiver(sender: Any, session_id: str, **kwargs: Any) -> None:
        cleared.append(session_id)

    signals.conversation_cleared.connect(receiver)
    try:
        with django_capture_on_commit_callbacks(execute=True):
            out, _ = memory("clear", "--user", "erase-me", "--yes")
    finally:
        signals.conversation_cleared.disconnect(receiver)
    assert out.strip() == "Deleted 5 conversations (20 messages, 1 failed run)."
    assert set(Conversation.objects.values_list("pk", flat=True)) == {other.pk, anonymous.pk}
    assert not MemoryMessage.objects.filter(conversation__user_id="erase-me").exists()
    assert not FailedRun.objects.exists()
    assert sorted(cleared) == [f"mine-{index}" for index in range(5)]


def test_clear_of_nothing_is_reported_not_an_error() -> None:
    assert "nothing cleared" in memory("clear", "--session", "nobody", "--yes")[0]
    assert "nothing cleared" in memory("clear", "--user", "nobody", "--yes")[0]


@pytest.mark.parametrize(
    "args",
    [
        ("clear", "--yes"),
        ("clear", "--session", "s-1", "--user", "u1", "--yes"),
        ("clear", "--user", "", "--yes"),
        ("clear", "--session", "x" * 256, "--yes"),
    ],
)
def test_clear_refuses_bad_arguments_and_deletes_nothing(args: tuple[str, ...]) -> None:
    seed("s-1", user_id="u1")
    before = snapshot()
    with pytest.raises(CommandError):
        memory(*args)
    assert snapshot() == before


# --- prune ------------------------------------------------------------------


def seed_ages() -> dict[str, Conversation]:
    conversations = {}
    for name, days in (("ancient", 90), ("old", 40), ("recent", 10), ("today", 0)):
        conversations[name] = seed(name, turns=2)
        if days:
            age(conversations[name], days)
    return conversations


def test_prune_dry_run_reports_and_deletes_nothing() -> None:
    seed_ages()
    before = snapshot()
    out, _ = memory("prune", "--older-than", "30d", "--dry-run")
    assert out.startswith("Would delete 2 conversations (8 messages) last updated before ")
    assert out.rstrip().endswith("(dry run; nothing deleted).")
    assert snapshot() == before


def test_prune_deletes_what_the_dry_run_announced() -> None:
    seed_ages()
    memory("prune", "--older-than", "30d", "--dry-run")
    out, _ = memory("prune", "--older-than", "30d", "--yes")
    assert out.startswith("Deleted 2 conversations (8 messages) last updated before ")
    assert set(Conversation.objects.values_list("session_id", flat=True)) == {"recent", "today"}
    assert MemoryMessage.objects.count() == 8
    assert "nothing deleted" in memory("prune", "--older-than", "30d", "--yes")[0]


def test_prune_works_in_atomic_batches_with_progress() -> None:
    seed_ages()
    out, err = memory("prune", "--older-than", "1d", "--batch-size", "1", "--yes", verbosity=2)
    assert out.startswith("Deleted 3 conversations")
    assert err.splitlines() == [
        "Pruning: 1 of about 3 conversations",
        "Pruning: 2 of about 3 conversations",
        "Pruning: 3 of about 3 conversations",
    ]


def test_prune_is_quiet_at_verbosity_0_and_when_not_a_terminal() -> None:
    seed_ages()
    _, err = memory("prune", "--older-than", "1d", "--batch-size", "1", "--yes")
    assert err == ""


def test_a_failed_prune_batch_rolls_back_only_that_batch() -> None:
    conversations = seed_ages()
    real = deletion_module.delete_conversations
    calls = 0

    def fail_second(alias: str, rows: Any) -> Any:
        nonlocal calls
        calls += 1
        counts = real(alias, rows)  # the deletes run, then the batch fails
        if calls == 2:
            raise RuntimeError("disk full")
        return counts

    with (
        mock.patch("anvia_django.persistence.maintenance.delete_conversations", fail_second),
        pytest.raises(RuntimeError),
    ):
        memory("prune", "--older-than", "1d", "--batch-size", "1", "--yes")
    # The oldest went in batch 1; batch 2 (the next oldest) was rolled back whole.
    remaining = set(Conversation.objects.values_list("session_id", flat=True))
    assert remaining == {"old", "recent", "today"}
    assert MemoryMessage.objects.filter(conversation=conversations["old"]).count() == 4


def test_prune_asks_first(monkeypatch: pytest.MonkeyPatch) -> None:
    seed_ages()
    before = snapshot()
    monkeypatch.setattr("builtins.input", lambda question: "")
    with pytest.raises(CommandError, match="Cancelled"):
        memory("prune", "--older-than", "30d")
    assert snapshot() == before


@pytest.mark.parametrize("older_than", ["30", "0d", "-5d", "30 days", "d", "9999999999999w"])
def test_prune_refuses_a_bad_age(older_than: str) -> None:
    seed_ages()
    before = snapshot()
    with pytest.raises(CommandError, match="--older-than"):
        memory("prune", "--older-than", older_than, "--yes")
    assert snapshot() == before


def test_prune_requires_an_age() -> None:
    with pytest.raises(CommandError, match="older-than"):
        memory("prune", "--yes")


@given(amount=st.integers(min_value=1, max_value=10_000), unit=st.sampled_from("smhdw"))
def test_parse_age_reads_every_unit(amount: int, unit: str) -> None:
    seconds = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}[unit]
    assert parse_age(f"{amount}{unit.upper() if amount % 2 else unit}") == timedelta(
        seconds=amount * seconds
    )


def test_erasing_a_user_is_all_or_nothing() -> None:
    for n in range(3):
        seed(f"erase-{n}", user_id="leaving")
    before = snapshot()
    real = deletion_module.delete_conversations
    calls = 0

    def fail_last(alias: str, rows: Any) -> Any:
        nonlocal calls
        calls += 1
        counts = real(alias, rows)
        if calls == 3:  # the last of three one-conversation batches
            raise RuntimeError("disk full")
        return counts

    with (
        mock.patch("anvia_django.persistence.maintenance.delete_conversations", fail_last),
        pytest.raises(RuntimeError, match="disk full"),
    ):
        erase_user_conversations("leaving", batch_size=1)
    assert snapshot() == before
    memory("clear", "--user", "leaving", "--yes")
    assert not Conversation.objects.filter(user_id="leaving").exists()


def test_an_age_beyond_the_calendar_is_a_clear_error() -> None:
    with pytest.raises(CommandError, match="older-than"):
        memory("prune", "--older-than", "999999d", "--dry-run")


def test_show_and_list_escape_terminal_control_characters() -> None:
    hostile = "\x1b]52;c;ZXZpbA==\x07\x1b[2Jcleared"
    append_messages(append_input("tty\x1b[31m", [user(hostile)]))
    shown, _ = memory("show", "tty\x1b[31m")
    listed, _ = memory("list")
    for output in (shown, listed):
        assert "\x1b" not in output
        assert "\x07" not in output
    assert "\\x1b]52;c;ZXZpbA==\\x07\\x1b[2Jcleared" in shown
