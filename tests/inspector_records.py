"""Runs, forks and summaries for the inspector's read-side tests, written to
the models directly (their write paths are tested in tests/lifecycle)."""

from __future__ import annotations

from datetime import timedelta

from anvia_django.models import AgentRun, Conversation, MemorySummary

from .inspector_data import EPOCH


def make_runs(conversation: Conversation, count: int, *, same_start: bool = False) -> list[str]:
    """``count`` runs ``run-0``..; each starts a second after the previous
    one, or all at once with ``same_start`` (ties broken by id)."""
    AgentRun.objects.bulk_create(
        AgentRun(
            conversation=conversation,
            run_id=f"run-{index}",
            status="failed" if index % 3 == 2 else "succeeded",
            started_at=EPOCH + timedelta(seconds=0 if same_start else index),
            finished_at=EPOCH + timedelta(seconds=index + 1),
            model_name="m",
            input_tokens=index,
            output_tokens=1,
            total_tokens=index + 1,
            message_count=2,
        )
        for index in range(count)
    )
    return [f"run-{index}" for index in range(count)]


def make_forks(source: Conversation, count: int, *, same_time: bool = False) -> list[str]:
    """``count`` forks ``<source>-fork-0``.. of ``source``; their session ids."""
    Conversation.objects.bulk_create(
        Conversation(
            session_id=f"{source.session_id}-fork-{index}",
            created_at=EPOCH + timedelta(seconds=0 if same_time else index),
            updated_at=EPOCH + timedelta(seconds=index),
            forked_from=source,
            forked_at_position=index,
        )
        for index in range(count)
    )
    return [f"{source.session_id}-fork-{index}" for index in range(count)]


def make_summaries(conversation: Conversation, count: int) -> list[int]:
    """``count`` summaries covering through 0, 10, 20, ...; those positions."""
    MemorySummary.objects.bulk_create(
        MemorySummary(
            conversation=conversation,
            covers_through=index * 10,
            message={"role": "system", "content": f"Summary through {index * 10}."},
            created_at=EPOCH + timedelta(seconds=index),
        )
        for index in range(count)
    )
    return [index * 10 for index in range(count)]
